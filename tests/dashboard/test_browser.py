"""End to end in a real browser: Debian's Chromium, headless, driven by Playwright.

A scripted batch runs against fake brokers through the example-pool backend (as in
tests/harness/test_batch_execute.py); the dashboard runs as the real ``autocad-bench
dashboard`` command. Screenshots are saved under the test's tmp directory.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.builders import evaluation_dir
from tests.harness.brokers import fake_brokers

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "examples" / "tasks"
SECRETS = {"OPENAI_API_KEY": "sk-browser-test-secret-0001", "ANTHROPIC_API_KEY": "sk-ant-browser-secret-0002"}
BROKER_TOKEN = "dashboard-broker-token-for-tests-4q"
SCRIPT = [
    {"actions": [{"type": "click", "x": 960, "y": 540, "button": "left", "count": 1},
                 {"type": "drag", "path": [[200, 200], [400, 300], [600, 250]], "button": "left"},
                 {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]},
    {"actions": [{"type": "click", "x": 300, "y": 700, "button": "right", "count": 2},
                 {"type": "type", "text": "circle"}, {"type": "key", "keys": ["enter"]}]},
    {"actions": [{"type": "move", "x": 100, "y": 100}, {"type": "key", "keys": ["escape"]}]},
    {"actions": [{"type": "done"}]},
]

if not CHROMIUM.exists():  # CI installs it (.ci/run); a developer machine may not have it
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


def command(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(tmp_path: Path, urls: list[str], rollouts: int, *, latency: float = 0.0,
                 concurrency: int | None = None) -> Path:
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(turn) + "\n" for turn in SCRIPT))
    config = {
        "name": "dashboard-e2e", "expected_rollouts": rollouts, "max_concurrency": concurrency or len(urls),
        "execution_mode": "shared", "tasks_dir": str(TASKS),
        "infrastructure": {"backend": "example-pool", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"workers": urls, "token_env": "EXAMPLE_POOL_TOKEN",
                                        "lease_dir": str(tmp_path / "leases")}},
        "evaluation": {"enabled": False},
        "rollouts": [{"rollout_id": f"scripted-{i}", "task_id": "line-and-circle", "provider": "scripted",
                      "model": f"replay-{i}", "provider_options": {"script": str(script), "latency_s": latency}}
                     for i in range(rollouts)],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def batch_env() -> dict[str, str]:
    return {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": BROKER_TOKEN}


@contextmanager
def dashboard(root: Path) -> Iterator[str]:
    port = free_port()
    log = root.parent / f"dashboard-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([command("autocad-bench"), "dashboard", str(root), "--port", str(port)],
                                   env=batch_env(), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/api/registry", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"dashboard did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


@contextmanager
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


def assert_no_secrets(text: str) -> None:
    for value in [*SECRETS.values(), BROKER_TOKEN]:
        assert value not in text


def test_registry_rollout_frames_overlays_and_evaluation(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with fake_brokers(2, token=BROKER_TOKEN) as brokers:
        config = write_config(tmp_path, [b.url for b in brokers], 2)
        result = subprocess.run([command("autocad-bench-batch"), "--config", str(config), "--execute",
                                 "--output-dir", str(runs / "e2e")], env=batch_env(), capture_output=True,
                                text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    # This batch ran without evaluation: give one rollout an evaluation directory.
    evaluation_dir(runs / "e2e" / "rollouts" / "scripted-0", score=0.8, judge=0.6)
    with dashboard(runs) as url, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url + "/")
        page.wait_for_selector("#registry tr[data-batch='e2e']")
        assert page.locator("tr[data-batch='e2e'] .chip.done").inner_text() == "done 2"
        page.screenshot(path=str(shots / "1-registry.png"), full_page=True)
        assert_no_secrets(page.content())

        page.click("a.batch-link")
        page.wait_for_selector("#rollouts tr[data-rollout='scripted-0']")
        assert page.locator("#chart-per-model svg").count() == 1
        assert page.locator("#chart-per-tier").inner_text().count("primitives") == 1
        page.screenshot(path=str(shots / "2-batch.png"), full_page=True)
        assert_no_secrets(page.content())

        page.click("#rollouts tr[data-rollout='scripted-0'] a.rollout-link")
        page.wait_for_selector("#viewer img.frame")
        page.evaluate("window.__noReload = 'still-here'")
        steps = int(page.locator("#viewer .stepper").get_attribute("data-steps") or 0)
        assert steps == 5  # four turns and the final frame
        page.click("#viewer a.step-nav.first")
        page.wait_for_selector("#viewer .stepper[data-step='0']")
        assert page.locator("#step-label").inner_text() == f"step 1 of {steps}"
        assert page.locator("#viewer svg.overlay g.ov-click").count() == 1
        assert page.locator("#viewer svg.overlay g.ov-drag").count() == 1
        assert page.locator("#viewer svg.overlay g.ov-type").count() == 1
        assert page.evaluate("document.querySelector('#viewer img.frame').naturalWidth") == 1920
        assert page.locator("#viewer svg.overlay g.ov-click").is_visible()
        page.screenshot(path=str(shots / "3-rollout-step1.png"), full_page=True)

        page.click("#viewer a.step-nav.next")
        page.wait_for_selector("#viewer .stepper[data-step='1']")
        assert "step=1" in page.url
        assert page.locator("#viewer svg.overlay g.ov-click").count() == 1  # the right double click
        assert "right click x2" in page.locator("#step-actions").inner_text()
        page.keyboard.press("ArrowRight")
        page.wait_for_selector("#viewer .stepper[data-step='2']")
        assert page.locator("#viewer svg.overlay g.ov-move").count() == 1
        page.screenshot(path=str(shots / "4-rollout-step3.png"), full_page=True)
        page.locator("#step-range").fill("4")
        page.wait_for_selector("#viewer .stepper[data-step='4']")
        assert "Latest frame" in page.locator("#step-detail").inner_text()
        assert page.evaluate("window.__noReload") == "still-here"

        diff = page.locator("#evaluation img.diff")
        diff.scroll_into_view_if_needed()
        assert diff.is_visible()
        assert page.evaluate("document.querySelector('#evaluation img.diff').naturalWidth") > 0
        assert page.locator("#det-score").inner_text() == "0.800"
        assert "Vision judge" in page.locator("#judge").inner_text()
        assert page.locator("#components tbody tr").count() == 2
        page.locator("#evaluation").screenshot(path=str(shots / "5-evaluation.png"))
        assert_no_secrets(page.content())
        assert errors == []
    assert len(list(shots.glob("*.png"))) == 5


def test_watching_a_running_batch_updates_without_reloading(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with fake_brokers(1, token=BROKER_TOKEN) as brokers, dashboard(runs) as url, browser() as chromium:
        config = write_config(tmp_path, [brokers[0].url], 3, latency=0.5, concurrency=1)
        registry = chromium.new_page(viewport={"width": 1300, "height": 900})
        registry.goto(url + "/")
        assert "No batch under this root yet" in registry.content()
        registry.evaluate("window.__noReload = 1")
        batch_log = open(tmp_path / "batch.log", "wb")  # noqa: SIM115
        process = subprocess.Popen([command("autocad-bench-batch"), "--config", str(config), "--execute",
                                    "--output-dir", str(runs / "live")], env=batch_env(), stdout=batch_log,
                                   stderr=subprocess.STDOUT)
        try:
            # The batch appears in the open registry page by itself.
            registry.wait_for_selector("#registry tr[data-batch='live']", timeout=60_000)
            assert registry.evaluate("window.__noReload") == 1
            registry.screenshot(path=str(shots / "1-registry-live.png"), full_page=True)

            page = chromium.new_page(viewport={"width": 1300, "height": 900})
            page.goto(url + "/batch?b=live")
            page.evaluate("window.__noReload = 'batch'")
            last = chromium.new_page(viewport={"width": 1300, "height": 900})
            last.goto(url + "/rollout?b=live&r=scripted-2")
            last.evaluate("window.__noReload = 'rollout'")
            seen: dict[str, list[str]] = {}
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                states = page.evaluate(
                    "Array.from(document.querySelectorAll('#rollouts tr[data-rollout]'))"
                    ".map(r => [r.dataset.rollout, r.dataset.state])")
                for rollout, state in states:
                    history = seen.setdefault(rollout, [])
                    if not history or history[-1] != state:
                        history.append(state)
                if len(seen) == 3 and all(h[-1] in ("done", "failed") for h in seen.values()):
                    break
                if any(h[-1] == "running" for h in seen.values()) and not (shots / "2-batch-running.png").exists():
                    page.screenshot(path=str(shots / "2-batch-running.png"), full_page=True)
                page.wait_for_timeout(100)
            assert process.wait(timeout=120) == 0
        finally:
            if process.poll() is None:
                process.kill()
            batch_log.close()
        assert all(h[-1] == "done" for h in seen.values()), seen
        assert "queued" in seen["scripted-2"], seen  # waited in the queue (one sandbox at a time)
        assert any("running" in h for h in seen.values()), seen
        assert page.evaluate("window.__noReload") == "batch"
        assert int(page.evaluate("document.body.dataset.refreshed || '0'")) >= 2
        page.screenshot(path=str(shots / "3-batch-done.png"), full_page=True)
        # The rollout page, opened while that rollout was still queued, filled in by itself.
        last.wait_for_selector("#counters h3 .chip.done", timeout=30_000)
        last.wait_for_selector("#viewer img.frame", timeout=30_000)
        assert int(last.locator("#viewer .stepper").get_attribute("data-steps") or 0) == 5
        assert last.evaluate("window.__noReload") == "rollout"
        last.screenshot(path=str(shots / "4-rollout-live.png"), full_page=True)
        for open_page in (registry, page, last):
            assert_no_secrets(open_page.content())

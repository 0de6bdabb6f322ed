"""The dashboard server over HTTP: pages, fragments, files, live events, traversal and secrets."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

from autocad_bench.dashboard.app import create_app
from tests.dashboard.builders import batch_state, entry, evaluation_dir, png, rollout_dir, write_batch

SECRET = "sk-dashboard-test-secret-7f3a9c"
OUTSIDE = "OUTSIDE-THE-ROOT-5e1d"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with one finished, one running and one queued rollout, a secret in the
    environment and in files the dashboard must never show, and a batch outside the root."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    root = tmp_path / "root"
    state = batch_state([entry("done-1", "done", score=0.9, passed=True, token_cost_usd=0.2, turns=3, actions=12),
                         entry("run-1", "running"), entry("queued-1", "queued")], evaluation=True)
    state["infrastructure"]["settings"]["leaked_token"] = SECRET
    batch = write_batch(root / "runs" / "b", state)
    rollout_dir(batch, "done-1", phase="finished")
    evaluation_dir(batch / "rollouts" / "done-1")
    rollout_dir(batch, "run-1", turns=2, torn=True)
    (batch / "logs").mkdir()
    (batch / "logs" / "run-1.log").write_text(f"lifecycle output {SECRET}\n")
    (batch / "admission.json").write_text(json.dumps({"note": SECRET}))
    assignment = json.loads((batch / "rollouts" / "run-1" / "assignment.json").read_text())
    assignment["model"] = {"options": {"api_key": SECRET}}
    (batch / "rollouts" / "run-1" / "assignment.json").write_text(json.dumps(assignment))
    outside = write_batch(tmp_path / "outside", batch_state([entry("done-1", "done")], name=OUTSIDE))
    rollout_dir(outside, "done-1")
    (outside / "secret.png").write_bytes(png() + OUTSIDE.encode())
    (root / "link").symlink_to(outside)
    (batch / "rollouts" / "done-1" / "frames" / "evil.png").symlink_to(outside / "secret.png")
    return root


@pytest.fixture
async def client(tree: Path) -> AsyncIterator[TestClient[object, object]]:
    app = create_app(tree, poll_s=0.05, page_size=2)
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client


async def get_text(client: TestClient[object, object], path: str) -> tuple[int, str]:
    response = await client.get(path)
    body = await response.read()
    return response.status, body.decode("utf-8", "replace")


def q(value: str) -> str:
    return quote(value, safe="")


async def test_pages_render(client: TestClient[object, object]) -> None:
    status, html = await get_text(client, "/")
    assert status == 200 and 'href="/batch?b=runs%2Fb"' in html
    assert re.search(r'data-state="queued">queued 1', html) and re.search(r'data-state="running">running 1', html)
    status, html = await get_text(client, "/batch?b=runs/b")
    assert status == 200
    assert html.count('class="rollout-link"') == 2  # page size 2
    assert 'rel="next"' in html and "Cost vs score per rollout" in html and "<svg" in html
    status, page2 = await get_text(client, "/batch?b=runs/b&page=2")
    assert 'data-rollout="queued-1"' in page2 and page2.count('class="rollout-link"') == 1
    status, filtered = await get_text(client, "/batch?b=runs/b&state=done")
    assert 'data-rollout="done-1"' in filtered and 'data-rollout="run-1"' not in filtered
    status, html = await get_text(client, "/rollout?b=runs/b&r=done-1&step=0")
    assert status == 200
    assert 'class="ov ov-click"' in html and 'class="ov ov-drag"' in html and 'class="ov ov-type"' in html
    assert 'class="diff"' in html and 'id="judge"' in html and 'id="det-score"' in html
    status, html = await get_text(client, "/rollout?b=runs/b&r=run-1")
    assert status == 200 and "model_turns.jsonl 1" in html  # the torn line is reported, not fatal
    status, html = await get_text(client, "/rollout?b=runs/b&r=queued-1")
    assert status == 200 and "Queued" in html
    status, html = await get_text(client, "/fragment/step?b=runs/b&r=done-1&step=2")
    assert status == 200 and "step 3 of 4" in html
    response = await client.get("/file?b=runs/b&r=done-1&p=frames/000001.png")
    assert response.status == 200 and response.headers["Content-Type"] == "image/png"
    assert (await response.read()).startswith(b"\x89PNG")
    data = await (await client.get("/api/batch?b=runs/b")).json()
    assert [r["state"] for r in data["rollouts"]] == ["done", "running", "queued"]
    assert "path" not in data
    script = await client.get("/static/dashboard.js")
    assert script.status == 200 and "EventSource" in await script.text()


async def test_security_headers_and_host_check(client: TestClient[object, object]) -> None:
    response = await client.get("/")
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    response = await client.get("/", headers={"Host": "attacker.example:8765"})
    assert response.status == 403


ROUTES = [
    "/batch?b={x}", "/fragment/batch?b={x}", "/api/batch?b={x}", "/events?b={x}",
    "/rollout?b={x}&r=done-1", "/rollout?b=runs/b&r={x}", "/fragment/rollout?b={x}&r=done-1",
    "/fragment/rollout?b=runs/b&r={x}", "/fragment/step?b={x}&r=done-1&step=0", "/fragment/step?b=runs/b&r={x}",
    "/file?b={x}&r=done-1&p=reference.png", "/file?b=runs/b&r={x}&p=reference.png",
    "/file?b=runs/b&r=done-1&p={x}", "/events?b=runs/b&r={x}", "/static/{x}",
]


async def test_traversal_is_refused_on_every_route(client: TestClient[object, object], tree: Path) -> None:
    outside = tree.parent / "outside"
    attacks = ["../outside", "..", "../..", "/etc", str(outside), "runs/b/../../../outside", "link", "link/",
               "runs/b/rollouts/../../../../outside", "..\\outside", "%2e%2e/outside",
               "runs/b/../../../outside/secret.png",
               "../../../outside/secret.png", "frames/evil.png", "../../../../outside/rollouts/done-1/reference.png",
               "/etc/passwd", "run-state.json", "../logs/run-1.log", "\x00"]
    checked = 0
    for route in ROUTES:
        for attack in attacks:
            path = route.replace("{x}", q(attack))
            response = await client.get(path)
            body = await response.content.read(200_000) if response.status == 200 else await response.read()
            response.close()
            # "/static/.." is normalised to "/" (the registry) before it is sent: not a traversal.
            assert response.status in (400, 403, 404) or response.url.path == "/", (path, response.status)
            assert OUTSIDE.encode() not in body and SECRET.encode() not in body, path
            checked += 1
    for raw in ("/static/../reader.py", "/static/..%2Freader.py", "/..%2F..%2Fetc%2Fpasswd", "/file/../../outside"):
        response = await client.get(raw)
        assert response.status in (400, 403, 404), raw
    assert checked == len(ROUTES) * len(attacks)


async def test_no_response_contains_a_secret(client: TestClient[object, object]) -> None:
    paths = ["/", "/fragment/registry", "/api/registry", "/batch?b=runs/b", "/batch?b=runs/b&page=2",
             "/fragment/batch?b=runs/b", "/api/batch?b=runs/b", "/static/dashboard.js"]
    for rollout in ("done-1", "run-1", "queued-1"):
        paths += [f"/rollout?b=runs/b&r={rollout}", f"/fragment/rollout?b=runs/b&r={rollout}",
                  f"/fragment/step?b=runs/b&r={rollout}&step=0"]
    paths += ["/file?b=runs/b&r=done-1&p=reference.png", "/file?b=runs/b&r=done-1&p=evaluation/diff.png"]
    seen = 0
    for path in paths:
        status, body = await get_text(client, path)
        assert status == 200, path
        assert SECRET not in body, path
        seen += 1
    for path in ("/events", "/events?b=runs/b", "/events?b=runs/b&r=run-1"):
        response = await client.get(path)
        chunk = await asyncio.wait_for(response.content.read(2000), timeout=5)
        response.close()
        assert b"event: change" in chunk and SECRET.encode() not in chunk
    assert seen == len(paths)


async def test_events_announce_changes(client: TestClient[object, object], tree: Path) -> None:
    response = await client.get("/events?b=runs/b")
    stream = response.content

    async def next_signature() -> str:
        while True:
            line = (await asyncio.wait_for(stream.readline(), timeout=5)).decode()
            if line.startswith("data: "):
                return line[6:].strip()

    first = await next_signature()
    state_path = tree / "runs" / "b" / "batch-state.json"
    state = json.loads(state_path.read_text())
    state["rollouts"][2]["state"] = "starting"
    state_path.write_text(json.dumps(state))
    second = await next_signature()
    assert second != first
    response.close()
    _, html = await get_text(client, "/fragment/batch?b=runs/b&page=2")
    assert 'data-rollout="queued-1" data-state="starting"' in html


async def test_pagination_at_scale(tmp_path: Path) -> None:
    write_batch(tmp_path / "big", batch_state([entry(f"r{i:04d}", "done" if i % 2 else "queued", score=0.5,
                                                    passed=True) for i in range(600)]))
    async with TestClient(TestServer(create_app(tmp_path), host="127.0.0.1")) as client:
        status, html = await get_text(client, "/batch?b=big")
        assert status == 200 and html.count('class="rollout-link"') == 100
        status, html = await get_text(client, "/batch?b=big&page=6")
        assert status == 200 and 'data-rollout="r0599"' in html and html.count('class="rollout-link"') == 100
        _, html = await get_text(client, "/batch?b=big&page=999")
        assert 'data-rollout="r0599"' in html  # clamped to the last page
        _, html = await get_text(client, "/batch?b=big&state=queued&page=3")
        assert html.count('class="rollout-link"') == 100 and 'data-state="done"' not in html.split("<tbody>")[-1]

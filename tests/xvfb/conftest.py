"""Fixtures of the local-xvfb backend tests: isolated state, the tool checks, process scans."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest
from autocad_bench.storage import atomic_write_json
from autocad_bench_xvfb.plugin import LocalXvfbPlugin

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TEMPLATE = EXAMPLES / "tasks" / "line-and-circle" / "template.dxf"
SCRIPT = EXAMPLES / "scripts" / "line-and-circle.jsonl"
FAKE_BROKER = Path(__file__).with_name("fake_broker_cli.py")
VERSION = "windows-autocad-2019-v11"

needs_xvfb = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is required (apt-get install -y xvfb)")
needs_desktop = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("Xvfb", "librecad", "xdotool")),
    reason="Xvfb, LibreCAD and xdotool are required (apt-get install -y xvfb librecad xdotool)",
)


def fake_broker(mode: str) -> tuple[str, ...]:
    return (sys.executable, str(FAKE_BROKER), mode)


def spec(state_dir: Path, **settings: object) -> InfrastructureSpec:
    return InfrastructureSpec(backend="local-xvfb", broker_version=VERSION,
                              settings={"state_dir": str(state_dir), **settings})


def launch_request(tmp_path: Path, infrastructure: InfrastructureSpec, *, rollout_id: str = "r1",
                   child: tuple[str, ...] = ("true",), evaluation: bool = False,
                   batch_id: str = "test-batch") -> RolloutLaunchRequest:
    output = tmp_path / "batch" / "rollouts" / rollout_id
    output.mkdir(parents=True, exist_ok=True)
    (tmp_path / "batch" / "logs").mkdir(parents=True, exist_ok=True)
    return RolloutLaunchRequest(
        batch_id=batch_id, rollout_id=rollout_id, attempt_id=f"{batch_id}.{rollout_id}.1", task_id="line-and-circle",
        spec=infrastructure, child_command=child, output_dir=output,
        log_path=tmp_path / "batch" / "logs" / f"{rollout_id}.log",
        evaluation=EvaluationArguments(enabled=evaluation, task_id="line-and-circle"),
        task_template=TEMPLATE,
    )


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Running processes whose command line or environment contains ``text`` (not this one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rfind(")") + 2:].split()[0] == "Z":
                continue
            blob = (entry / "cmdline").read_bytes() + b"\0" + (entry / "environ").read_bytes()
        except OSError:
            continue
        if text.encode() in blob:
            found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]))
    return found


@pytest.fixture(autouse=True)
def _owns_its_processes(owned_processes: Path) -> None:
    """Desktops, brokers, controllers and wrappers a test starts die with it, whatever the outcome."""


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def make_plugin() -> Callable[..., LocalXvfbPlugin]:
    def make(mode: str | None = None) -> LocalXvfbPlugin:
        return LocalXvfbPlugin(broker_command=fake_broker(mode) if mode else None)

    return make


def write_config(path: Path, config: dict[str, object]) -> Path:
    atomic_write_json(path, config)
    return path

"""The broker CLI end to end: real Xvfb, real LibreCAD, PyAutoGUI input and mss capture.

The broker runs exactly as the local-xvfb backend starts it (``python -m
autocad_bench_broker serve ...`` with the token in the environment and a ready file), and the
test drives it through :class:`BrokerClient` like the harness does: lease, reset, a batch that
draws a line and one that draws a circle through LibreCAD's command line, checkpoint, fetch
the artifact and read it back with ezdxf. Release and SIGTERM must leave no process behind.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ezdxf
import pytest
from PIL import Image

from autocad_bench.actions import ACTION_ADAPTER, Action, action_request_id
from autocad_bench.broker import BrokerClient
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.procgroup import group_members, is_running

from .conftest import needs_librecad, needs_xvfb

pytestmark = [pytest.mark.integration, needs_xvfb, needs_librecad]

# The "Command:" input of LibreCAD's command line dock in the seeded 1920x1050 layout.
COMMAND_INPUT = (1750, 932)
READY_TIMEOUT_S = 30.0


@dataclass
class Broker:
    process: subprocess.Popen[bytes]
    ready_file: Path
    ready: dict[str, Any]
    token: str
    workdir: Path
    log: Path

    def client(self) -> BrokerClient:
        return BrokerClient(self.ready["url"], self.token, operation_deadline_s=90.0)

    def terminate(self, timeout_s: float = 40.0) -> int:
        """SIGTERM the broker and wait for it (bounded); returns its exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


@pytest.fixture
def template(tmp_path: Path) -> Path:
    doc = ezdxf.new("R2007")
    doc.modelspace().add_circle((500, 500), 25)
    path = tmp_path / "template.dxf"
    doc.saveas(path)
    return path


@pytest.fixture
def broker(xvfb: XvfbDisplay, template: Path, tmp_path: Path) -> Iterator[Broker]:
    token = secrets.token_urlsafe(32)
    workdir = tmp_path / "runtime"
    ready_file = tmp_path / "ready" / "broker.json"
    log = tmp_path / "broker.log"
    command = [
        sys.executable,
        "-m",
        "autocad_bench_broker",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--app",
        "librecad",
        "--display",
        xvfb.name,
        "--workdir",
        str(workdir),
        "--template",
        str(template),
        "--ready-file",
        str(ready_file),
        "--broker-version",
        "windows-autocad-2019-v11",
    ]
    env = {key: value for key, value in os.environ.items() if key != "DISPLAY"}
    env["AUTOCAD_BENCH_BROKER_TOKEN"] = token
    with open(log, "wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready_file.exists():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the broker did not become ready"
            time.sleep(0.05)
        ready = json.loads(ready_file.read_text())
        yield Broker(process, ready_file, ready, token, workdir, log)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def batch(*items: dict[str, Any]) -> tuple[Action, ...]:
    return tuple(ACTION_ADAPTER.validate_python(item) for item in items)


def command(*entries: str) -> list[dict[str, Any]]:
    """Click the command input, type each entry followed by Enter."""
    x, y = COMMAND_INPUT
    items: list[dict[str, Any]] = [{"type": "click", "x": x, "y": y, "button": "left", "count": 1}]
    for entry in entries:
        items += [{"type": "type", "text": entry}, {"type": "key", "keys": ["enter"]}]
    return items


ESCAPE_TWICE = [{"type": "key", "keys": ["escape"]}, {"type": "key", "keys": ["escape"]}]


async def _app_pid(client: BrokerClient) -> int:
    events = (await client.events()).events
    reset = [event for event in events if event.kind == "reset"][-1]
    pid = reset.detail["pid"]
    assert isinstance(pid, int)
    return pid


def test_draw_checkpoint_and_release_through_the_broker_cli(broker: Broker, xvfb: XvfbDisplay) -> None:
    async def scenario() -> tuple[bytes, int]:
        client = broker.client()
        health = await client.health()
        assert health.pid == broker.ready["pid"] == broker.process.pid
        assert health.startup_id == broker.ready["startup_id"]
        assert health.app == "librecad" and health.state == "idle"
        assert health.interactive_session_id == xvfb.number
        assert (health.desktop_width, health.desktop_height) == (1920, 1080)
        assert health.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()

        lease = await client.lease("line-and-circle", "attempt-1")
        session = lease.session_id
        reset = await client.reset(session)
        assert reset.frame.sequence == 0
        frame0 = await client.frame(0, expected_sha256=reset.frame.sha256)
        assert Image.open(io.BytesIO(frame0)).size == (1920, 1080)
        pid = await _app_pid(client)
        assert is_running(pid)

        line = batch(*command("line", "0,0", "100,0"), *ESCAPE_TWICE)
        first = await client.actions(session, action_request_id("attempt-1", "toolu_1", 0), 0, line)
        assert all(receipt.ok for receipt in first.receipts) and first.next_index == len(line)
        circle = batch(*command("circle", "50,50", "20"), *ESCAPE_TWICE)
        second = await client.actions(session, action_request_id("attempt-1", "toolu_2", 0), first.next_index, circle)
        assert all(receipt.ok for receipt in second.receipts)
        assert second.frame.sequence == 2 and second.frame.sha256 != reset.frame.sha256
        await client.frame(2, expected_sha256=second.frame.sha256)
        replay = await client.actions(session, action_request_id("attempt-1", "toolu_2", 0), first.next_index, circle)
        assert replay.replayed and replay.frame == second.frame

        saved = await client.checkpoint(session, f"checkpoint-{second.next_index}")
        assert saved.artifact.name == "attempt.dxf" and saved.next_index == second.next_index
        drawing = await client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)

        released = await client.release(session)
        assert not released.replayed
        assert (await client.release(session)).replayed
        assert (await client.status()).state == "released"
        kinds = [event.kind for event in (await client.events()).events]
        assert kinds == ["startup", "lease", "reset_attempt", "reset", "actions", "actions", "checkpoint", "release"]
        return drawing, pid

    drawing, pid = asyncio.run(scenario())

    doc = ezdxf.read(io.StringIO(drawing.decode("utf-8")))
    lines = [(tuple(e.dxf.start), tuple(e.dxf.end)) for e in doc.modelspace().query("LINE")]
    circles = sorted((tuple(e.dxf.center), e.dxf.radius) for e in doc.modelspace().query("CIRCLE"))
    assert lines == [((0.0, 0.0, 0.0), (100.0, 0.0, 0.0))]
    assert circles == [((50.0, 50.0, 0.0), 20.0), ((500.0, 500.0, 0.0), 25.0)]

    # Release killed LibreCAD's whole process group.
    assert not is_running(pid)
    assert group_members(pid) == ()

    assert broker.terminate() == 0
    assert not broker.ready_file.exists()
    assert group_members(broker.process.pid) == ()


def test_sigterm_kills_the_running_application(broker: Broker) -> None:
    async def scenario() -> int:
        client = broker.client()
        lease = await client.lease("line-and-circle", "attempt-2")
        await client.reset(lease.session_id)
        return await _app_pid(client)

    pid = asyncio.run(scenario())
    assert is_running(pid)
    started = time.monotonic()
    assert broker.terminate() == 0
    assert time.monotonic() - started < 30
    assert not is_running(pid) and group_members(pid) == ()
    assert not broker.ready_file.exists()
    log = broker.log.read_text()
    assert "Traceback" not in log and broker.token not in log
    events = [json.loads(line) for line in (broker.workdir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["kind"] == "shutdown" and events[-1]["detail"]["kill"]["gone"] is True


def _xdotool_move(display: XvfbDisplay, x: int, y: int) -> None:
    """Move the pointer outside the broker, as the application itself might (XTest via xdotool)."""
    env = {**os.environ, "DISPLAY": display.name}
    subprocess.run(["xdotool", "mousemove", "--sync", str(x), str(y)], env=env, check=True, timeout=10)


def test_frames_report_the_pointer_read_from_the_desktop(broker: Broker, xvfb: XvfbDisplay) -> None:
    """Each frame carries the pointer where the X server says it is, including moves the broker
    never made; a replay repeats the pointer of its original answer."""

    async def scenario() -> None:
        client = broker.client()
        session = (await client.lease("pointer", "attempt-1")).session_id
        _xdotool_move(xvfb, 77, 88)
        reset = await client.reset(session)
        assert reset.frame.pointer == (77, 88)

        moved = batch({"type": "move", "x": 900, "y": 500})
        first = await client.actions(session, action_request_id("attempt-1", "toolu_1", 0), 0, moved)
        assert first.frame.pointer == (900, 500)

        # A move the broker did not make: the next frame reports it, not the last action's point.
        _xdotool_move(xvfb, 1234, 321)
        pause = batch({"type": "wait", "seconds": 0.1})
        second_id = action_request_id("attempt-1", "toolu_2", 0)
        second, _png = await client.actions_with_frame(session, second_id, first.next_index, pause)
        assert second.frame.pointer == (1234, 321)

        _xdotool_move(xvfb, 5, 6)
        replay = await client.actions(session, second_id, first.next_index, pause)
        assert replay.replayed and replay.frame == second.frame and replay.frame.pointer == (1234, 321)
        recorded = (await client.frame_events()).frame_events
        assert [event.pointer for event in recorded] == [(77, 88), (900, 500), (1234, 321)]
        await client.release(session)

    asyncio.run(scenario())

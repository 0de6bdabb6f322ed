"""The real broker and the fake broker serve one protocol layer, and write files one way.

:class:`~autocad_bench.broker.service.BrokerService` is the only HTTP implementation of
``docs/broker-protocol.md``; these tests pin that both brokers are drivers under it and that
the same requests get the same answers (codes, bodies, replay rules) from both. The storage
half checks the atomic-write helper every broker file now goes through.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from autocad_bench.actions import action_request_id
from autocad_bench.broker.service import BrokerService, DesktopDriver
from autocad_bench.providers.models import DisplaySize
from autocad_bench.storage import atomic_write_bytes
from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench_broker.apps.librecad import LibreCADAdapter
from autocad_bench_broker.cli import write_ready_file
from autocad_bench_broker.readiness import write_json_atomic
from autocad_bench_broker.server import BrokerServer

from .server_fakes import SIZE, running_rig

LINE = [{"type": "click", "x": 10, "y": 20, "button": "left", "count": 1}, {"type": "type", "text": "line"}]


def test_both_brokers_are_drivers_under_the_one_service() -> None:
    assert issubclass(BrokerServer, DesktopDriver) and issubclass(FakeBroker, DesktopDriver)
    fake = FakeBroker()
    assert isinstance(fake.service, BrokerService) and fake.service.driver is fake


async def _script(url: str, token: str) -> list[tuple[int, Any]]:
    """One scripted exchange touching every rule; answers reduced to what must agree."""
    auth = {"Authorization": f"Bearer {token}"}
    answers: list[tuple[int, Any]] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:

        async def call(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
            async with http.request(method, url + path, json=body, headers=auth if headers is None else headers) as r:
                data = await r.json(content_type=None) if r.content_type == "application/json" else None
                keep = {k: data[k] for k in ("code", "next_index", "replayed", "first_index") if data and k in data}
                answers.append((r.status, keep))
                return data

        await call("GET", "/health", headers={})
        await call("GET", "/nowhere")
        await call("GET", "/lease")
        await call("POST", "/lease", {"task_id": "t"})
        session = (await call("POST", "/lease", {"task_id": "t", "attempt_id": "a"}))["session_id"]
        await call("POST", "/lease", {"task_id": "t", "attempt_id": "a"})
        await call("POST", "/lease", {"task_id": "t", "attempt_id": "b"})
        await call("POST", "/reset", {"session_id": "nope", "request_id": "reset-nope"})
        first = {"session_id": session, "request_id": action_request_id("a", "toolu_0", 0), "expected_index": 0}
        await call("POST", "/actions", first | {"actions": LINE})
        await call("POST", "/reset", {"session_id": session, "request_id": "reset-x"})
        await call("POST", "/reset", {"session_id": session, "request_id": f"reset-{session}"})
        await call("POST", "/reset", {"session_id": session, "request_id": f"reset-{session}"})
        await call("POST", "/actions", first | {"actions": [{"type": "click", "x": 9999, "y": 0}]})
        await call("POST", "/actions", first | {"actions": LINE})
        await call("POST", "/actions", first | {"actions": LINE})
        await call("POST", "/actions", first | {"actions": LINE[:1]})
        second = first | {"request_id": action_request_id("a", "toolu_1", 0)}
        await call("POST", "/actions", second | {"actions": LINE})
        await call("GET", "/frames/abc")
        await call("GET", "/frames/99")
        await call("GET", "/artifacts/..")
        await call("GET", "/artifacts/none.dxf")
        await call("POST", "/checkpoint", {"session_id": session, "request_id": "checkpoint-2"})
        await call("POST", "/checkpoint", {"session_id": session, "request_id": "checkpoint-2"})
        await call("POST", "/release", {"session_id": session})
        await call("POST", "/release", {"session_id": session})
        await call("POST", "/checkpoint", {"session_id": session, "request_id": "checkpoint-3"})
        await call("POST", "/lease", {"task_id": "t", "attempt_id": "a"})
        await call("POST", "/lease", {"task_id": "t", "attempt_id": "c"})
    return answers


async def test_the_real_and_the_fake_broker_answer_alike(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        real = await _script(rig.url, rig.token)
    async with FakeBroker(display=DisplaySize(width=SIZE[0], height=SIZE[1])) as fake:
        faked = await _script(fake.url, fake.token)
    assert real == faked
    statuses = [status for status, _ in real]
    assert statuses[:4] == [401, 404, 405, 400] and statuses.count(409) == 4 and statuses.count(412) == 2


def test_atomic_write_sets_exact_mode_bits_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "token.json"
    old = os.umask(0o277)
    try:
        atomic_write_bytes(target, b"secret", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_bytes() == b"secret"
    assert [path.name for path in tmp_path.iterdir()] == ["token.json"]


def test_broker_files_go_through_the_atomic_helper(tmp_path: Path) -> None:
    ready = tmp_path / "a" / "ready.json"
    write_ready_file(ready, {"url": "http://127.0.0.1:1", "port": 1})
    assert ready.read_bytes() == json.dumps({"url": "http://127.0.0.1:1", "port": 1}).encode()
    manifest = tmp_path / "b" / "manifest.json"
    write_json_atomic(manifest, b"{}\n")
    assert manifest.read_bytes() == b"{}\n"
    template, attempt = tmp_path / "template.dxf", tmp_path / "c" / "attempt.dxf"
    template.write_bytes(b"TEMPLATE")
    Path(f"{attempt}~").parent.mkdir(parents=True)
    Path(f"{attempt}~").write_bytes(b"old backup")
    LibreCADAdapter._restore_template(template, attempt)
    assert attempt.read_bytes() == b"TEMPLATE" and [p.name for p in attempt.parent.iterdir()] == ["attempt.dxf"]


@pytest.mark.parametrize("durable", [True, False])
def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, durable: bool) -> None:
    target = tmp_path / "frame.png"
    target.write_bytes(b"old")

    with pytest.raises(TypeError):
        atomic_write_bytes(target, 42, durable=durable)  # type: ignore[arg-type]
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["frame.png"]

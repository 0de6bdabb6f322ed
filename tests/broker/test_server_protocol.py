"""The real broker server over real HTTP, on a recording driver and in-memory desktop fakes.

Every test talks HTTP to :class:`~autocad_bench_broker.server.BrokerServer` (raw aiohttp for
exact status codes and bodies, :class:`BrokerClient` where the client's checks help) and
checks the side effects where they happen: the driver's input log, the adapter's launch,
checkpoint and kill counters, the event log and the files under the runtime directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from yarl import URL

from autocad_bench.actions import ACTION_ADAPTER, DoneAction, action_request_id
from autocad_bench.broker import BrokerConflict, BrokerHTTPError
from autocad_bench.broker.protocol import (
    ACTIONS_FRAME_MEDIA_TYPE,
    ACTIONS_LENGTH_HEADER,
    ActionsResponse,
    ArtifactInfo,
    CheckpointResponse,
    ErrorResponse,
    EventsResponse,
    FrameEventsResponse,
    HealthResponse,
    ResetResponse,
    StatusResponse,
)
from autocad_bench_broker.cli import main as cli_main
from autocad_bench_broker.cli import write_ready_file
from autocad_bench_broker.desktop import settle_and_encode
from autocad_bench_broker.drivers.capture import Frame, PngImage, StabilityPolicy, encode_png
from autocad_bench_broker.drivers.input import RecordedCall
from autocad_bench_broker.errors import CaptureError
from autocad_bench_broker.identity import IdentityError, display_number, manifest_sha256, package_sha256
from autocad_bench_broker.store import NotStored, SessionFiles, StoreError, inside

from .server_fakes import SIZE, FailingDriver, Rig, running_rig

UNAUTHORIZED = {"code": "unauthorized", "message": "unauthorized", "next_index": None, "problems": []}
LINE = [
    {"type": "click", "x": 10, "y": 20, "button": "left", "count": 1},
    {"type": "type", "text": "line"},
    {"type": "key", "keys": ["enter"]},
]


def rid(n: int | str, attempt: str = "attempt-1") -> str:
    return action_request_id(attempt, f"toolu_{n}", 0)


async def leased(rig: Rig, task: str = "task-1", attempt: str = "attempt-1") -> str:
    status, body = await rig.post("/lease", {"task_id": task, "attempt_id": attempt})
    assert status == 200, body
    return str(body["session_id"])


async def ready(rig: Rig) -> str:
    session = await leased(rig)
    status, body = await rig.post("/reset", {"session_id": session, "request_id": f"reset-{session}"})
    assert status == 200, body
    return session


def actions_body(session: str, request_id: str, index: int, actions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"session_id": session, "request_id": request_id, "expected_index": index, "actions": actions}


async def events(rig: Rig) -> list[str]:
    status, raw = await rig.get("/events")
    assert status == 200
    return [event.kind for event in EventsResponse.model_validate_json(raw).events]


# The session store on disk (no server: its own public functions) --------------------------------

LOW, HIGH = "0" * 64, "f" * 64
"""Recorded digests that sort below and above any real one: a mismatch either way is refused."""


def png_of(data: bytes) -> PngImage:
    digest = hashlib.sha256(data).hexdigest()
    return PngImage(data=data, sha256=digest, width=1, height=1, frame_sha256=digest, compress_level=1, encode_ms=0.0)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def created_files(tmp_path: Path) -> SessionFiles:
    files = SessionFiles(tmp_path / "work" / "sessions" / "session-1")  # no parent exists yet
    files.create()
    return files


def test_a_session_store_is_three_directories_under_its_root(tmp_path: Path) -> None:
    files = created_files(tmp_path)
    root = tmp_path / "work" / "sessions" / "session-1"
    assert sorted(p.name for p in root.iterdir()) == ["artifacts", "attempt", "frames"]
    assert all((root / name).is_dir() for name in ("artifacts", "attempt", "frames"))
    files.create()  # idempotent: a reused runtime directory is fine
    assert files.attempt_path("attempt.dxf") == root / "attempt" / "attempt.dxf"
    files.remove()
    assert not root.exists()
    files.remove()  # best effort: nothing left to remove is not an error


def test_frames_are_stored_by_six_digit_sequence_and_reread_against_their_digest(tmp_path: Path) -> None:
    files = created_files(tmp_path)
    first, later = b"PNG frame zero", b"PNG frame seven"
    assert files.write_frame(0, png_of(first)) == files.root / "frames" / "000000.png"
    assert files.write_frame(7, png_of(later)) == files.root / "frames" / "000007.png"
    assert SessionFiles.frame_name(123456) == "123456.png"
    assert sorted(p.name for p in (files.root / "frames").iterdir()) == ["000000.png", "000007.png"]
    assert files.read_frame(0, sha(first)) == first and files.read_frame(7, sha(later)) == later
    for wrong in (LOW, HIGH, sha(first)):
        with pytest.raises(StoreError, match=r"000007\.png changed on disk since it was recorded"):
            files.read_frame(7, wrong)
    (files.root / "frames" / "000007.png").write_bytes(b"PNG frame 7, damaged")
    with pytest.raises(StoreError, match="changed on disk"):
        files.read_frame(7, sha(later))
    with pytest.raises(NotStored):
        files.read_frame(3, sha(first))
    (files.root / "frames" / "000009.png").mkdir()  # unreadable as a file: a fault, not a 404
    with pytest.raises(StoreError, match=r"cannot read 000009\.png") as error:
        files.read_frame(9, sha(first))
    assert type(error.value) is StoreError


def test_an_artifact_is_a_snapshot_served_only_under_its_digest(tmp_path: Path) -> None:
    files = created_files(tmp_path)
    drawing = files.attempt_path("attempt.dxf")
    drawing.write_bytes(b"FAKE DRAWING v1")
    info = files.store_artifact(drawing, "attempt.dxf")
    assert info == ArtifactInfo(name="attempt.dxf", size=15, sha256=sha(b"FAKE DRAWING v1"))
    assert (files.root / "artifacts" / "attempt.dxf").read_bytes() == b"FAKE DRAWING v1"
    drawing.write_bytes(b"changed by the model later")
    assert files.read_artifact("attempt.dxf", info.sha256) == b"FAKE DRAWING v1"
    for wrong in (LOW, HIGH):
        with pytest.raises(StoreError, match="changed on disk"):
            files.read_artifact("attempt.dxf", wrong)
    with pytest.raises(NotStored):
        files.read_artifact("other.dxf", info.sha256)
    for name in ("../attempt.dxf", ".attempt.dxf", "a/b.dxf"):
        with pytest.raises(StoreError, match="not a plain file name") as error:
            files.store_artifact(drawing, name)
        assert type(error.value) is StoreError
        with pytest.raises(StoreError, match="not a plain file name"):
            files.read_artifact(name, info.sha256)
    with pytest.raises(StoreError, match="cannot read the saved drawing"):
        files.store_artifact(files.attempt_path("missing.dxf"), "attempt.dxf")
    (files.root / "artifacts").rename(files.root / "gone")
    with pytest.raises(StoreError, match="cannot store the artifact"):
        files.store_artifact(drawing, "attempt.dxf")


def test_inside_admits_only_a_regular_file_directly_in_its_directory(tmp_path: Path) -> None:
    directory = tmp_path / "dir"
    directory.mkdir()
    (directory / "plain.dxf").write_bytes(b"x")
    (directory / "sub").mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (directory / "link.dxf").symlink_to(tmp_path / "secret.txt")
    assert inside(directory, "plain.dxf") == directory / "plain.dxf"
    for name in ("missing.dxf", "sub", "link.dxf"):
        with pytest.raises(NotStored) as missing:
            inside(directory, name)
        assert type(missing.value) is NotStored
    for bad in ("..", "../secret.txt", ".hidden", ""):
        with pytest.raises(StoreError, match="not a plain file name"):
            inside(directory, bad)
    with pytest.raises(StoreError, match=r"cannot stat plain\.dxf") as error:
        inside(directory / "plain.dxf", "plain.dxf")  # the "directory" is a file
    assert type(error.value) is StoreError


@pytest.mark.parametrize("outside", ["a-outside", "z-outside"])  # sorting before and after "m-dir"
def test_inside_refuses_a_file_swapped_for_a_symlink_after_it_was_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outside: str
) -> None:
    directory, elsewhere = tmp_path / "m-dir", tmp_path / outside
    directory.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.dxf").write_text("outside")
    target = directory / "attempt.dxf"
    target.write_text("inside")
    real_lstat = os.lstat
    swapped: list[bool] = []

    def lstat_then_swap(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        result = real_lstat(path, *args, **kwargs)
        if not swapped and Path(path) == target:
            swapped.append(True)  # the race: replaced right after the check looked at it
            target.unlink()
            target.symlink_to(elsewhere / "secret.dxf")
        return result

    monkeypatch.setattr(os, "lstat", lstat_then_swap)
    with pytest.raises(StoreError, match="name resolves outside its directory"):
        inside(directory, "attempt.dxf")
    assert swapped


# Health and authentication ----------------------------------------------------------------------


async def test_health_reports_the_broker_and_desktop_identity(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        health = await rig.client().health()
        assert isinstance(health, HealthResponse)
        assert health.pid == os.getpid()
        assert (health.desktop_width, health.desktop_height) == SIZE
        assert health.boot_id == "boot-test" and health.startup_id == "start-1"
        assert health.interactive_session_id == 7
        assert health.app == "fake-cad" and health.state == "idle" and health.session_id is None
        assert health.input_driver_version == rig.driver.version
        assert health.broker_version == "windows-autocad-2019-v11"


async def test_every_authentication_failure_gets_the_same_answer(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        attempts = [
            ("GET", "/health", {}),
            ("GET", "/health", {"Authorization": f"Bearer {rig.token}x"}),
            ("GET", "/health", {"Authorization": f"bearer {rig.token}"}),
            ("GET", "/health", {"Authorization": f"Basic {rig.token}"}),
            ("GET", "/health", {"Authorization": rig.token}),
            ("GET", "/health", {"Authorization": f"Bearer  {rig.token}"}),
            ("GET", "/no-such-route", {}),
            ("POST", "/lease", {"Authorization": "Bearer wrong"}),
            ("DELETE", "/health", {}),
        ]
        answers = set()
        for method, path, headers in attempts:
            async with rig.http.request(method, rig.url + path, headers=headers, json={}) as response:
                body = await response.read()
                assert response.status == 401, (method, path, headers)
                assert response.headers["WWW-Authenticate"] == "Bearer"
                assert rig.token.encode() not in body
                answers.add(body)
        assert len(answers) == 1
        assert json.loads(answers.pop()) == UNAUTHORIZED
        assert rig.driver.calls == [] and await events(rig) == ["startup"]


async def test_unknown_route_and_wrong_method_are_protocol_errors(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        status, body = await rig.get("/nothing-here")
        assert status == 404 and json.loads(body)["code"] == "not_found"
        async with rig.http.get(rig.url + "/lease", headers=rig.auth) as response:
            assert response.status == 405
            assert (await response.json())["code"] == "method_not_allowed"


# Lease --------------------------------------------------------------------------------------------


async def test_lease_replays_for_the_same_identity_and_conflicts_for_another(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        client = rig.client()
        first = await client.lease("task-1", "attempt-1")
        again = await client.lease("task-1", "attempt-1")
        assert not first.replayed and again.replayed
        assert again.session_id == first.session_id
        with pytest.raises(BrokerConflict) as conflict:
            await client.lease("task-1", "attempt-2")
        assert conflict.value.code == "lease_conflict"
        assert await events(rig) == ["startup", "lease"]
        await client.release(first.session_id)
        second = await client.lease("task-1", "attempt-2")
        assert second.session_id != first.session_id and not second.replayed


async def test_malformed_bodies_are_bad_requests(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        for data in (b"not json", b"[1, 2]", b'{"task_id": "t", "attempt_id": NaN}', b"\xff\xfe"):
            async with rig.http.post(rig.url + "/lease", data=data, headers=rig.auth) as response:
                assert response.status == 400, data
                assert (await response.json())["code"] == "bad_request"
        status, body = await rig.post("/lease", {"task_id": "t", "attempt_id": "a", "extra": 1})
        assert status == 400 and body["code"] == "bad_request" and body["problems"]
        status, body = await rig.post("/reset", {"session_id": "session-404", "request_id": "reset-session-404"})
        assert status == 404 and body["code"] == "unknown_session"


async def test_an_oversized_body_is_refused_with_413(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        big = b'{"task_id": "' + b"x" * (9 * 1024 * 1024) + b'", "attempt_id": "a"}'
        async with rig.http.post(rig.url + "/lease", data=big, headers=rig.auth) as response:
            assert response.status == 413
            assert (await response.json())["code"] == "body_too_large"
        async with rig.http.post(rig.url + "/lease", data=big) as response:
            assert response.status == 401  # authentication comes first, even for big bodies
        assert await events(rig) == ["startup"]


# Reset --------------------------------------------------------------------------------------------


async def test_reset_replay_returns_the_same_frame_without_relaunching(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        client = rig.client()
        lease = await client.lease("task-1", "attempt-1")
        first = await client.reset(lease.session_id)
        assert isinstance(first, ResetResponse) and not first.replayed
        assert first.frame.sequence == 0 and first.next_index == 0
        assert (first.frame.width, first.frame.height) == SIZE
        png = await client.frame(0, expected_sha256=first.frame.sha256)
        assert png.startswith(b"\x89PNG")
        again = await client.reset(lease.session_id)
        assert again.replayed and again.frame == first.frame
        assert rig.adapter.launches == 1 and rig.adapter.kills == 1  # the clean boundary before launch
        assert await client.frame(0, expected_sha256=first.frame.sha256) == png
        assert await events(rig) == ["startup", "lease", "reset_attempt", "reset"]
        # The template was restored into the broker-owned attempt path.
        attempt = rig.workdir / "sessions" / lease.session_id / "attempt" / "attempt.dxf"
        assert attempt.read_text() == "FAKE TEMPLATE\n"
        assert (rig.workdir / "sessions" / lease.session_id / "frames" / "000000.png").read_bytes() == png


async def test_reset_with_another_key_conflicts(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await leased(rig)
        for key in ("reset-other", f"reset-{session}-2", "checkpoint-0"):
            status, body = await rig.post("/reset", {"session_id": session, "request_id": key})
            assert status == 409 and body["code"] == "reset_key_conflict"
        assert rig.adapter.launches == 0


async def test_concurrent_resets_launch_once(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await leased(rig)
        body = {"session_id": session, "request_id": f"reset-{session}"}
        answers = await asyncio.gather(*(rig.post("/reset", body) for _ in range(4)))
        assert [status for status, _ in answers] == [200] * 4
        assert sorted(answer["replayed"] for _, answer in answers) == [False, True, True, True]
        assert len({answer["frame"]["sha256"] for _, answer in answers}) == 1
        assert rig.adapter.launches == 1


async def test_reset_makes_two_complete_launches_then_fails_and_can_be_retried(tmp_path: Path) -> None:
    async with running_rig(tmp_path, failing_launches=2) as rig:
        session = await leased(rig)
        body = {"session_id": session, "request_id": f"reset-{session}"}
        status, answer = await rig.post("/reset", body)
        assert status == 500 and answer["code"] == "internal_error"
        assert str(rig.workdir) not in answer["message"]
        assert rig.adapter.launches == 2
        assert rig.adapter.kills >= 3  # before each launch, and after the failed handoff
        status, raw = await rig.get("/status")
        assert StatusResponse.model_validate_json(raw).state == "leased"
        status, answer = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 412 and answer["code"] == "wrong_state"
        # A wrapper-level retry of the same reset key gets its own launches.
        status, answer = await rig.post("/reset", body)
        assert status == 200 and not answer["replayed"]
        assert rig.adapter.launches == 3
        kinds = await events(rig)
        assert kinds.count("reset_attempt") == 3
        assert kinds.count("reset_failed") == 1 and kinds[-1] == "reset"


# Actions ------------------------------------------------------------------------------------------


async def test_actions_inject_in_order_and_store_the_frame(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 200, body
        response = ActionsResponse.model_validate(body)
        assert (response.first_index, response.next_index) == (0, 3)
        assert [r.index for r in response.receipts] == [0, 1, 2]
        assert all(r.ok and r.injected_at is not None for r in response.receipts)
        assert response.post_action_visual_stable and not response.replayed
        assert response.frame.sequence == 1
        assert rig.driver.calls == [
            RecordedCall("click", (10, 20, "left", 1)),
            RecordedCall("type_text", ("line",)),
            RecordedCall("hotkey", (("enter",),)),
        ]
        status, png = await rig.get("/frames/1")
        assert status == 200 and hashlib.sha256(png).hexdigest() == response.frame.sha256
        status, raw = await rig.get("/frame-events")
        frame_events = FrameEventsResponse.model_validate_json(raw).frame_events
        assert [(e.sequence, e.request_id, e.first_index, e.next_index) for e in frame_events] == [
            (0, f"reset-{session}", 0, 0),
            (1, rid(0), 0, 3),
        ]
        status, raw = await rig.get("/events")
        last = EventsResponse.model_validate_json(raw).events[-1]
        assert last.kind == "actions"
        assert last.detail["request_id"] == rid(0) and last.detail["actions"] == LINE


async def _post_for_frame(rig: Rig, body: dict[str, Any]) -> tuple[str, ActionsResponse, bytes]:
    headers = {**rig.auth, "Accept": f"{ACTIONS_FRAME_MEDIA_TYPE}, application/json"}
    async with rig.http.post(rig.url + "/actions", json=body, headers=headers) as response:
        assert response.status == 200
        data = await response.read()
        split = int(response.headers.get(ACTIONS_LENGTH_HEADER, "0"))
        return response.content_type, ActionsResponse.model_validate_json(data[:split] or data), data[split:]


async def test_actions_send_the_frame_with_the_answer_when_asked(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        kind, first, png = await _post_for_frame(rig, actions_body(session, rid(0), 0, LINE))
        assert kind == ACTIONS_FRAME_MEDIA_TYPE and first.frame.sequence == 1
        assert hashlib.sha256(png).hexdigest() == first.frame.sha256 and len(png) == first.frame.size
        status, served = await rig.get("/frames/1")
        assert status == 200 and served == png
        _, second, png2 = await _post_for_frame(rig, actions_body(session, rid(1), 3, LINE[:1]))
        assert second.frame.sequence == 2 and png2 != png
        calls = list(rig.driver.calls)
        # A replay of the older batch: its frame is no longer the latest, so it is read back.
        _, again, png_again = await _post_for_frame(rig, actions_body(session, rid(0), 0, LINE))
        assert again.replayed and png_again == png and rig.driver.calls == calls
        # Without the Accept header the answer stays plain JSON.
        status, plain = await rig.post("/actions", actions_body(session, rid(1), 3, LINE[:1]))
        assert status == 200 and ActionsResponse.model_validate(plain).replayed
        # The client uses it: one request per batch, the frame checked against its digest.
        client = rig.client()
        result, frame = await client.actions_with_frame(session, rid(2), 4, [DoneAction()])
        assert hashlib.sha256(frame).hexdigest() == result.frame.sha256 and result.frame.sequence == 3


async def test_an_identical_replay_returns_the_cached_answer_without_side_effects(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        body = actions_body(session, rid(0), 0, LINE)
        status, first = await rig.post("/actions", body)
        assert status == 200
        calls, kinds, grabs = list(rig.driver.calls), await events(rig), rig.capture.grabs
        # Same JSON value, different key order and spacing: still the same request.
        reordered = json.dumps(dict(reversed(list(body.items()))), indent=2).encode()
        async with rig.http.post(rig.url + "/actions", data=reordered, headers=rig.auth) as response:
            assert response.status == 200
            replay = await response.json()
        assert replay["replayed"] is True
        assert {**replay, "replayed": False} == first
        assert rig.driver.calls == calls and await events(rig) == kinds and rig.capture.grabs == grabs
        status, raw = await rig.get("/status")
        assert StatusResponse.model_validate_json(raw).last_frame_sequence == 1


async def test_a_reused_request_id_with_another_body_conflicts(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        assert (await rig.post("/actions", actions_body(session, rid(0), 0, LINE)))[0] == 200
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE[:1]))
        assert status == 409 and body["code"] == "request_conflict"
        assert len(rig.driver.calls) == 3


async def test_a_wrong_expected_index_conflicts_and_names_the_next_index(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        assert (await rig.post("/actions", actions_body(session, rid(0), 0, LINE)))[0] == 200
        for index in (0, 2, 4):
            status, body = await rig.post("/actions", actions_body(session, rid(1), index, LINE))
            assert status == 409 and body["code"] == "index_conflict" and body["next_index"] == 3
        # Nothing was cached for the refused id: it still works with the right index.
        status, body = await rig.post("/actions", actions_body(session, rid(1), 3, LINE))
        assert status == 200 and body["first_index"] == 3
        assert len(rig.driver.calls) == 6


async def test_concurrent_duplicates_execute_once(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        client = rig.client()
        batch = [ACTION_ADAPTER.validate_python(item) for item in LINE]
        answers = await asyncio.gather(*(client.actions(session, rid(0), 0, batch) for _ in range(5)))
        assert len(rig.driver.calls) == 3
        assert sorted(answer.replayed for answer in answers) == [False, True, True, True, True]
        assert len({answer.frame for answer in answers}) == 1
        assert (await events(rig)).count("actions") == 1


@pytest.mark.parametrize(
    ("batch", "problem"),
    [
        ([LINE[0], {"type": "type", "text": "Straße"}], "actions[1].text"),
        ([LINE[0], {"type": "type", "text": "line\n"}], "actions[1].text"),
        ([LINE[0], {"type": "click", "x": SIZE[0], "y": 0, "button": "left", "count": 1}], "actions[1].x"),
        ([LINE[0], {"type": "move", "x": 5, "y": -1}], "actions[1].y"),
        ([LINE[0], {"type": "drag", "path": [[0, 0], [3, 999]], "button": "left"}], "actions[1].path[1][1]"),
        ([LINE[0], {"type": "done"}, {"type": "key", "keys": ["enter"]}], "actions[1]"),
        ([LINE[0], {"type": "key", "keys": ["Enter"]}], "actions[1].keys[0]"),
        ([], "actions"),
    ],
)
async def test_a_batch_the_broker_refuses_injects_nothing(tmp_path: Path, batch: list[Any], problem: str) -> None:
    """Non-ASCII text, off-screen points, done not last... are refused before any input."""
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, batch))
        assert status == 422, body
        error = ErrorResponse.model_validate(body)
        assert error.code == "batch_rejected"
        assert any(line.startswith(problem + ":") for line in error.problems), error.problems
        assert rig.driver.calls == []
        # Not cached, nothing consumed: a corrected batch under the same id runs at index 0.
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE[:1]))
        assert status == 200 and body["first_index"] == 0 and len(rig.driver.calls) == 1


async def test_the_action_budget_is_enforced_by_the_broker(tmp_path: Path) -> None:
    async with running_rig(tmp_path, max_actions=4) as rig:
        session = await ready(rig)
        assert (await rig.post("/actions", actions_body(session, rid(0), 0, LINE)))[0] == 200
        status, body = await rig.post("/actions", actions_body(session, rid(1), 3, LINE[:2]))
        assert status == 422 and "1 remains in the rollout budget" in body["problems"][0]
        assert len(rig.driver.calls) == 3


async def test_an_injection_failure_stops_the_batch_but_still_answers_200(tmp_path: Path) -> None:
    async with running_rig(tmp_path, driver=FailingDriver(SIZE, fail_on=1)) as rig:
        session = await ready(rig)
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 200, body
        receipts = body["receipts"]
        assert [r["ok"] for r in receipts] == [True, False, False]
        assert "XTest refused the event" in receipts[1]["error"] and receipts[1]["injected_at"] is None
        assert receipts[2]["error"] == "not attempted" and receipts[2]["injected_at"] is None
        assert body["next_index"] == 3 and body["frame"]["sequence"] == 1
        assert rig.driver.calls == [RecordedCall("click", (10, 20, "left", 1))]
        status, raw = await rig.get("/events")
        detail = EventsResponse.model_validate_json(raw).events[-1].detail
        assert detail["failed_index"] == 1
        # Cached like any answer: a replay injects nothing.
        status, replay = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 200 and replay["replayed"] and len(rig.driver.calls) == 1


async def test_pixels_that_never_settle_are_reported_not_failed(tmp_path: Path) -> None:
    async with running_rig(tmp_path, unstable=True) as rig:
        session = await leased(rig)
        # The fake adapter's handoff frame comes from verify_ready, so reset still works.
        status, _ = await rig.post("/reset", {"session_id": session, "request_id": f"reset-{session}"})
        assert status == 200
        started = asyncio.get_running_loop().time()
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        elapsed = asyncio.get_running_loop().time() - started
        assert status == 200 and body["post_action_visual_stable"] is False
        assert elapsed < 0.3 + 1.0
        status, raw = await rig.get("/frame-events")
        assert FrameEventsResponse.model_validate_json(raw).frame_events[-1].visual_stable is False
        status, png = await rig.get("/frames/1")
        assert hashlib.sha256(png).hexdigest() == body["frame"]["sha256"]


async def test_a_frame_that_cannot_be_captured_after_input_is_a_cached_500(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        original_grab = rig.capture.grab

        def broken() -> Any:
            raise CaptureError("display gone")

        rig.capture.grab = broken  # type: ignore[method-assign]
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 500 and body["code"] == "internal_error"
        assert len(rig.driver.calls) == 3
        rig.capture.grab = original_grab  # type: ignore[method-assign]
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 500 and len(rig.driver.calls) == 3  # replayed, not re-injected
        status, body = await rig.post("/actions", actions_body(session, rid(1), 3, LINE[:1]))
        assert status == 200 and body["first_index"] == 3


async def test_actions_need_a_reset_session(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        status, body = await rig.post("/actions", actions_body("session-9", rid(0), 0, LINE))
        assert status == 404 and body["code"] == "unknown_session"
        session = await leased(rig)
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 412 and body["code"] == "wrong_state"
        status, body = await rig.post("/actions", actions_body(session, "not-hex", 0, LINE))
        assert status == 400


# Frames and artifacts -----------------------------------------------------------------------------


async def test_frame_and_artifact_names_cannot_escape(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        saved = await rig.client().checkpoint(session, "checkpoint-0")
        secret = tmp_path / "secret.txt"
        secret.write_text("do not serve")
        paths = [
            "/artifacts/..%2Fsecret.txt",
            "/artifacts/..%2F..%2F..%2Fsecret.txt",
            "/artifacts/%2E%2E%2F%2E%2E%2Fsecret.txt",
            "/artifacts/%2Fetc%2Fpasswd",
            "/artifacts/..%5Csecret.txt",
            "/artifacts/..%252Fsecret.txt",
            "/artifacts/.attempt.dxf",
            "/artifacts/..",
            "/artifacts/%2E%2E",
            "/artifacts//etc/passwd",
            f"/artifacts/{tmp_path}/secret.txt",
            "/artifacts/attempt.dxf%00.png",
            "/artifacts/events.jsonl",
            "/artifacts/000000.png",
            "/frames/..%2F..%2Fevents.jsonl",
            "/frames/-1",
            "/frames/1e3",
            "/frames/0x0",
            "/frames/%2E%2E",
            "/frames/99",
            "/frames/9999999999999999999999",
            "/frames/%D9%A0",  # an Arabic-Indic zero: a digit, but not ASCII
        ]
        for path in paths:
            async with rig.http.get(URL(rig.url + path, encoded=True), headers=rig.auth) as response:
                body = await response.read()
                assert response.status in (400, 404), (path, response.status)
                assert b"do not serve" not in body and b"root:" not in body
        ok = await rig.client().artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)
        assert ok.startswith(b"FAKE DRAWING")


# Checkpoint and release ---------------------------------------------------------------------------


async def test_checkpoint_is_state_idempotent(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        client = rig.client()
        assert (await rig.post("/actions", actions_body(session, rid(0), 0, LINE)))[0] == 200
        first = await client.checkpoint(session, "checkpoint-3")
        assert isinstance(first, CheckpointResponse) and not first.replayed
        assert first.artifact.name == "attempt.dxf" and first.next_index == 3
        again = await client.checkpoint(session, "checkpoint-3")
        assert again.replayed and again.artifact == first.artifact and rig.adapter.checkpoints == 1
        data = await client.artifact("attempt.dxf", expected_sha256=first.artifact.sha256)
        assert b"type_text ('line',)" in data
        # The served artifact is a snapshot: later changes to the attempt file do not leak in.
        (rig.workdir / "sessions" / session / "attempt" / "attempt.dxf").write_text("changed by the model")
        assert await client.artifact("attempt.dxf", expected_sha256=first.artifact.sha256) == data
        assert (await rig.post("/actions", actions_body(session, rid(1), 3, LINE[:1])))[0] == 200
        later = await client.checkpoint(session, "checkpoint-4")
        assert not later.replayed and later.next_index == 4 and rig.adapter.checkpoints == 2
        assert later.artifact.sha256 != first.artifact.sha256
        status = await client.status()
        assert [a.sha256 for a in status.checkpoints] == [first.artifact.sha256, later.artifact.sha256]


async def test_a_failed_save_is_a_500_and_not_cached(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        rig.adapter.fail_checkpoint = True
        status, body = await rig.post("/checkpoint", {"session_id": session, "request_id": "checkpoint-0"})
        assert status == 500 and body["code"] == "internal_error"
        rig.adapter.fail_checkpoint = False
        status, body = await rig.post("/checkpoint", {"session_id": session, "request_id": "checkpoint-0"})
        assert status == 200 and not body["replayed"]
        assert "checkpoint_failed" in await events(rig)


async def test_release_is_idempotent_and_ends_mutations(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        client = rig.client()
        done = await client.actions(session, rid(0), 0, [DoneAction()])
        assert done.next_index == 1
        first = await client.release(session)
        again = await client.release(session)
        assert not first.replayed and again.replayed and rig.adapter.kills == 2  # reset + release
        status, body = await rig.post("/actions", actions_body(session, rid(1), 1, LINE))
        assert status == 412 and body["code"] == "wrong_state"
        status, body = await rig.post("/checkpoint", {"session_id": session, "request_id": "checkpoint-1"})
        assert status == 412
        status, body = await rig.post("/reset", {"session_id": session, "request_id": f"reset-{session}"})
        assert status == 200 and body["replayed"]  # answered before the release
        replay = await client.actions(session, rid(0), 0, [DoneAction()])
        assert replay.replayed
        assert (await client.status()).state == "released"
        assert (await client.health()).state == "released"
        assert await client.frame(1, expected_sha256=done.frame.sha256)
        kinds = await events(rig)
        assert kinds.count("release") == 1
        with pytest.raises(BrokerHTTPError) as error:
            await client.release("session-unknown")
        assert error.value.status == 404


async def test_events_are_mirrored_to_the_runtime_directory(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        lines = (rig.workdir / "events.jsonl").read_text().splitlines()
        assert [json.loads(line)["kind"] for line in lines] == await events(rig)


async def test_stop_kills_the_application_and_closes_the_listener(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        await ready(rig)
        url = rig.url
        await rig.server.stop()
        assert rig.adapter.kills == 2 and not rig.adapter.running
        assert rig.driver.closed
        with pytest.raises(aiohttp.ClientConnectionError):
            async with rig.http.get(url + "/health", headers=rig.auth):
                pass


async def test_a_frame_with_unchanged_pixels_reuses_the_previous_png(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        session = await ready(rig)
        status, first = await rig.post("/actions", actions_body(session, rid(0), 0, LINE))
        assert status == 200
        status, second = await rig.post(
            "/actions", actions_body(session, rid(1), 3, [{"type": "wait", "seconds": 0.01}])
        )
        assert status == 200 and second["frame"]["sequence"] == 2
        assert second["frame"]["sha256"] == first["frame"]["sha256"]
        status, png = await rig.get("/frames/2")
        assert hashlib.sha256(png).hexdigest() == first["frame"]["sha256"]


# The post-action poll --------------------------------------------------------------------------


class ScriptedCapture:
    """Grabs follow a script of pixel seeds; ``None`` is a failed grab."""

    def __init__(self, seeds: list[int | None]) -> None:
        self.seeds = seeds
        self.grabs = 0
        self.size = (8, 4)

    def grab(self) -> Frame:
        seed = self.seeds[min(self.grabs, len(self.seeds) - 1)]
        self.grabs += 1
        if seed is None:
            raise CaptureError("grab failed")
        return Frame.from_rgb(8, 4, bytes([seed]) * 96)

    def close(self) -> None:
        return None


def test_settle_waits_for_two_identical_grabs_and_tolerates_failures() -> None:
    capture = ScriptedCapture([1, None, 2, 3, 3])
    with ThreadPoolExecutor(1) as encoder:
        settled = settle_and_encode(capture, StabilityPolicy(window_s=5, interval_s=0, settle_s=0), encoder)
    assert settled.stable and settled.grabs == 4 and capture.grabs == 5
    assert settled.png.data == encode_png(Frame.from_rgb(8, 4, bytes([3]) * 96)).data


def test_settle_gives_up_with_the_freshest_frame_and_fails_only_without_any_frame() -> None:
    capture = ScriptedCapture(list(range(1000)))
    with ThreadPoolExecutor(1) as encoder:
        settled = settle_and_encode(capture, StabilityPolicy(window_s=0.05, interval_s=0.001, settle_s=0), encoder)
        assert not settled.stable and settled.frame.rgb[0] == (capture.grabs - 1) % 256
        with pytest.raises(CaptureError):
            settle_and_encode(ScriptedCapture([None]), StabilityPolicy(window_s=0.02, interval_s=0.001), encoder)


def test_settle_reuses_the_png_of_identical_pixels() -> None:
    frame = Frame.from_rgb(8, 4, bytes([9]) * 96)
    previous = encode_png(frame)
    with ThreadPoolExecutor(1) as encoder:
        settled = settle_and_encode(
            ScriptedCapture([9, 9]), StabilityPolicy(window_s=1, interval_s=0, settle_s=0), encoder, reuse=previous
        )
    assert settled.png is previous


# CLI and identity --------------------------------------------------------------------------------


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli_main(argv)
    code = exit_info.value.code
    return int(code) if isinstance(code, int) else 1, capsys.readouterr().err


@pytest.mark.parametrize(
    ("token", "extra", "message"),
    [
        (None, [], "AUTOCAD_BENCH_BROKER_TOKEN is not set"),
        ("short", [], "at least 16 characters"),
        ("has a space in the token!", [], "printable ASCII without spaces"),
        ("a" * 24, ["--display", "nonsense"], "is not an X display name"),
        ("a" * 24, ["--app", "autocad"], "--display is only for --app librecad"),
        ("a" * 24, ["--template", "drawing.dwg"], "--template must be a .dxf drawing"),
        ("a" * 24, ["--settle-window-s", "0"], "--settle-window-s must be > 0"),
        ("a" * 24, ["--port", "70000"], "Invalid value for '--port'"),
    ],
)
def test_the_cli_refuses_bad_starts_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    token: str | None,
    extra: list[str],
    message: str,
) -> None:
    template = tmp_path / "template.dxf"
    template.write_text("0\nEOF\n")
    (tmp_path / "drawing.dwg").write_bytes(b"AC1032")
    monkeypatch.chdir(tmp_path)
    if token is None:
        monkeypatch.delenv("AUTOCAD_BENCH_BROKER_TOKEN", raising=False)
    else:
        monkeypatch.setenv("AUTOCAD_BENCH_BROKER_TOKEN", token)
    options = {"--app": "librecad", "--display": ":5", "--template": str(template)}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        options[flag] = value
    argv = ["serve", "--workdir", str(tmp_path / "w"), "--broker-version", "v11"]
    for flag, value in options.items():
        argv += [flag, value]
    code, err = _cli(argv, capsys)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err and (token is None or len(token) < 16 or token not in err)


def test_the_ready_file_is_written_atomically(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "ready.json"
    write_ready_file(target, {"url": "http://127.0.0.1:1", "port": 1, "pid": 2, "startup_id": "s"})
    assert json.loads(target.read_text()) == {"url": "http://127.0.0.1:1", "port": 1, "pid": 2, "startup_id": "s"}
    assert [path.name for path in target.parent.iterdir()] == ["ready.json"]


def test_identity_helpers(tmp_path: Path) -> None:
    assert display_number(":3") == 3 and display_number("localhost:12.0") == 12
    with pytest.raises(IdentityError):
        display_number("3")
    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    before = package_sha256(package)
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"cache")
    assert package_sha256(package) == before
    (package / "a.py").write_text("x = 2\n")
    assert package_sha256(package) != before
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    assert manifest_sha256(manifest) == hashlib.sha256(b"{}").hexdigest()
    assert len(manifest_sha256(None)) == 64


# --------------------------------------------------------------------------- wait until idle


def _program(seconds_busy: float) -> subprocess.Popen[bytes]:
    """A stand-in program: busy for ``seconds_busy``, then asleep."""
    code = f"import time\nend = time.monotonic() + {seconds_busy}\nwhile time.monotonic() < end: pass\ntime.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code])


async def _timed_wait(rig: Rig, busy_s: float, seconds: float = 0.05) -> tuple[float, ActionsResponse]:
    program = _program(busy_s)
    try:
        rig.adapter.process = program.pid
        session = await ready(rig)
        started = time.monotonic()
        status, body = await rig.post("/actions", actions_body(session, rid(0), 0, [
            {"type": "wait", "seconds": seconds}, {"type": "type", "text": "x"}]))
        assert status == 200, body
        return time.monotonic() - started, ActionsResponse.model_validate(body)
    finally:
        program.kill()
        program.wait()


async def test_a_wait_lasts_until_the_program_is_idle(tmp_path: Path) -> None:
    """Typing after ``wait`` must not reach a program still busy opening what the wait was for."""
    async with running_rig(tmp_path, wait_idle_limit_s=8.0) as rig:
        elapsed, response = await _timed_wait(rig, busy_s=1.2)
    assert elapsed >= 1.0, "the wait ended while the program was still busy"
    assert [r.ok for r in response.receipts] == [True, True]


async def test_the_idle_wait_is_bounded_and_can_be_turned_off(tmp_path: Path) -> None:
    for name in ("bounded", "off"):
        (tmp_path / name).mkdir()
    async with running_rig(tmp_path / "bounded", wait_idle_limit_s=0.5) as rig:
        elapsed, _ = await _timed_wait(rig, busy_s=30)
    assert 0.5 <= elapsed < 5.0
    async with running_rig(tmp_path / "off", wait_idle_limit_s=0.0) as rig:
        elapsed, _ = await _timed_wait(rig, busy_s=30)
    assert elapsed < 0.5


async def test_holding_a_key_does_not_wait_for_idle(tmp_path: Path) -> None:
    program = _program(30)
    try:
        async with running_rig(tmp_path, wait_idle_limit_s=8.0) as rig:
            rig.adapter.process = program.pid
            session = await ready(rig)
            started = time.monotonic()
            status, body = await rig.post("/actions", actions_body(session, rid(0), 0, [
                {"type": "hold_key", "keys": ["shift"], "seconds": 0.05}]))
            assert status == 200, body
            assert time.monotonic() - started < 2.0
    finally:
        program.kill()
        program.wait()

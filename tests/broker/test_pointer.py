"""The pointer reported with every frame: wire model, real server on fakes, fake broker, settle poll.

The real-desktop check (Xvfb, LibreCAD, a pointer moved with xdotool behind the broker's
back) is ``test_server_librecad.test_frames_report_the_pointer_read_from_the_desktop``.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autocad_bench.actions import ACTION_ADAPTER, action_request_id
from autocad_bench.broker import BrokerClient
from autocad_bench.broker.protocol import (
    ActionsResponse,
    FrameEvent,
    FrameEventsResponse,
    FrameInfo,
    ResetResponse,
)
from autocad_bench.providers.models import DisplaySize
from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench_broker.desktop import settle_and_encode
from autocad_bench_broker.drivers.capture import Frame, StabilityPolicy
from autocad_bench_broker.drivers.input import RecordingDriver

from .server_fakes import SIZE, running_rig

SHA = "ab" * 32
OLD_FRAME = {"sequence": 3, "sha256": SHA, "width": 64, "height": 48, "size": 100}
"""A ``FrameInfo`` as brokers from before the pointer field send it."""


def rid(n: int) -> str:
    return action_request_id("attempt-1", f"toolu_{n}", 0)


# Wire model ---------------------------------------------------------------------------------------


def test_answers_of_an_older_broker_without_the_field_parse_as_no_pointer() -> None:
    reset = ResetResponse.model_validate_json(json.dumps(
        {"session_id": "s-1", "request_id": "reset-s-1", "frame": OLD_FRAME, "next_index": 0, "replayed": False}))
    assert reset.frame.pointer is None
    actions = ActionsResponse.model_validate_json(json.dumps({
        "session_id": "s-1", "request_id": rid(0), "first_index": 0, "next_index": 1, "receipts": [],
        "frame": OLD_FRAME, "post_action_visual_stable": True, "replayed": False}))
    assert actions.frame.pointer is None
    event = FrameEvent.model_validate({
        **{k: v for k, v in OLD_FRAME.items() if k != "size"}, "captured_at": "2026-01-01T00:00:00Z",
        "request_id": "reset-s-1", "first_index": 0, "next_index": 0, "visual_stable": True})
    assert event.pointer is None


def test_a_known_pointer_travels_as_x_y_and_an_unknown_one_is_left_out() -> None:
    known = FrameInfo.model_validate({**OLD_FRAME, "pointer": [12, 34]})
    assert known.pointer == (12, 34)
    assert json.loads(known.model_dump_json())["pointer"] == [12, 34]
    assert FrameInfo.model_validate_json(known.model_dump_json()) == known
    unknown = FrameInfo.model_validate(OLD_FRAME)
    # Exactly what an older broker sends, so an older client parses it too.
    assert json.loads(unknown.model_dump_json()) == OLD_FRAME
    assert unknown.model_dump(mode="json") == OLD_FRAME


# The real server on in-memory fakes -----------------------------------------------------------------


async def test_the_server_reports_the_pointer_the_desktop_reads_with_each_frame(tmp_path: Path) -> None:
    driver = RecordingDriver(size=SIZE, position=(3, 4))
    async with running_rig(tmp_path, driver=driver) as rig:
        client = rig.client()
        session = (await client.lease("task", "attempt-1")).session_id
        reset = await client.reset(session)
        assert reset.frame.pointer == (3, 4)
        click = (ACTION_ADAPTER.validate_python({"type": "click", "x": 10, "y": 20, "button": "left", "count": 1}),)
        first = await client.actions(session, rid(0), 0, click)
        assert first.frame.pointer == (10, 20)
        # The application moves the pointer itself: the next frame says where it is now.
        driver.position = (40, 30)
        key = (ACTION_ADAPTER.validate_python({"type": "key", "keys": ["escape"]}),)
        second, _ = await client.actions_with_frame(session, rid(1), 1, key)
        assert second.frame.pointer == (40, 30)
        driver.position = (1, 1)
        replay = await client.actions(session, rid(1), 1, key)
        assert replay.replayed and replay.frame.pointer == (40, 30)
        events = FrameEventsResponse.model_validate_json((await rig.get("/frame-events"))[1]).frame_events
        assert [event.pointer for event in events] == [(3, 4), (10, 20), (40, 30)]


class _BlindDriver(RecordingDriver):
    """A driver whose desktop cannot report the pointer (e.g. Windows' lock screen)."""

    def pointer(self) -> tuple[int, int] | None:
        raise OSError("GetCursorPos failed")


async def test_a_pointer_that_cannot_be_read_never_fails_the_frame(tmp_path: Path) -> None:
    async with running_rig(tmp_path, driver=_BlindDriver(size=SIZE)) as rig:
        client = rig.client()
        session = (await client.lease("task", "attempt-1")).session_id
        assert (await client.reset(session)).frame.pointer is None
        move = (ACTION_ADAPTER.validate_python({"type": "move", "x": 5, "y": 6}),)
        result = await client.actions(session, rid(0), 0, move)
        assert result.frame.sequence == 1 and result.frame.pointer is None
        status, body = await rig.post("/actions", {"session_id": session, "request_id": rid(0),
                                                   "expected_index": 0, "actions": [{"type": "move", "x": 5, "y": 6}]})
        assert status == 200 and "pointer" not in body["frame"]


def test_the_settle_poll_reads_the_pointer_right_after_the_grab_it_returns() -> None:
    """The pointer of a settled frame is the one read after *its* grab, not before the poll."""
    reads: list[tuple[int, int]] = []

    class Capture:
        size = (4, 2)

        def __init__(self) -> None:
            self.grabs = 0

        def grab(self) -> Frame:
            self.grabs += 1
            seed = min(self.grabs, 3)  # grabs 3 and 4 are identical: the poll returns grab 4
            return Frame.from_rgb(4, 2, bytes([seed]) * 24)

        def close(self) -> None:
            return None

    capture = Capture()

    def pointer() -> tuple[int, int]:
        reads.append((capture.grabs, 0))
        return (capture.grabs, 0)

    policy = StabilityPolicy(window_s=5.0, interval_s=0.0, settle_s=0.0)
    with ThreadPoolExecutor(1) as encoder:
        settled = settle_and_encode(capture, policy, encoder, read_pointer=pointer)
    assert settled.stable and settled.grabs == 4
    assert settled.pointer == (4, 0) and reads[-1] == (4, 0)

    def broken() -> tuple[int, int]:
        raise RuntimeError("X connection lost")

    with ThreadPoolExecutor(1) as encoder:
        assert settle_and_encode(Capture(), policy, encoder, read_pointer=broken).pointer is None


# The fake broker of the testing kit -----------------------------------------------------------------


async def test_the_fake_broker_reports_the_last_pointer_action_and_can_play_an_older_broker() -> None:
    async with FakeBroker(display=DisplaySize(width=64, height=48), pointer=(2, 2)) as broker:
        client = BrokerClient(broker.url, broker.token, operation_deadline_s=10)
        session = (await client.lease("t", "a")).session_id
        assert (await client.reset(session)).frame.pointer == (2, 2)
        batch = tuple(ACTION_ADAPTER.validate_python(item) for item in (
            {"type": "click", "x": 9, "y": 8, "button": "left", "count": 1},
            {"type": "drag", "path": [[1, 1], [30, 20]], "button": "left"},
            {"type": "type", "text": "abc"},
        ))
        result, png = await client.actions_with_frame(session, action_request_id("a", "t1", 0), 0, batch)
        assert result.frame.pointer == (30, 20) and hashlib.sha256(png).hexdigest() == result.frame.sha256
        broker.pointer = (50, 40)  # the application moved it
        wait = (ACTION_ADAPTER.validate_python({"type": "wait", "seconds": 0.1}),)
        later = await client.actions(session, action_request_id("a", "t2", 0), 3, wait)
        assert later.frame.pointer == (50, 40)
    async with FakeBroker(display=DisplaySize(width=64, height=48), report_pointer=False) as old:
        client = BrokerClient(old.url, old.token, operation_deadline_s=10)
        session = (await client.lease("t", "a")).session_id
        assert (await client.reset(session)).frame.pointer is None
        move = (ACTION_ADAPTER.validate_python({"type": "move", "x": 3, "y": 3}),)
        assert (await client.actions(session, action_request_id("a", "t1", 0), 0, move)).frame.pointer is None


async def test_a_stored_frame_or_drawing_whose_bytes_changed_is_never_taken_as_intact() -> None:
    """FakeBroker.corrupt plays a store whose bytes changed after capture: the client refuses them."""
    from autocad_bench.broker.errors import BrokerError

    async with FakeBroker(display=DisplaySize(width=64, height=48)) as broker:
        client = BrokerClient(broker.url, broker.token, operation_deadline_s=3)
        session = (await client.lease("t", "a")).session_id
        frame = (await client.reset(session)).frame
        assert hashlib.sha256(await client.frame(frame.sequence, expected_sha256=frame.sha256)).hexdigest() == \
            frame.sha256
        broker.corrupt(frame=frame.sequence)
        with pytest.raises(BrokerError):
            await client.frame(frame.sequence, expected_sha256=frame.sha256)
        saved = await client.checkpoint(session, "a-save")
        broker.corrupt(artifact=saved.artifact.name, data=b"not the drawing")
        with pytest.raises(BrokerError):
            await client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)

"""What the pilot makes durable, and in which order.

The contract: a batch's pending checkpoint is fsynced before the batch is sent. Frames are
written atomically but not fsynced: the broker keeps every frame of a session, so a resumed
pilot fetches again any frame a host crash lost or tore, under its recorded SHA-256. The
state after a batch that does not end the loop rides on the next checkpoint; a pilot killed
before that re-sends the batch, which the broker replays, so the outcome is the same and
nothing runs twice.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.protocol import Route
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness import trace as trace_module
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.checkpoints import CheckpointStore, load_checkpoint
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.pilot import Pilot
from autocad_bench.harness.records import ResumeCheckpoint, RunState
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import DisplaySize, ModelSpec
from autocad_bench.storage import atomic, atomic_write_bytes, atomic_write_json, atomic_write_model
from autocad_bench.testing.fake_broker import FakeBroker

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"
DISPLAY = DisplaySize(width=40, height=30)
SCRIPT = [
    {"actions": [{"type": "move", "x": 1, "y": 2}, {"type": "type", "text": "line"}]},
    {"actions": [{"type": "click", "x": 3, "y": 4, "button": "left", "count": 1}]},
    {"actions": [{"type": "key", "keys": ["enter"]}]},
    {"actions": [{"type": "move", "x": 5, "y": 6}, {"type": "done"}]},
]


# Storage ---------------------------------------------------------------------------------------


def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    return synced


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name descriptors")
def test_durable_writes_fsync_the_new_file_then_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = _record_fsyncs(monkeypatch)
    atomic_write_bytes(tmp_path / "a.bin", b"x" * 100_000)
    assert len(synced) == 2
    assert Path(synced[0]).parent == tmp_path and Path(synced[0]).name.startswith(".a.bin.")
    assert synced[1] == str(tmp_path)
    synced.clear()
    atomic_write_bytes(tmp_path / "a.bin", b"y", durable=False)
    assert synced == [] and (tmp_path / "a.bin").read_bytes() == b"y"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"], "no temporary file is left behind"


def test_model_files_hold_the_same_values_as_json_files(tmp_path: Path) -> None:
    checkpoint = ResumeCheckpoint(
        rollout_id="r", attempt_id="a", feedback="caf\u00e9 \u2713", provider_state={"x": [1.5]}
    )
    atomic_write_model(tmp_path / "m.json", checkpoint)
    atomic_write_json(tmp_path / "j.json", checkpoint.model_dump(mode="json"))
    text = (tmp_path / "m.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and "caf\u00e9" in text
    assert json.loads(text) == json.loads((tmp_path / "j.json").read_text(encoding="utf-8"))
    assert ResumeCheckpoint.model_validate_json(text) == checkpoint


# The pilot -------------------------------------------------------------------------------------


def _setup(tmp: Path, latency_s: float = 0.0) -> Path:
    rollout = tmp / "rollout"
    rollout.mkdir()
    script = tmp / "script.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in SCRIPT))
    assignment = PilotAssignment(
        batch_id="b",
        rollout_id="r",
        attempt_id="b.r.1",
        task_id="t",
        task_prompt="draw",
        reference_png=str(REFERENCE),
        model=ModelSpec(provider="scripted", model="replay", options={"script": str(script), "latency_s": latency_s}),
        budgets=BudgetConfig(),
        display=DISPLAY,
        infrastructure_backend="test",
    )
    atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
    return rollout


def _pilot(rollout: Path, broker: FakeBroker) -> Pilot:
    client = BrokerClient(
        broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001, wait_jitter_s=0.0, operation_deadline_s=10
    )
    return Pilot(rollout, {}, host=PluginHost(registry=PluginRegistry(), environ={}), broker=client)


def test_pending_is_durable_before_sending_and_frames_are_atomic_and_cheap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[Any, ...]] = []
    write_bytes, write_model = trace_module.atomic_write_bytes, trace_module.atomic_write_model

    def bytes_spy(path: Path, data: bytes, *, durable: bool = True) -> None:
        write_bytes(path, data, durable=durable)
        events.append(("bytes", path.relative_to(path.parents[1]).as_posix(), durable))

    def model_spy(path: Path, model: BaseModel, *, durable: bool = True) -> None:
        write_model(path, model, durable=durable)
        events.append(("model", path.name, durable, model))

    write_checkpoint = CheckpointStore.write

    def checkpoint_spy(store: CheckpointStore, checkpoint: ResumeCheckpoint, *, compact: bool) -> ResumeCheckpoint:
        written = write_checkpoint(store, checkpoint, compact=compact)
        events.append(("checkpoint", compact, written, load_checkpoint(store.paths)))
        return written

    monkeypatch.setattr(trace_module, "atomic_write_bytes", bytes_spy)
    monkeypatch.setattr(trace_module, "atomic_write_model", model_spy)
    monkeypatch.setattr(CheckpointStore, "write", checkpoint_spy)

    async def scenario() -> FakeBroker:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = _setup(tmp_path)
            pilot = _pilot(rollout, broker)
            send = pilot.broker.actions_with_frame

            async def actions_spy(session_id: str, request_id: str, *args: Any, **kwargs: Any) -> Any:
                events.append(("send", request_id))
                return await send(session_id, request_id, *args, **kwargs)

            pilot.broker.actions_with_frame = actions_spy  # type: ignore[method-assign]
            assert await pilot.run() == 0
            return broker

    broker = asyncio.run(scenario())
    assert [i.index for i in broker.injected] == list(range(6))
    fetched = [r for r in broker.requests if r.route == Route.FRAME.value]
    assert len(fetched) == 1, "only frame 0 (the reset's) is fetched; the others came with the answers"

    written_frames: set[str] = set()
    last_checkpoint: ResumeCheckpoint | None = None
    sends = 0
    checkpoints_since_send = 0
    for event in events:
        if event[0] == "bytes" and event[1].startswith("frames/"):
            assert not event[2], "frames are not fsynced (the broker keeps them)"
            written_frames.add(event[1])
        elif event[0] == "checkpoint":
            _, compact, checkpoint, on_disk = event
            assert on_disk == checkpoint, "a reader finds exactly the checkpoint just written"
            assert checkpoint.frame is None or checkpoint.frame.path in written_frames, (
                "a checkpoint references a frame that was never written"
            )
            if sends and checkpoint.pending is not None:
                assert not compact, "inside the loop pending checkpoints go to the journal"
            last_checkpoint = checkpoint
            checkpoints_since_send += 1
        elif event[0] == "model" and event[1] == "run-state.json":
            assert not event[2] and isinstance(event[3], RunState)
        elif event[0] == "send":
            assert last_checkpoint is not None and last_checkpoint.pending is not None
            assert last_checkpoint.pending.request_id == event[1], "the batch's pending checkpoint came first"
            if sends:
                # Exactly one durable write per continuing turn: its pending checkpoint.
                assert checkpoints_since_send == 1
            sends += 1
            checkpoints_since_send = 0
    assert sends == len(SCRIPT)
    run_states = [e for e in events if e[0] == "model" and e[1] == "run-state.json"]
    assert len(run_states) < sends + 3, "run-state.json is a throttled progress file, not rewritten per turn"
    assert run_states[-1][3].phase == "finished"
    final = ResumeCheckpoint.model_validate_json((tmp_path / "rollout" / "resume-checkpoint.json").read_bytes())
    assert final.done and final.pending is None and final.released and final.next_index == 6
    assert final == load_checkpoint(RolloutPaths(tmp_path / "rollout")), "the file itself is final"
    assert not (tmp_path / "rollout" / "resume-journal.jsonl").exists(), "the journal is gone once finished"


def test_frames_lost_or_torn_by_a_host_crash_are_fetched_again_on_resume(tmp_path: Path) -> None:
    """Kill the pilot mid-rollout, damage its frames as a power cut could, resume exactly."""

    async def scenario() -> tuple[FakeBroker, Path, dict[str, bytes]]:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = _setup(tmp_path, latency_s=0.3)
            task = asyncio.create_task(_pilot(rollout, broker).run())
            while len(broker.injected) < 4:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            frames = rollout / "frames"
            served = _served_frames(broker)
            stored = sorted(frames.iterdir())
            assert len(stored) >= 3
            stored[0].unlink()  # lost
            stored[1].write_bytes(stored[1].read_bytes()[:10])  # torn
            stored[2].write_bytes(b"")  # allocated, never written back
            assert await _pilot(rollout, broker).run() == 0
            return broker, rollout, served

    broker, rollout, served = asyncio.run(scenario())
    assert [i.index for i in broker.injected] == list(range(6)), "nothing ran twice"
    for ref, data in served.items():
        assert (rollout / ref).read_bytes() == data, f"{ref} was restored byte for byte"
    refetched = [r for r in broker.requests if r.route == Route.FRAME.value]
    assert len(refetched) == 1 + 3, "besides frame 0 at the start, only the damaged frames were fetched again"


def _served_frames(broker: FakeBroker) -> dict[str, bytes]:
    """Every frame the broker has served so far, by its path in the rollout."""
    session = broker._current
    assert session is not None
    return {RolloutPaths(Path(".")).frame_ref(seq): data for seq, (_, data) in session.frames.items()}


def test_killed_while_the_model_thinks_resumes_by_replaying_the_last_batch(tmp_path: Path) -> None:
    async def scenario() -> tuple[FakeBroker, Path]:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = _setup(tmp_path, latency_s=0.3)
            task = asyncio.create_task(_pilot(rollout, broker).run())
            # The first batch has run and its frame arrived: the pilot now waits for turn 2.
            while len([r for r in broker.requests if r.route == Route.ACTIONS.value]) < 1:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.1)
            assert len(broker.injected) == 2 and not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            on_disk = load_checkpoint(RolloutPaths(rollout))
            assert on_disk is not None and on_disk.pending is not None and on_disk.next_index == 0, (
                "the post-batch state rides on the next checkpoint"
            )
            assert await _pilot(rollout, broker).run() == 0
            return broker, rollout

    broker, rollout = asyncio.run(scenario())
    assert [i.index for i in broker.injected] == list(range(6)), "nothing ran twice"
    first = [r for r in broker.requests if r.route == Route.ACTIONS.value][:2]
    assert first[0].body_sha256 == first[1].body_sha256, "the resumed pilot re-sent the same batch"
    receipts = [json.loads(line) for line in (rollout / "input_receipts.jsonl").read_text().splitlines()]
    assert [r["index"] for r in receipts] == list(range(6))
    result = json.loads((rollout / "result.json").read_text())
    assert (result["status"], result["actions"], result["attempts"]) == ("completed", 6, 2)

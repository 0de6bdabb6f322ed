"""Controller CPU per turn, against base64 of one frame and against the per-turn floor.

The scripted provider and fake brokers (in another process, so their CPU is not counted)
serve realistic 1920x1080 PNG frames of about 429 KB. Per turn the pilot validates the
batch, writes its pending checkpoint (fsynced), sends the batch and receives the post-batch
frame in the same answer, verifies the frame's SHA-256, stores it, appends the trace and
records usage and cost.

Two denominators, both measured in this run:

* base64 of one frame, in a hot loop (the issue's yardstick: what a real provider spends on
  the frame it sends the model);
* the *floor*: the same turn done with bare primitives and nothing else, against a second
  broker of the same process: one aiohttp request carrying the batch and returning the
  frame, the SHA-256 check, writing the frame, and one fsynced atomic write of a
  checkpoint-sized JSON file. Any harness that verifies frames and makes each batch durable
  before sending it does at least this; the floor waits on the broker between turns exactly
  like the pilot, so cache and scheduler effects hit both alike.

The floor runs in two blocks, before and after the pilot, and its median over both is used.

Two more pilot runs split the controller's cost: against an in-process broker stub (no
HTTP, no SHA-256 check; frames and checkpoints still written to disk), and against the stub
with the frame and checkpoint writes skipped, which leaves the harness's own logic: model
call, retry accounting and pricing, validation, trace lines and state bookkeeping.
CPU time includes the kernel's share of fsyncs and loopback TCP, so absolute numbers move
with the machine's load; the ratios are the result.

    uv run python benchmarks/harness_turn_cpu.py [TURNS]
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from _broker_server import realistic_png
from _common import REFERENCE, broker_process, table

from autocad_bench.actions import action_request_id
from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.protocol import (
    ACTIONS_FRAME_MEDIA_TYPE,
    ACTIONS_LENGTH_HEADER,
    ActionReceipt,
    ActionsResponse,
    ArtifactInfo,
    CheckpointResponse,
    EventsResponse,
    FrameEventsResponse,
    FrameInfo,
    LeaseResponse,
    ReleaseResponse,
    ResetResponse,
)
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.harness.trace import TraceWriter
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import ModelSpec
from autocad_bench.storage import atomic_write_json

BATCH = [{"type": "click", "x": 900, "y": 500, "button": "left", "count": 1},
         {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]


class StubBroker(BrokerClient):
    """Answers the pilot from memory with one fixed frame: a broker without HTTP."""

    def __init__(self, png: bytes) -> None:
        super().__init__("http://127.0.0.1:9", "stub-token-0123456789abcdef")
        self.png = png
        self.info = FrameInfo(sequence=0, sha256=hashlib.sha256(png).hexdigest(), width=1920, height=1080,
                              size=len(png))
        self.sequence = 0

    async def lease(self, task_id: str, attempt_id: str, **_: object) -> LeaseResponse:
        return LeaseResponse(session_id="stub", task_id=task_id, attempt_id=attempt_id, replayed=False)

    async def reset(self, session_id: str, **_: object) -> ResetResponse:
        return ResetResponse(session_id=session_id, request_id=f"reset-{session_id}", frame=self.info, next_index=0,
                             replayed=False)

    async def frame(self, sequence: int, *, expected_sha256: str | None = None) -> bytes:
        return self.png

    async def actions_with_frame(self, session_id, request_id, expected_index, actions,  # type: ignore[no-untyped-def]
                                 *, deadline_s=None):
        self.sequence += 1
        now = datetime.now(UTC)
        receipts = tuple(ActionReceipt(index=expected_index + i, type=a.type, injected_at=now, ok=True)
                         for i, a in enumerate(actions))
        response = ActionsResponse(
            session_id=session_id, request_id=request_id, first_index=expected_index,
            next_index=expected_index + len(actions), receipts=receipts,
            frame=self.info.model_copy(update={"sequence": self.sequence}), post_action_visual_stable=True,
            replayed=False)
        return response, memoryview(self.png)

    async def checkpoint(self, session_id: str, request_id: str, **_: object) -> CheckpointResponse:
        artifact = ArtifactInfo(name="drawing.dxf", size=1, sha256=hashlib.sha256(b"x").hexdigest())
        return CheckpointResponse(session_id=session_id, request_id=request_id, artifact=artifact, next_index=0,
                                  replayed=False)

    async def artifact(self, name: str, *, expected_sha256: str | None = None) -> bytes:
        return b"x"

    async def events(self) -> EventsResponse:
        return EventsResponse(events=())

    async def frame_events(self) -> FrameEventsResponse:
        return FrameEventsResponse(frame_events=())

    async def release(self, session_id: str, **_: object) -> ReleaseResponse:
        return ReleaseResponse(session_id=session_id, replayed=False)


@contextlib.contextmanager
def trace_writes_skipped() -> Iterator[None]:
    """Frames and checkpoints are not written while the block runs (benchmark only)."""
    save_frame, checkpoint = TraceWriter.save_frame, TraceWriter.checkpoint
    TraceWriter.save_frame = lambda self, sequence, png, sha256, w, h: self.frame_ref(  # type: ignore[method-assign]
        sequence, sha256, w, h)
    TraceWriter.checkpoint = lambda self, cp, *, compact=True: cp  # type: ignore[method-assign]
    try:
        yield
    finally:
        TraceWriter.save_frame, TraceWriter.checkpoint = save_frame, checkpoint  # type: ignore[method-assign]


def pilot_turns(url: str, token: str, tmp: Path, turns: int,
                broker: BrokerClient | None = None) -> tuple[list[float], float]:
    """Per-turn controller CPU of a real pilot run (and the whole run's CPU)."""
    tmp = Path(tempfile.mkdtemp(dir=tmp))
    script = tmp / "script.jsonl"
    script.write_text("".join(json.dumps({"actions": BATCH}) + "\n" for _ in range(turns + 1)))
    rollout = tmp / "rollout"
    rollout.mkdir()
    assignment = PilotAssignment(
        batch_id="bench", rollout_id="r", attempt_id="bench.r.1", task_id="t", task_prompt="draw",
        reference_png=str(REFERENCE),
        model=ModelSpec(provider="scripted", model="replay", options={"script": str(script)}),
        budgets=BudgetConfig(max_turns=turns), infrastructure_backend="bench")
    atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
    stamps: list[float] = []
    pilot = Pilot(rollout, {}, host=PluginHost(registry=PluginRegistry(), environ={}),
                  broker=broker or BrokerClient(url, token))
    original = pilot._handle_turn

    async def timed(result):  # type: ignore[no-untyped-def]
        stamps.append(time.process_time())
        await original(result)

    pilot._handle_turn = timed  # type: ignore[method-assign]
    start = time.process_time()
    asyncio.run(pilot.run())
    return [b - a for a, b in itertools.pairwise(stamps)], time.process_time() - start


class Floor:
    """The per-turn minimum, done with bare aiohttp, hashlib and os calls (see the docstring)."""

    def __init__(self, url: str, token: str, directory: Path) -> None:
        self.url, self.token, self.directory = url, token, directory
        self.index = 0
        self.turn = 0
        self.session_id = ""

    async def start(self) -> None:
        client = BrokerClient(self.url, self.token)
        lease = await client.lease("floor", "floor.1")
        await client.reset(lease.session_id)
        self.session_id = lease.session_id

    async def turns(self, count: int) -> list[float]:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                   "Accept": ACTIONS_FRAME_MEDIA_TYPE}
        stamps = []
        async with aiohttp.ClientSession(read_bufsize=1 << 20) as http:
            for _ in range(count + 1):
                stamps.append(time.process_time())
                self.turn += 1
                body = json.dumps({"session_id": self.session_id,
                                   "request_id": action_request_id("floor.1", f"t{self.turn}", self.index),
                                   "expected_index": self.index, "actions": BATCH}).encode()
                async with http.post(self.url + "/actions", data=body, headers=headers) as response:
                    data = await response.read()
                    split = int(response.headers[ACTIONS_LENGTH_HEADER])
                answer = json.loads(data[:split])
                png = memoryview(data)[split:]
                if hashlib.sha256(png).hexdigest() != answer["frame"]["sha256"]:
                    raise RuntimeError("frame checksum mismatch")
                self.index = answer["next_index"]
                frame = self.directory / f"{self.turn:06d}.png"
                fd = os.open(frame, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(fd, png)
                os.close(fd)
                # One durable checkpoint per turn, the size of the answer.
                tmp = self.directory / "checkpoint.json.tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(fd, data[:split])
                os.fsync(fd)
                os.close(fd)
                os.replace(tmp, self.directory / "checkpoint.json")
                dir_fd = os.open(self.directory, os.O_RDONLY)
                os.fsync(dir_fd)
                os.close(dir_fd)
        return [b - a for a, b in itertools.pairwise(stamps)]


def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "floor").mkdir()
        with broker_process(2, 1920, 1080, tmp, realistic=True) as info:
            floor = Floor(info["urls"][1], info["token"], tmp / "floor")
            asyncio.run(floor.start())
            block = max(50, turns // 3)
            floor_turns = asyncio.run(floor.turns(block))
            per_turn, total = pilot_turns(info["urls"][0], info["token"], tmp, turns)
            floor_turns += asyncio.run(floor.turns(block))
        frame_png = realistic_png(1920, 1080)
        stub_disk, _ = pilot_turns("", "", tmp, turns, StubBroker(frame_png))
        with trace_writes_skipped():
            stub_logic, _ = pilot_turns("", "", tmp, turns, StubBroker(frame_png))
    reps = 200
    t0 = time.process_time()
    for _ in range(reps):
        base64.b64encode(frame_png)
    b64 = (time.process_time() - t0) / reps
    floor_median = statistics.median(floor_turns)
    tenth = max(1, len(per_turn) // 10)
    rows = [
        ["frame PNG bytes", f"{len(frame_png):,}", "", ""],
        ["base64 of one frame (hot loop)", f"{b64 * 1e3:.3f}", "1.00", f"{b64 / floor_median:.2f}"],
        ["floor: bare request + SHA-256 + frame write + fsynced checkpoint",
         f"{floor_median * 1e3:.3f}", f"{floor_median / b64:.2f}", "1.00"],
    ]
    for label, values in (("first 10%", per_turn[:tenth]), ("last 10%", per_turn[-tenth:]), ("all turns", per_turn)):
        value = statistics.median(values)
        rows.append([f"controller CPU per turn, {label}", f"{value * 1e3:.3f}",
                     f"{value / b64:.2f}", f"{value / floor_median:.2f}"])
    for label, values in (("broker stub: no HTTP, no SHA-256 (disk writes kept)", stub_disk),
                          ("broker stub, no frame/checkpoint writes: harness logic", stub_logic)):
        value = statistics.median(values)
        rows.append([f"controller CPU per turn, {label}", f"{value * 1e3:.3f}",
                     f"{value / b64:.2f}", f"{value / floor_median:.2f}"])
    rows.append(["controller CPU, whole run incl. setup", f"{total * 1e3:.1f}", "", ""])
    rows.append(["turns", str(len(per_turn) + 1), "", ""])
    print(table("controller CPU per turn (ms): ratio to base64 of one frame and to the per-turn floor",
                ["measure", "ms", "/ base64", "/ floor"], rows))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)

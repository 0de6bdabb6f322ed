"""Controller CPU per turn, as a ratio to base64-encoding one 1920x1080 frame.

The scripted provider and a fake broker (in another process, so its CPU is not counted)
serve realistic 1920x1080 PNG frames. Per turn the controller validates the batch, writes
the pending checkpoint (fsynced), sends the batch, fetches and verifies the frame, stores it
(fsynced), appends the trace and rewrites run-state.json; the post-batch state rides on the
next pending checkpoint. Broker requests reuse one keep-alive connection (retries would
not). Target: CPU per turn <= 1.5x the cost of base64-encoding one frame, at turn 1 and at
turn 300 alike (no re-encoding of history, no repeated JSON of old turns).

CPU time here includes the kernel's share of the fsyncs and of loopback TCP, so it moves
with the machine's load: compare revisions in interleaved runs on the same machine.

    uv run python benchmarks/harness_turn_cpu.py [TURNS]
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REFERENCE, broker_process, table

from autocad_bench.broker.client import BrokerClient
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import ModelSpec
from autocad_bench.storage import atomic_write_json


def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with broker_process(1, 1920, 1080, tmp, realistic=True) as info:
            script = tmp / "script.jsonl"
            batch = {"actions": [{"type": "click", "x": 900, "y": 500, "button": "left", "count": 1},
                                 {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]}
            script.write_text(json.dumps(batch) + "\n" * 1 + "".join(json.dumps(batch) + "\n" for _ in range(turns)))
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
                          broker=BrokerClient(info["urls"][0], info["token"]))
            original = pilot._handle_turn

            async def timed(result):  # type: ignore[no-untyped-def]
                stamps.append(time.process_time())
                await original(result)

            pilot._handle_turn = timed  # type: ignore[method-assign]
            start = time.process_time()
            asyncio.run(pilot.run())
            total = time.process_time() - start
    per_turn = [b - a for a, b in itertools.pairwise(stamps)]
    # The encoding to compare with: one realistic frame as the fake served it.
    sys.path.insert(0, str(Path(__file__).parent))
    from _broker_server import realistic_png

    frame_png = realistic_png(1920, 1080)
    reps = 200
    t0 = time.process_time()
    for _ in range(reps):
        base64.b64encode(frame_png)
    b64 = (time.process_time() - t0) / reps
    early = statistics.median(per_turn[: max(1, len(per_turn) // 10)])
    late = statistics.median(per_turn[-max(1, len(per_turn) // 10):])
    middle = statistics.median(per_turn)
    rows = [
        ["frame PNG bytes", f"{len(frame_png):,}", ""],
        ["base64 of one frame (ms CPU)", f"{b64 * 1e3:.3f}", "1.00"],
        ["controller CPU per turn, first 10% (ms)", f"{early * 1e3:.3f}", f"{early / b64:.2f}"],
        ["controller CPU per turn, last 10% (ms)", f"{late * 1e3:.3f}", f"{late / b64:.2f}"],
        ["controller CPU per turn, all turns (ms)", f"{middle * 1e3:.3f}", f"{middle / b64:.2f}"],
        ["controller CPU, whole run incl. setup (ms)", f"{total * 1e3:.1f}", ""],
        ["turns", str(len(per_turn) + 1), ""],
    ]
    print(table("controller CPU per turn vs base64 of one frame (target ratio <= 1.5)",
                ["measure", "value", "ratio"], rows))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)

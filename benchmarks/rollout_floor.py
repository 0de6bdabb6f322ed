"""How far the controller is from the floor of the protocol it speaks, side by side in one run.

    uv run python benchmarks/rollout_floor.py [ROLLOUTS] [TURNS] [LATENCY_S]    # default 1000 5 2

Runs, against the same kind of fake brokers (one separate process on loopback, realistic
1920x1080 frames), one after the other:

- **floor, one loop**: N rollouts as tasks of one event loop doing only the unavoidable I/O of
  a rollout (``_floor_probe.py``: lease, reset, frame 0, per turn one actions request with
  its frame, the frame written and one fsynced journal line; at the end the drawing, events,
  release and an fsynced result), through the project's broker client;
- **floor, thread per rollout**: the same rollouts, each on its own thread and event loop, as
  shared mode runs its pilots;
- **harness, 1 shared pilot loop**: ``autocad-bench-batch`` in shared mode
  (``shared_mode_scale.run``) with every pilot on one event loop
  (``AUTOCAD_BENCH_PILOT_LOOPS=1``), the floor's first layout;
- **harness, thread per rollout**: the same batch as shared mode runs it by default, the
  measured controller of docs/performance.md.

Columns: CPU per turn of the whole process (``wait4``: imports and start-up included), of the
rollouts alone (the floor's ``getrusage`` from first lease to last result; the harness has
no such split), the default harness's CPU (the last row) as a multiple of each row, and the share of the issue's
4 ms goal the row uses. ``TMPDIR`` chooses the file system (``TMPDIR=/dev/shm`` takes the disk
out). Runs wait ``SHARED_SCALE_SETTLE_S`` (35 s) between each other, for the reason given in
``shared_mode_scale.py``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import shared_mode_scale
from _common import HERE, broker_process, table

GOAL_MS = shared_mode_scale.GOAL["cpu_ms_per_turn"]


def floor(rollouts: int, turns: int, latency: float, layout: str) -> dict[str, Any]:
    """One floor run in a process of its own; CPU from ``wait4`` and from the probe."""
    if shared_mode_scale._runs:
        time.sleep(shared_mode_scale.SETTLE_S)
    shared_mode_scale._runs += 1
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with broker_process(rollouts, 1920, 1080, tmp, realistic=True):
            brokers = tmp / f"brokers-{rollouts}.json"
            result = tmp / "floor.json"
            (tmp / "out").mkdir()
            probe = [sys.executable, str(HERE / "_floor_probe.py"), str(brokers), str(tmp / "out"),
                     str(turns), str(latency), layout, str(result)]
            with open(tmp / "stderr.txt", "wb") as stderr:
                process = subprocess.Popen(probe, stdout=subprocess.DEVNULL, stderr=stderr)
                _, status, usage = os.wait4(process.pid, 0)
            if not result.exists():
                sys.stderr.write((tmp / "stderr.txt").read_text()[-4000:])
                raise SystemExit(f"the floor probe failed (exit {os.waitstatus_to_exitcode(status)})")
            inner = json.loads(result.read_text())
    if inner["failures"]:
        sys.stderr.write(f"floor ({layout}): {rollouts - inner['done']} rollouts failed, e.g. {inner['failures']}\n")
    total_turns = rollouts * turns
    return {"name": f"floor, {'one loop' if layout == 'loop' else 'thread per rollout'}",
            "done": inner["done"], "process_ms": 1000 * (usage.ru_utime + usage.ru_stime) / total_turns,
            "rollouts_ms": 1000 * inner["cpu_s"] / total_turns, "wall_s": inner["wall_s"]}


def harness(rollouts: int, turns: int, latency: float, loops: int | None = None) -> dict[str, Any]:
    measured = shared_mode_scale.run(rollouts, turns, latency, loops=loops)
    name = "harness, thread per rollout" if loops is None else f"harness, {loops} shared pilot loop{'s' * (loops > 1)}"
    return {"name": name, "done": measured["done"],
            "process_ms": measured["cpu_ms_per_turn"], "rollouts_ms": None, "wall_s": measured["wall_s"]}


def main(argv: list[str]) -> None:
    rollouts, turns, latency = (int(argv[0]) if argv else 1000, int(argv[1]) if len(argv) > 1 else 5,
                                float(argv[2]) if len(argv) > 2 else 2.0)
    rows = [floor(rollouts, turns, latency, "loop"), floor(rollouts, turns, latency, "threads"),
            harness(rollouts, turns, latency, loops=1), harness(rollouts, turns, latency)]
    measured = rows[-1]["process_ms"]
    body = []
    for row in rows:
        per_turn = row["rollouts_ms"] if row["rollouts_ms"] is not None else row["process_ms"]
        body.append([
            row["name"], f"{row['done']}/{rollouts}", f"{row['process_ms']:.2f}",
            "-" if row["rollouts_ms"] is None else f"{row['rollouts_ms']:.2f}",
            f"{measured / row['process_ms']:.2f}x", f"{100 * per_turn / GOAL_MS:.0f}%",
            f"{row['wall_s']:.1f} / {turns * latency:.1f}",
        ])
    where = os.environ.get("TMPDIR") or tempfile.gettempdir()
    print(table(
        f"rollout floor: {rollouts} rollouts x {turns} turns, {latency} s model latency, written to {where} "
        f"({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()})",
        ["run", "done", "CPU/turn, process (ms)", "CPU/turn, rollouts only (ms)", "harness / this",
         f"of the {GOAL_MS:g} ms goal", "wall / ideal (s)"],
        body,
    ))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Shared mode at scale: N concurrent rollouts in one controller process.

Every rollout uses the scripted provider with a simulated model latency (default 1 s per
turn) against its own fake broker (all brokers live in one separate process serving
realistic 1920x1080 frames). Reports whether all rollouts completed, the controller's CPU
share of the wall time on this machine, and its peak RSS per rollout (target <= 25 MiB).

    uv run python benchmarks/shared_mode_scale.py [ROLLOUTS] [TURNS] [LATENCY_S]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, broker_process, table


def main(rollouts: int, turns: int, latency: float) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with broker_process(rollouts, 1920, 1080, tmp, realistic=True) as info:
            script = tmp / "script.jsonl"
            batch = {"actions": [{"type": "click", "x": 900, "y": 500, "button": "left", "count": 1},
                                 {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]}
            script.write_text("".join(json.dumps(batch) + "\n" for _ in range(turns - 1))
                              + json.dumps({"actions": [{"type": "done"}]}) + "\n")
            config = {
                "name": "shared-scale", "expected_rollouts": rollouts, "max_concurrency": rollouts,
                "execution_mode": "shared", "tasks_dir": str(REPO / "examples" / "tasks"),
                "infrastructure": {"backend": "example-pool", "broker_version": "windows-autocad-2019-v11",
                                   "settings": {"workers": info["urls"], "token_env": "BENCH_POOL_TOKEN",
                                                "lease_dir": str(tmp / "leases")}},
                "evaluation": {"enabled": False},
                "rollouts": [{"rollout_id": f"r{i:03d}", "task_id": "line-and-circle", "provider": "scripted",
                              "model": f"replay-{i}", "provider_options": {"script": str(script),
                                                                          "latency_s": latency}}
                             for i in range(rollouts)],
            }
            config_path = tmp / "config.json"
            config_path.write_text(json.dumps(config))
            env = {**os.environ, "BENCH_POOL_TOKEN": info["token"]}
            start = time.monotonic()
            process = subprocess.Popen(["autocad-bench-batch", "--config", str(config_path), "--execute",
                                        "--output-dir", str(tmp / "out")], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.monotonic() - start
            summary = json.loads(process.stdout.read().decode().strip().splitlines()[-1]) if process.stdout else {}
            # A baseline: the same command's import-and-plan footprint with one rollout.
            baseline = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    counts = summary.get("counts", {})
    cpu = usage.ru_utime + usage.ru_stime
    rss_mib = usage.ru_maxrss / 1024
    ideal = turns * latency
    rows = [
        ["rollouts", rollouts], ["turns per rollout", turns], ["model latency per turn (s)", latency],
        ["exit status", os.waitstatus_to_exitcode(status)],
        ["completed", f"{counts.get('done', 0)} of {rollouts}"],
        ["wall time (s)", f"{wall:.1f} (ideal {ideal:.1f})"],
        ["controller CPU (s)", f"{cpu:.1f}"],
        ["controller CPU share of 2 cores", f"{cpu / (wall * (os.cpu_count() or 1)):.0%}"],
        ["controller peak RSS (MiB)", f"{rss_mib:.0f}"],
        ["peak RSS per rollout (MiB, target <= 25)", f"{rss_mib / rollouts:.2f}"],
    ]
    _ = baseline
    print(table(f"shared mode, {rollouts} concurrent rollouts", ["measure", "value"], rows))


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:]]
    main(int(args[0]) if args else 200, int(args[1]) if len(args) > 1 else 5, args[2] if len(args) > 2 else 1.0)

"""Time from a local-xvfb launch to a verified sequence-0 frame.

Each launch is what a rollout gets before its first model call: a private Xvfb display, the
broker started and proven by authenticated ``/health``, then lease and reset (LibreCAD
started on the task template, handoff checks, stable first frame) and frame 0 fetched with
its checksum verified. The sandbox is torn down after every launch (teardown is timed too,
but is not part of the launch time).

    uv run python benchmarks/xvfb_launch.py [--launches 10] [--target-s 3.0]

Target: median launch-to-frame-0 <= 3 s on 2 cores. Exit status 1 when the median misses it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from autocad_bench.broker.client import BrokerClient
from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest
from autocad_bench_xvfb.lifecycle import launch_sandbox
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.settings import LocalXvfbSettings

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "examples" / "tasks" / "line-and-circle" / "template.dxf"
COLUMNS = ("xvfb_s", "broker_ready_s", "health_s", "launch_s", "reset_s", "frame0_s", "teardown_s")


async def _frame_zero(url: str, token: str, attempt: str) -> None:
    client = BrokerClient(url, token)
    lease = await client.lease("line-and-circle", attempt)
    reset = await client.reset(lease.session_id)
    await client.frame(reset.frame.sequence, expected_sha256=reset.frame.sha256)


def one_launch(root: Path, index: int) -> dict[str, float]:
    state = root / "state"
    settings = LocalXvfbSettings(state_dir=str(state))
    output = root / "batch" / "rollouts" / f"bench-{index}"
    output.mkdir(parents=True)
    request = RolloutLaunchRequest(
        batch_id="xvfb-launch-benchmark", rollout_id=f"bench-{index}", attempt_id=f"bench-{index}",
        task_id="line-and-circle",
        spec=InfrastructureSpec(backend="local-xvfb", broker_version="windows-autocad-2019-v11",
                                settings={"state_dir": str(state)}),
        child_command=("true",), output_dir=output, log_path=root / "batch" / f"bench-{index}.log",
        evaluation=EvaluationArguments(enabled=False, task_id="line-and-circle"), task_template=TEMPLATE,
    )
    started = time.monotonic()
    sandbox = launch_sandbox(request, settings, state_dir=state, mode="shared", log=LifecycleLog(request.log_path))
    try:
        launched = time.monotonic()
        assert sandbox.url is not None
        asyncio.run(_frame_zero(sandbox.url, sandbox.token, request.attempt_id))
        frame0 = time.monotonic()
    finally:
        before = time.monotonic()
        report = sandbox.teardown()
        teardown = time.monotonic() - before
    if not report.ok:
        raise RuntimeError(f"teardown failed: {report.errors}")
    return {**{k: sandbox.timings[k] for k in ("xvfb_s", "broker_ready_s", "health_s", "launch_s")},
            "reset_s": frame0 - launched, "frame0_s": frame0 - started, "teardown_s": teardown}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=10)
    parser.add_argument("--target-s", type=float, default=3.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="xvfb-bench-") as tmp:
        for index in range(args.launches):
            rows.append(one_launch(Path(tmp), index))
            print(f"launch {index + 1}/{args.launches}: frame 0 after {rows[-1]['frame0_s']:.2f} s", file=sys.stderr)
    cpus = len(os.sched_getaffinity(0))
    print(f"local-xvfb launch to verified frame 0: {args.launches} sequential launches on {cpus} CPUs")
    print(f"{'step':<16}{'median s':>10}{'max s':>10}")
    for column in COLUMNS:
        values = [row[column] for row in rows]
        print(f"{column:<16}{statistics.median(values):>10.3f}{max(values):>10.3f}")
    median = statistics.median(row["frame0_s"] for row in rows)
    verdict = "meets" if median <= args.target_s else "MISSES"
    print(f"median launch to frame 0 {median:.2f} s {verdict} the {args.target_s:.1f} s target "
          f"(ratio {median / args.target_s:.2f})")
    return 0 if median <= args.target_s else 1


if __name__ == "__main__":
    sys.exit(main())

"""Launch to a verified frame 0: the ray backend against local-xvfb, side by side on this machine.

Starts a two-node Ray cluster on 127.0.0.1 (``ray.cluster_utils.Cluster``, 1 CPU and 2 desktop
slots per node), then alternates launches: one through the ray backend (detached named actor,
placement by the ``desktop`` resource, local-xvfb's desktop on the node, handoff returned to
the controller) and one straight through local-xvfb. Each launch ends with lease, reset and
frame 0 fetched with its checksum verified by the controller's broker client, and is torn
down afterwards (teardown timed apart). Prints the medians and the Ray/local ratio.

    uv run python benchmarks/ray_launch.py [--launches 6]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("xvfb_launch", HERE / "xvfb_launch.py")
assert _spec is not None and _spec.loader is not None
xvfb_launch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(xvfb_launch)


def ray_launch(root: Path, address: str, index: int) -> dict[str, float]:
    from autocad_bench_ray.lifecycle import RayLog, launch_desktop, teardown_actor
    from autocad_bench_ray.settings import RaySettings

    settings = RaySettings(address=address, node_work_dir=str(root / "node"))
    output = root / "batch" / "rollouts" / f"ray-{index}"
    output.mkdir(parents=True)
    request = RolloutLaunchRequest(
        batch_id="ray-launch-benchmark", rollout_id=f"ray-{index}", attempt_id=f"ray-{index}",
        task_id="line-and-circle",
        spec=InfrastructureSpec(backend="ray", broker_version="windows-autocad-2019-v11",
                                settings=settings.model_dump(mode="json", exclude_none=True)),
        child_command=("true",), output_dir=output, log_path=root / "batch" / f"ray-{index}.log",
        evaluation=EvaluationArguments(enabled=False, task_id="line-and-circle"),
        task_template=xvfb_launch.TEMPLATE,
    )
    log = RayLog(request.log_path)
    started = time.monotonic()
    actor, handoff = launch_desktop(request, settings, log)
    launched = time.monotonic()
    try:
        asyncio.run(xvfb_launch._frame_zero(handoff.url, handoff.token, request.attempt_id))
        frame0 = time.monotonic()
    finally:
        before = time.monotonic()
        outcome, lost = teardown_actor(actor, settings.namespace(request.batch_id), request.rollout_id, log)
        teardown = time.monotonic() - before
    if lost or outcome is None or outcome.errors:
        raise RuntimeError(f"teardown failed: {lost or (outcome.errors if outcome else '')}")
    return {"launch_s": launched - started, "desktop_launch_s": handoff.timings.get("launch_s", 0.0),
            "actor_overhead_s": (launched - started) - handoff.timings.get("launch_s", 0.0),
            "reset_s": frame0 - launched, "frame0_s": frame0 - started, "teardown_s": teardown}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=6)
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    from autocad_bench_ray.connection import connect

    node = {"num_cpus": 1, "resources": {"desktop": 2}, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=dict(node))
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    rows: dict[str, list[dict[str, float]]] = {"ray": [], "local-xvfb": []}
    try:
        connect(cluster.address)
        with tempfile.TemporaryDirectory(prefix="ray-bench-") as tmp:
            for index in range(args.launches):
                rows["ray"].append(ray_launch(Path(tmp), cluster.address, index))
                rows["local-xvfb"].append(xvfb_launch.one_launch(Path(tmp), index))
                print(f"launch {index + 1}/{args.launches}: ray {rows['ray'][-1]['frame0_s']:.2f} s, "
                      f"local-xvfb {rows['local-xvfb'][-1]['frame0_s']:.2f} s", file=sys.stderr)
    finally:
        ray.shutdown()
        cluster.shutdown()
    cpus = len(os.sched_getaffinity(0))
    print(f"launch to verified frame 0, {args.launches} alternating launches each, 2 Ray nodes on 127.0.0.1, "
          f"{cpus} CPUs")
    print(f"{'step':<18}{'ray median s':>14}{'local median s':>16}{'ratio ray/local':>17}")
    for column in ("launch_s", "reset_s", "frame0_s", "teardown_s"):
        ray_median = statistics.median(row[column] for row in rows["ray"])
        local_median = statistics.median(row[column] for row in rows["local-xvfb"])
        print(f"{column:<18}{ray_median:>14.3f}{local_median:>16.3f}{ray_median / local_median:>17.2f}")
    overhead = statistics.median(row["actor_overhead_s"] for row in rows["ray"])
    print(f"of the ray launch: actor creation, placement and handoff transfer {overhead:.3f} s (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m autocad_bench_ray.local_cluster``: a Ray cluster of several nodes on 127.0.0.1.

Starts ``--nodes`` Ray nodes on this machine (``ray.cluster_utils.Cluster``), each declaring
``--slots`` units of the desktop resource and ``--cpus`` CPUs, prints one JSON line
``{"address": ...}`` on stdout and keeps the cluster up until SIGTERM/SIGINT or until its
stdin closes (so a controller that started it with a pipe takes it down even when it is
killed). Used by ``local_cluster`` batches and as the one-liner of ``docs/ray.md``::

    python -m autocad_bench_ray.local_cluster --nodes 2 --slots 2 < /dev/tty

Exit codes: 0 after a clean shutdown, 1 when the cluster could not start.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from types import FrameType


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m autocad_bench_ray.local_cluster")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--slots", type=int, default=2, help="desktop slots per node")
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs each node declares")
    parser.add_argument("--resource", default="desktop")
    parser.add_argument("--no-stdin", action="store_true", help="do not stop when stdin closes")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from ray.cluster_utils import Cluster

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    node_args = {"num_cpus": args.cpus, "resources": {args.resource: args.slots},
                 "node_ip_address": "127.0.0.1", "include_dashboard": False}
    try:
        cluster = Cluster(initialize_head=True, head_node_args=dict(node_args))
        for _ in range(args.nodes - 1):
            cluster.add_node(**node_args)
        cluster.wait_for_nodes()
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    print(json.dumps({"address": cluster.address, "nodes": args.nodes, "slots": args.slots}), flush=True)
    if not args.no_stdin:
        def watch_stdin() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
    return 0


if __name__ == "__main__":
    sys.exit(main())

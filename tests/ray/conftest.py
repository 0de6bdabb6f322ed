"""Fixtures of the ray backend tests: a real two-node Ray cluster on 127.0.0.1, config helpers, process scans.

Ray's switches are set before Ray is imported: under ``uv run`` Ray would otherwise ship and
rebuild the workspace for every worker, and the nodes would bind the machine's address.
Only one Ray cluster runs at a time on the machine (a file lock shared by pytest-xdist
workers; ``xdist_group`` does not group tests under pytest 9.2 with xdist 3.8), each module
gets its own cluster with its own temp directory, and the ports are Ray's free ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from tests.xvfb.conftest import processes_mentioning

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "suite"
GOLD = REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "gold-cache"
VERSION = "windows-autocad-2019-v11"
TASKS = ("prim-rectangle", "prim-circle-concentric", "part-plate-four-holes")
LOCK = Path("/tmp/autocad-bench-ray-tests.lock")

needs_desktop = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("Xvfb", "librecad", "xdotool")),
    reason="Xvfb, LibreCAD and xdotool are required (apt-get install -y xvfb librecad xdotool)",
)


class RayCluster:
    """A started ``ray.cluster_utils.Cluster`` and its worker nodes."""

    def __init__(self, cluster: Any, workers: list[Any], slots: int) -> None:
        self.cluster = cluster
        self.workers = workers
        self.slots = slots

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_worker(self) -> Any:
        node = self.cluster.add_node(num_cpus=1, resources={"desktop": self.slots}, node_ip_address="127.0.0.1",
                                     include_dashboard=False)
        self.cluster.wait_for_nodes()
        self.workers.append(node)
        return node


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """Two Ray nodes on 127.0.0.1 (head + one worker), each with 1 CPU and 2 desktop slots.

    Skips only when Ray cannot start here (the reason says why).
    """
    from filelock import FileLock

    with FileLock(str(LOCK)):
        try:
            import ray
            from ray.cluster_utils import Cluster
        except ImportError as error:  # pragma: no cover - the workspace installs ray
            pytest.skip(f"ray is not installed: {error}")
        args = {"num_cpus": 1, "resources": {"desktop": 2}, "node_ip_address": "127.0.0.1",
                "include_dashboard": False}
        try:
            cluster = Cluster(initialize_head=True, head_node_args=dict(args))
            worker = cluster.add_node(**args)
            cluster.wait_for_nodes(timeout=120)
        except Exception as error:
            pytest.skip(f"Ray cannot start a cluster on this machine: {type(error).__name__}: {error}")
        handle = RayCluster(cluster, [worker], 2)
        try:
            yield handle
        finally:
            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()


def ray_config(tmp_path: Path, address: str, rollouts: list[dict[str, Any]], *, name: str = "ray-test",
               max_concurrency: int = 4, **settings: Any) -> Path:
    """A batch configuration for the ray backend at ``address`` with node files under ``tmp_path/node``."""
    config = {
        "name": name, "expected_rollouts": len(rollouts), "max_concurrency": max_concurrency,
        "execution_mode": "shared", "tasks_dir": str(SUITE / "tasks"),
        "infrastructure": {"backend": "ray", "broker_version": VERSION,
                           "settings": {"address": address, "node_work_dir": str(tmp_path / "node"), **settings}},
        "evaluation": {"enabled": True, "evaluator_version": "2026.12.3", "gold_cache": str(GOLD)},
        "rollouts": rollouts,
    }
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(config))
    return path


def reference_rollout(rollout_id: str, task_id: str, latency_s: float = 0.0,
                      model: str = "reference-solution") -> dict[str, Any]:
    """A scripted rollout replaying ``task_id``'s LibreCAD reference solution."""
    return {"rollout_id": rollout_id, "task_id": task_id, "provider": "scripted", "model": model,
            "provider_options": {"script": str(SUITE / "tasks" / task_id / "solution.librecad.jsonl"),
                                 "latency_s": latency_s}}


def run_batch(config: Path, out: Path, *extra: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir", str(out),
                           *extra], capture_output=True, text=True, timeout=timeout, env={**os.environ, "CI": "1"})


def rows(out: Path) -> dict[str, dict[str, Any]]:
    return {row["rollout_id"]: row for row in json.loads((out / "batch-state.json").read_text())["rollouts"]}


def nodes_used(out: Path) -> dict[str, str]:
    """Rollout id -> the node id its (last) desktop was placed on, from the rollout logs."""
    placed = {}
    for log in (out / "logs").glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if "desktop actor placed on node" in line:
                placed[log.stem] = line.split("placed on node ")[1].split()[0]
    return placed


def assert_nothing_left(*marks: Path, timeout_s: float = 30.0) -> None:
    """No process mentions any of ``marks`` (Xvfb, broker, LibreCAD, sentinel), within a bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for mark in marks for p in processes_mentioning(str(mark))]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert left == [], f"processes left behind: {left}"


"""The ray backend on a real two-node Ray cluster on 127.0.0.1 with real LibreCAD desktops.

In order (one cluster for the module): admission reports the cluster; a batch spreads over
both nodes and every rollout scores 1.0; a controller killed with ``kill -9`` is recovered
through the batch's named actors; a desktop whose actor died or whose controller vanished
is reaped by its node's sentinel; a node removed mid-batch ends its rollouts as
``infrastructure_lost``, the rerun replaces them, and nothing is left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.infrastructure import (
    AssignmentView,
    EvaluationArguments,
    InfrastructureSpec,
    PreflightRequest,
    RolloutLaunchRequest,
)
from autocad_bench_ray.plugin import RayPlugin

from .conftest import (
    SUITE,
    TASKS,
    VERSION,
    RayCluster,
    assert_nothing_left,
    needs_desktop,
    nodes_used,
    ray_config,
    reference_rollout,
    rows,
    run_batch,
)

# One Ray cluster at a time on the machine (the ray_cluster fixture holds a file lock shared by the
# pytest-xdist workers, and its wait counts against the test's bound), and a loaded 2-CPU machine
# can take minutes per real-desktop batch: hence the longer bound.
pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(1200), needs_desktop]


def _spec(tmp_path: Path, address: str, **settings: object) -> InfrastructureSpec:
    return InfrastructureSpec(backend="ray", broker_version=VERSION,
                              settings={"address": address, "node_work_dir": str(tmp_path / "node"), **settings})


def _preflight(spec: InfrastructureSpec, assignments: int = 3, concurrency: int = 8):  # type: ignore[no-untyped-def]
    views = tuple(AssignmentView(rollout_id=f"r{i}", task_id="prim-rectangle", provider="scripted", model="m")
                  for i in range(assignments))
    return RayPlugin().preflight(PreflightRequest(batch_id="plan", spec=spec, assignments=views,
                                                  max_concurrency=concurrency))


def test_admission_reports_nodes_slots_and_readiness_and_refuses_what_the_cluster_cannot_hold(
        tmp_path: Path, ray_cluster: RayCluster) -> None:
    report = _preflight(_spec(tmp_path, ray_cluster.address), assignments=6)
    checks = {check.name: check for check in report.checks}
    assert report.passed, report
    nodes = checks["node_readiness"].details["nodes"]
    assert len(nodes) == 2 and all(n["ready"] and n["desktop_slots"] == 2 and n["fonts"] > 0 for n in nodes)
    assert len({n["broker_digest"] for n in nodes}) == 1
    assert checks["capacity"].details["desktop_slots"] == 4 and report.admitted_wave == 4

    missing = _preflight(_spec(tmp_path, ray_cluster.address, desktop={"librecad_path": "/nonexistent/librecad"}))
    assert not missing.passed and missing.admitted_wave == 0
    assert "LibreCAD not found" in {c.name: c for c in missing.checks}["node_readiness"].reason

    other = _preflight(_spec(tmp_path, ray_cluster.address, desktop_resource="gpu_desktop"))
    assert not other.passed and "no alive node declares the 'gpu_desktop' resource" in other.checks[1].reason
    assert not (tmp_path / "node").exists(), "admission must not create anything on the nodes"


def test_a_batch_spreads_over_both_nodes_and_every_rollout_scores(tmp_path: Path, ray_cluster: RayCluster) -> None:
    rollouts = [reference_rollout(f"ref-{task}", task) for task in TASKS]
    rollouts.append(reference_rollout("ref-again", TASKS[0], model="reference-solution-again"))
    out = tmp_path / "out"
    result = run_batch(ray_config(tmp_path, ray_cluster.address, rollouts), out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    states = rows(out)
    assert {r["state"] for r in states.values()} == {"done"}
    assert all(r["score"] == pytest.approx(1.0) for r in states.values()), states
    # Four desktops at once, two slots per node: Ray must have used both nodes.
    assert len(set(nodes_used(out).values())) == 2, nodes_used(out)
    assert_nothing_left(tmp_path / "node")
    assert not [p for p in (tmp_path / "node").rglob("*") if p.is_file()]


def test_a_controller_killed_mid_rollout_is_recovered_through_the_named_actors(
        tmp_path: Path, ray_cluster: RayCluster) -> None:
    task = "part-plate-four-holes"
    config = ray_config(tmp_path, ray_cluster.address, [reference_rollout("plate", task, latency_s=0.4)],
                        heartbeat_s=1, desktop_ttl_s=120)
    out = tmp_path / "out"
    paths = RolloutPaths(out / "rollouts" / "plate")
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir",
                                   str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True, env={**os.environ, "CI": "1"})
    try:
        deadline = time.monotonic() + 180
        while not (paths.input_receipts.exists() and paths.input_receipts.read_text().count("\n") >= 2):
            assert controller.poll() is None, "the batch ended before its second action batch"
            assert time.monotonic() < deadline, "the rollout never reached its second action batch"
            time.sleep(0.05)
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait(timeout=10)
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)

    plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    (entry,) = json.loads(plan.stdout)["entries"]
    assert entry["action"] == "resume" and entry["worker_id"].startswith("ray:"), entry
    executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                              timeout=400, env={**os.environ, "CI": "1"})
    assert executed.returncode == 0, executed.stdout[-3000:] + executed.stderr[-3000:]

    (row,) = rows(out).values()
    assert row["state"] == "done" and row["score"] == pytest.approx(1.0), row
    events = json.loads(paths.events.read_text())["events"]
    executions = Counter(e["detail"]["request_id"] for e in events if e["kind"] == "actions")
    assert executions and set(executions.values()) == {1}, f"an action request ran twice: {executions}"
    assert "re-attached to desktop" in (out / "logs" / "plate.log").read_text()
    assert_nothing_left(tmp_path / "node")


def _launch_request(tmp_path: Path, spec: InfrastructureSpec, rollout_id: str) -> RolloutLaunchRequest:
    output = tmp_path / "batch" / "rollouts" / rollout_id
    output.mkdir(parents=True, exist_ok=True)
    return RolloutLaunchRequest(
        batch_id="reap-test", rollout_id=rollout_id, attempt_id=f"reap-test.{rollout_id}.1", task_id="prim-rectangle",
        spec=spec, child_command=("true",), output_dir=output, log_path=tmp_path / "batch" / f"{rollout_id}.log",
        evaluation=EvaluationArguments(enabled=False, task_id="prim-rectangle"),
        task_template=SUITE / "tasks" / "prim-rectangle" / "template.dxf")


def test_the_node_sentinel_reaps_a_desktop_whose_actor_died_or_whose_controller_vanished(
        tmp_path: Path, ray_cluster: RayCluster) -> None:
    import ray

    from autocad_bench_ray.connection import connect
    from autocad_bench_ray.lifecycle import RayLog, find_actor, launch_desktop

    spec = _spec(tmp_path, ray_cluster.address, heartbeat_s=1, desktop_ttl_s=4)
    settings = RayPlugin().settings(spec)
    connect(ray_cluster.address)
    request = _launch_request(tmp_path, spec, "killed")
    actor, handoff = launch_desktop(request, settings, RayLog(request.log_path))
    assert handoff.url.startswith("http://127.0.0.1:")
    ray.kill(actor, no_restart=True)  # no teardown: the actor's process just dies
    assert_nothing_left(tmp_path / "node", timeout_s=30)

    request = _launch_request(tmp_path, spec, "orphaned")
    started = time.monotonic()
    actor, _ = launch_desktop(request, settings, RayLog(request.log_path))  # and never a heartbeat
    namespace = settings.namespace("reap-test")
    deadline = time.monotonic() + 40
    while find_actor(namespace, "orphaned") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert find_actor(namespace, "orphaned") is None, "the TTL did not end the desktop actor"
    assert time.monotonic() - started >= 4
    assert_nothing_left(tmp_path / "node", timeout_s=30)
    assert not [p for p in (tmp_path / "node").rglob("*") if p.is_file() and p.suffix in (".json", ".token")]


def test_a_node_removed_mid_batch_loses_its_rollouts_which_the_rerun_replaces(
        tmp_path: Path, ray_cluster: RayCluster, restores_the_worker_node: None) -> None:
    """Removes the worker node; the rerun runs on the node that is left; a fresh worker node
    joins at the end so the module's other tests still see two nodes."""
    # Four seconds per model turn: after its first action batch a rollout still has five turns
    # (20 s and more) to go, longer than the four desktops of a loaded 2-CPU machine take to
    # start apart; so both rollouts on the worker are mid-rollout when it is removed. (At one
    # second per turn, a rollout placed first could finish before the last one started.)
    rollouts = [reference_rollout(f"slow-{i}", "part-plate-four-holes", latency_s=4.0, model=f"reference-{i}")
                for i in range(4)]
    config = ray_config(tmp_path, ray_cluster.address, rollouts, heartbeat_s=1, desktop_ttl_s=60)
    out = tmp_path / "out"
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir",
                                   str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True, env={**os.environ, "CI": "1"})
    worker = ray_cluster.workers[0]
    worker_node = worker.node_id
    try:
        deadline = time.monotonic() + 180
        while True:
            placed = nodes_used(out) if (out / "logs").exists() else {}
            receipts = [RolloutPaths(out / "rollouts" / r).input_receipts for r in placed]
            running = [p for p in receipts if p.exists() and p.read_text().count("\n") >= 1]
            if len(placed) == 4 and len(running) == 4:
                break
            assert controller.poll() is None, "the batch ended before every rollout ran"
            assert time.monotonic() < deadline, f"not every rollout started: {placed}"
            time.sleep(0.1)
        lost = {r for r, node in placed.items() if worker_node.startswith(node)}
        assert len(lost) == 2, placed
        # Six model turns in the script: a rollout at its fifth could end before the node does.
        turns = {r: RolloutPaths(out / "rollouts" / r).model_turns.read_text().count("\n") for r in lost}
        assert all(n < 5 for n in turns.values()), f"a rollout on the worker was nearly done: {turns}"
        ray_cluster.cluster.remove_node(worker, allow_graceful=False)
        ray_cluster.workers.remove(worker)
        controller.communicate(timeout=400)
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    states = rows(out)
    for rollout_id, row in states.items():
        if rollout_id in lost:
            assert row["state"] == "failed" and row["failure_class"] == "infrastructure_lost", row
        else:
            assert row["state"] == "done" and row["score"] == pytest.approx(1.0), row
    detail = json.loads(RolloutPaths(out / "rollouts" / sorted(lost)[0]).result.read_text())["failure_detail"]
    assert "mid-rollout" in detail and worker_node[:12] in detail
    assert_nothing_left(tmp_path / "node", timeout_s=40)

    # The retry matrix never replaces a rollout after its model handoff silently: the
    # operator's rerun of the infrastructure class does, on the nodes that are left.
    again = tmp_path / "rerun"
    rerun = run_batch(config, again, "--rerun-failed-from", str(out), "--failure-class", "infrastructure_lost")
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert set(rows(again)) == lost
    assert all(r["state"] == "done" and r["score"] == pytest.approx(1.0) for r in rows(again).values())
    assert_nothing_left(tmp_path / "node")


@pytest.fixture
def restores_the_worker_node(ray_cluster: RayCluster) -> Iterator[None]:
    yield
    if not ray_cluster.workers:
        ray_cluster.add_worker()

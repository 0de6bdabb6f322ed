"""Real batches (``autocad-bench-batch --execute``) on the fake pool, and a controller killed mid-batch.

The controller and its wrappers reach the fake hosts through a stand-in ``powershell.exe``
(a real process per host command), exactly as on a Hyper-V host with a local connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.infrastructure import ActiveWorkersRequest, ReapRequest
from autocad_bench.testing.layout import check_batch_layout
from tests.hyperv.conftest import GUEST_PASSWORD, REPO, SECRETS_ENV, Lab

EXAMPLES = REPO / "examples"


def test_the_example_configs_differ_only_in_their_infrastructure_block() -> None:
    xvfb = json.loads((EXAMPLES / "local-librecad.json").read_text())
    hyperv = json.loads((EXAMPLES / "hyperv-pool.json").read_text())
    assert xvfb["infrastructure"]["backend"] == "local-xvfb"
    assert hyperv["infrastructure"]["backend"] == "local-hyperv"
    del xvfb["infrastructure"], hyperv["infrastructure"]
    assert xvfb == hyperv


def test_the_example_pool_settings_are_valid() -> None:
    from autocad_bench.infrastructure import InfrastructureSpec
    from autocad_bench_hyperv.plugin import HyperVPlugin

    spec = InfrastructureSpec.model_validate(json.loads((EXAMPLES / "hyperv-pool.json").read_text())["infrastructure"])
    assert HyperVPlugin().validate_spec(spec, "$") == []


def example_on(lab: Lab, tmp: Path, mode: str, **settings: Any) -> tuple[Path, dict[str, Any]]:
    """``examples/local-librecad.json`` with only its infrastructure block replaced by the fake pool.

    The example names the packaged suite and each task's own solution, so the copy in ``tmp``
    runs unchanged.
    """
    config = json.loads((EXAMPLES / "local-librecad.json").read_text())
    config["infrastructure"] = {"backend": "local-hyperv", "broker_version": config["infrastructure"]["broker_version"],
                                "settings": lab.settings(subprocess=True, **settings)}
    config["execution_mode"] = mode
    path = tmp / f"hyperv-{mode}.json"
    path.write_text(json.dumps(config))
    return path, config


def _env() -> dict[str, str]:
    return {**os.environ, **SECRETS_ENV}


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_the_example_batch_runs_on_the_hyper_v_pool(lab: Lab, tmp_path: Path, mode: str) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    out = tmp_path / "out"
    path, config = example_on(lab, tmp_path, mode)
    result = subprocess.run(["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(out)],
                            capture_output=True, text=True, env=_env(), timeout=120)
    rollouts = [r["rollout_id"] for r in config["rollouts"]]
    state = json.loads((out / "batch-state.json").read_text())
    assert state["infrastructure_backend"] == "local-hyperv"
    assert [r["state"] for r in state["rollouts"]] != ["queued"] * len(rollouts)
    actions = 0
    for rollout in rollouts:
        outcome = json.loads((out / "rollouts" / rollout / "result.json").read_text())
        assert outcome["stop_reason"] == "done", (rollout, outcome, result.stderr[-2000:])
        actions += outcome["actions"]
        usage = json.loads((out / "rollouts" / rollout / "infrastructure.json").read_text())
        assert usage["workers"][0]["host"] == "hv1" and usage["workers"][0]["hourly_usd"] == 0.5
        if config["evaluation"]["enabled"]:
            assert (out / "rollouts" / rollout / "evaluation" / "status.json").exists()
    # Every action of every rollout reached a broker exactly once.
    assert sum(host.injected_total(vm) for vm in ("acad-01", "acad-02")) == actions > 0
    lab.assert_pool_clean()
    assert len(host.tokens) == len(rollouts) == len(set(host.tokens)), "one fresh token per rollout"
    assert check_batch_layout(out, secrets=[GUEST_PASSWORD, *host.tokens],
                              evaluation=config["evaluation"]["enabled"]) == []
    reconcile = json.loads((out / "reconcile.json").read_text())
    assert reconcile == {"cleaned": [], "errors": []}


def test_a_controller_killed_mid_batch_is_cleaned_up_by_reap_batch(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    for vm in host.vms:
        host.arm_events[vm] = threading.Event()
    # The broker never becomes ready: the controller is stuck in admission with both VMs leased.
    host.ready_s = 3600
    out = tmp_path / "out"
    controller = subprocess.Popen(
        ["autocad-bench-batch", "--config", str(example_on(lab, tmp_path, "shared", readiness_timeout_s=60)[0]),
         "--execute", "--output-dir", str(out)], env=_env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not all(e.is_set() for e in host.arm_events.values()):
            assert controller.poll() is None, "the controller exited before it armed both VMs"
            assert time.monotonic() < deadline, "the controller never armed both VMs"
            time.sleep(0.05)
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait(timeout=30)
    time.sleep(0.3)  # a host command already in flight finishes on the host
    batch_id = json.loads((out / "batch-state.json").read_text())["batch_id"]
    marks = [host.mark(vm) for vm in host.vms]
    assert all(m is not None and m["state"] == "leased" and m["batch_id"] == batch_id for m in marks)
    plugin = lab.plugin()
    spec = lab.spec(subprocess=True)
    session = plugin.create_recovery_session(spec)
    workers = plugin.list_active_workers(session, ActiveWorkersRequest(batch_id=batch_id, spec=spec, output_dir=out))
    assert len(workers) == 2 and sorted(workers.values()) == ["hv1/acad-01", "hv1/acad-02"]
    # The operator's reconciler after a crash: ``autocad-bench reap --output-dir OUT`` in a fresh process.
    reaped = subprocess.run(["autocad-bench", "reap", "--output-dir", str(out)], capture_output=True, text=True,
                            env=_env(), timeout=60)
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    first = json.loads(reaped.stdout)
    assert len(first["cleaned"]) == 2 and first["errors"] == []
    lab.assert_pool_clean()
    second = plugin.reap_batch(ReapRequest(batch_id=batch_id, spec=spec, output_dir=out))
    assert second.cleaned == () and second.errors == ()


@pytest.mark.parametrize(("mode", "signum"), [
    pytest.param("shared", signal.SIGINT, marks=pytest.mark.slow), ("subprocess", signal.SIGTERM)])
def test_a_signal_returns_every_vm_and_resume_completes(lab: Lab, tmp_path: Path, mode: str, signum: int) -> None:
    """First signal on the Hyper-V pool: running rollouts stop as interrupted, every VM is
    returned to the pool, exit 128 + signal in time; resume runs the batch to the end."""
    lab.add_host("hv1", ["acad-01", "acad-02"])
    out = tmp_path / "out"
    path, config = example_on(lab, tmp_path, mode)
    for rollout in config["rollouts"]:
        rollout["provider_options"]["latency_s"] = 3.0
    path.write_text(json.dumps(config))
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir",
                                   str(out)], env=_env(), start_new_session=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90

        def at_the_model() -> int:
            found = 0
            for checkpoint in out.glob("rollouts/*/resume-checkpoint.json"):
                with contextlib.suppress(ValueError):
                    found += bool(json.loads(checkpoint.read_text()).get("frame"))
            return found

        while at_the_model() < 2:
            assert controller.poll() is None, controller.communicate()
            assert time.monotonic() < deadline, "two rollouts never reached the model"
            time.sleep(0.05)
        sent = time.monotonic()
        controller.send_signal(signum)
        stdout, stderr = controller.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    assert controller.returncode == 128 + signum, stdout + stderr
    assert took < 30, f"the stop took {took:.1f} s"
    lab.assert_pool_clean()
    state = json.loads((out / "batch-state.json").read_text())
    assert state["status"] == "interrupted"
    stopped = [r for r in state["rollouts"] if r["state"] == "failed"]
    assert len(stopped) == 2 and {r["failure_class"] for r in stopped} == {"interrupted"}

    done = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                          env=_env(), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads((out / "batch-state.json").read_text())
    assert {r["state"] for r in state["rollouts"]} == {"done"}
    lab.assert_pool_clean()

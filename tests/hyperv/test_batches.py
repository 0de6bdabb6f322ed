"""Real batches (``autocad-bench-batch --execute``) on the fake pool, and a controller killed mid-batch.

The controller and its wrappers reach the fake hosts through a stand-in ``powershell.exe``
(a real process per host command), exactly as on a Hyper-V host with a local connection.
"""

from __future__ import annotations

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


def example_on(lab: Lab, tmp: Path, mode: str, **settings: Any) -> Path:
    """``examples/local-librecad.json`` with only its infrastructure block replaced by the fake pool."""
    config = json.loads((EXAMPLES / "local-librecad.json").read_text())
    config["infrastructure"] = {"backend": "local-hyperv", "broker_version": config["infrastructure"]["broker_version"],
                                "settings": lab.settings(subprocess=True, **settings)}
    config["execution_mode"] = mode
    config["tasks_dir"] = str(EXAMPLES / config["tasks_dir"])
    for rollout in config["rollouts"]:
        rollout["provider_options"]["script"] = str(EXAMPLES / rollout["provider_options"]["script"])
    path = tmp / f"hyperv-{mode}.json"
    path.write_text(json.dumps(config))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, **SECRETS_ENV}


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_the_example_batch_runs_on_the_hyper_v_pool(lab: Lab, tmp_path: Path, mode: str) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    out = tmp_path / "out"
    result = subprocess.run(["autocad-bench-batch", "--config", str(example_on(lab, tmp_path, mode)), "--execute",
                             "--output-dir", str(out)], capture_output=True, text=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    state = json.loads((out / "batch-state.json").read_text())
    assert state["counts"]["done"] == 2 and state["infrastructure_backend"] == "local-hyperv"
    for rollout in ("librecad-line-1", "librecad-line-2"):
        outcome = json.loads((out / "rollouts" / rollout / "result.json").read_text())
        assert (outcome["status"], outcome["stop_reason"], outcome["actions"]) == ("completed", "done", 19)
        usage = json.loads((out / "rollouts" / rollout / "infrastructure.json").read_text())
        assert usage["workers"][0]["host"] == "hv1" and usage["workers"][0]["hourly_usd"] == 0.5
    # Both VMs ran one rollout each, every action reached a broker exactly once.
    assert sorted(len(lab.brokers[f"hv1/{vm}"].injected) for vm in ("acad-01", "acad-02")) == [19, 19]
    lab.assert_pool_clean()
    assert len(host.tokens) == 2 and len(set(host.tokens)) == 2, "one fresh token per rollout"
    assert check_batch_layout(out, secrets=[GUEST_PASSWORD, *host.tokens], evaluation=False) == []
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
        ["autocad-bench-batch", "--config", str(example_on(lab, tmp_path, "shared", readiness_timeout_s=60)),
         "--execute", "--output-dir", str(out)], env=_env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for event in host.arm_events.values():
            assert event.wait(timeout=60), "the controller never armed a VM"
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
    assert sorted(workers) == ["librecad-line-1", "librecad-line-2"]
    assert sorted(workers.values()) == ["hv1/acad-01", "hv1/acad-02"]
    # The operator's reconciler after a crash: ``autocad-bench reap --output-dir OUT`` in a fresh process.
    reaped = subprocess.run(["autocad-bench", "reap", "--output-dir", str(out)], capture_output=True, text=True,
                            env=_env(), timeout=60)
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    first = json.loads(reaped.stdout)
    assert len(first["cleaned"]) == 2 and first["errors"] == []
    lab.assert_pool_clean()
    second = plugin.reap_batch(ReapRequest(batch_id=batch_id, spec=spec, output_dir=out))
    assert second.cleaned == () and second.errors == ()

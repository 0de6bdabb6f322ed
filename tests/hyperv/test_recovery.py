"""Recovery from the marks: active workers, status, reconnecting to the same broker, idempotent terminate."""

from __future__ import annotations

import sys
from pathlib import Path

from autocad_bench.infrastructure import ActiveWorkersRequest, RecoveryLaunchRequest
from autocad_bench_hyperv.admission import admit, guest_credential
from autocad_bench_hyperv.lifecycle import EXIT_NOT_RECONNECTABLE, LifecycleLog, new_token, run_lifecycle
from autocad_bench_hyperv.pool import Lease
from autocad_bench_hyperv.settings import hyperv_settings
from tests.hyperv.conftest import SECRETS_ENV, Lab, RecordingChild, launch_request, log_text


def _crashed_controller(lab: Lab, tmp_path: Path) -> tuple[Lease, str]:
    """What a controller killed while its child ran leaves behind: a leased, running, armed VM."""
    spec = lab.spec()
    request = launch_request(tmp_path, spec)
    settings = hyperv_settings(spec)
    pool = lab.plugin().pool(settings)
    log = LifecycleLog(request.log_path)
    lease = pool.lease(request, set(), 1.0, log)
    token = new_token()
    admit(pool, lease, token, request, settings, guest_credential(settings, SECRETS_ENV), log)
    return lease, token


def test_recovery_reconnects_to_the_same_broker_and_then_returns_the_vm(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    _, token = _crashed_controller(lab, tmp_path)
    plugin = lab.plugin()
    spec = lab.spec()
    session = plugin.create_recovery_session(spec)
    workers = plugin.list_active_workers(session, ActiveWorkersRequest(batch_id="batch-1", spec=spec,
                                                                      output_dir=tmp_path))
    assert workers == {"r1": "hv1/acad-01"}
    status = plugin.worker_status(session, "hv1/acad-01")
    assert (status.state, status.reconnectable) == ("running", True)
    assert plugin.worker_status(session, "hv1/acad-02").reconnectable is False
    assert plugin.worker_status(session, "elsewhere/acad-01").state == "unknown"
    request = launch_request(tmp_path, spec)
    command = plugin.build_recovery_command(RecoveryLaunchRequest(launch=request, worker_id="hv1/acad-01",
                                                                  resume_command=("resume", "me")))
    assert command.argv[:4] == (sys.executable, "-m", "autocad_bench_hyperv.wrapper", "recover")
    assert command.argv[-3:] == ("--", "resume", "me") and all(token not in a for a in command.argv)
    child = RecordingChild()
    code = run_lifecycle(request, hyperv_settings(spec), lambda env: _run(child, env, token),
                         pool=plugin.pool(hyperv_settings(spec)), environ=SECRETS_ENV, mode="subprocess",
                         worker_id="hv1/acad-01")
    assert code == 0, log_text(request)
    assert [url for url, _, _ in child.runs] == [lab.brokers["hv1/acad-01"].url]
    assert "start" not in host.vms["acad-01"].history[-4:], "recovery must not restart the VM"
    lab.assert_pool_clean()
    assert plugin.worker_id_from_log(log_text(request)) == "hv1/acad-01"


def _run(child: RecordingChild, env: dict[str, str] | object, token: str) -> int:
    import asyncio
    from collections.abc import Mapping

    assert isinstance(env, Mapping) and env["AUTOCAD_BENCH_BROKER_TOKEN"] == token
    return asyncio.run(child.run(env))


def test_recovery_refuses_a_vm_of_another_rollout_and_leaves_it_alone(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    _crashed_controller(lab, tmp_path)
    spec = lab.spec()
    other = launch_request(tmp_path, spec, rollout_id="r2")
    child = RecordingChild()
    code = run_lifecycle(other, hyperv_settings(spec), lambda env: 0, pool=lab.plugin().pool(hyperv_settings(spec)),
                         environ=SECRETS_ENV, mode="shared", worker_id="hv1/acad-01")
    assert code == EXIT_NOT_RECONNECTABLE and child.runs == []
    assert "not leased to batch-1/r2" in log_text(other)
    assert host.mark("acad-01")["rollout_id"] == "r1"  # type: ignore[index]


def test_terminate_worker_is_idempotent(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    _crashed_controller(lab, tmp_path)
    plugin = lab.plugin()
    session = plugin.create_recovery_session(lab.spec())
    assert plugin.terminate_worker(session, "hv1/acad-01") is True
    lab.assert_pool_clean()
    history = list(host.vms["acad-01"].history)
    assert plugin.terminate_worker(session, "hv1/acad-01") is True
    assert host.vms["acad-01"].history == history, "terminating a clean VM changes nothing"
    assert plugin.terminate_worker(session, "hv1/nope") is False

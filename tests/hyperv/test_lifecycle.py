"""One rollout's lifecycle on the fake pool: lease, restore, admission, child, return; faults and replacement."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from autocad_bench.controller.children import run_subprocess
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import FailureClass, RolloutResult
from autocad_bench.storage import atomic_write_json
from autocad_bench_hyperv.lifecycle import EXIT_LAUNCH_FAILED
from tests.hyperv.conftest import GUEST_PASSWORD, SECRETS_ENV, Lab, RecordingChild, launch_request, log_text


def test_a_rollout_gets_a_verified_broker_and_leaves_the_vm_restored(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    request = launch_request(tmp_path, lab.spec())
    child = RecordingChild()
    assert lab.plugin().run_shared(request, child) == 0
    [(url, _, _)] = child.runs
    assert url == lab.brokers["hv1/acad-01"].url
    lab.assert_pool_clean()
    # Every step of the contract happened, in order, on the VM it used.
    assert host.vms["acad-01"].history == ["notes", "restore", "notes", "start", "armed", "turn-off", "restore",
                                           "notes"]
    assert host.vms["acad-02"].history == []
    usage = json.loads((request.output_dir / "infrastructure.json").read_text())
    [worker] = usage["workers"]
    assert (worker["worker_id"], worker["hourly_usd"], worker["outcome"]) == ("hv1/acad-01", 0.5, "completed")
    assert worker["cost_usd"] == round(worker["seconds"] / 3600 * 0.5, 6)
    text = log_text(request)
    assert "answers authenticated /health as pid 12345 in session 1" in text
    assert GUEST_PASSWORD not in text
    for script in host.scripts:
        assert GUEST_PASSWORD not in script, "a secret reached the script text"


def test_the_lease_mark_names_the_batch_and_rollout_while_the_child_runs(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    seen: list[dict[str, object] | None] = []

    class Peek(RecordingChild):
        async def run(self, environ: Mapping[str, str]) -> int:
            seen.append(host.mark("acad-01"))
            return await super().run(environ)

    request = launch_request(tmp_path, lab.spec(), rollout_id="r7", batch_id="b7")
    assert lab.plugin().run_shared(request, Peek()) == 0
    [mark] = seen
    assert mark is not None
    assert (mark["state"], mark["batch_id"], mark["rollout_id"], mark["attempt_id"]) == ("leased", "b7", "r7",
                                                                                        "b7.r7.1")
    assert "token" not in json.dumps(mark), "the broker token must never be in the Notes"
    assert host.vms["acad-01"].broker is not None
    assert host.vms["acad-01"].broker.token not in json.dumps(mark)


def test_a_vm_that_never_reports_heartbeat_is_quarantined_and_replaced(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    host.faults.never_heartbeat.add("acad-01")
    request = launch_request(tmp_path, lab.spec(boot_timeout_s=0.5))
    child = RecordingChild()
    assert lab.plugin().run_shared(request, child) == 0
    assert [url for url, _, _ in child.runs] == [lab.brokers["hv1/acad-02"].url]
    lab.assert_pool_clean()
    mark = host.mark("acad-01")
    assert mark is not None and mark["state"] == "quarantined"
    assert "no heartbeat" in str(mark["reason"]) and mark["rollout_id"] == "r1"
    assert "armed" not in host.vms["acad-01"].history
    usage = json.loads((request.output_dir / "infrastructure.json").read_text())
    assert [w["outcome"] for w in usage["workers"]] == ["quarantined", "completed"]
    # A quarantined VM is skipped by the next rollout.
    second = launch_request(tmp_path, lab.spec(), rollout_id="r2")
    child2 = RecordingChild()
    assert lab.plugin().run_shared(second, child2) == 0
    assert [url for url, _, _ in child2.runs] == [lab.brokers["hv1/acad-02"].url]


def test_a_restore_that_fails_once_is_retried(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    host.faults.restore_failures["acad-01"] = 1
    request = launch_request(tmp_path, lab.spec())
    assert lab.plugin().run_shared(request, RecordingChild()) == 0
    assert host.faults.restore_failures["acad-01"] == 0
    lab.assert_pool_clean()
    assert host.mark("acad-01") == {"autocad_bench": 1, "state": "free", "broker_version": "windows-autocad-2019-v11"}


def test_a_broker_whose_health_is_another_process_fails_admission(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    host.faults.readiness_changes["acad-01"] = {"pid": 999}
    request = launch_request(tmp_path, lab.spec())
    child = RecordingChild()
    assert lab.plugin().run_shared(request, child) == 0
    assert [url for url, _, _ in child.runs] == [lab.brokers["hv1/acad-02"].url]
    mark = host.mark("acad-01")
    assert mark is not None and mark["state"] == "quarantined" and "pid 12345 != 999" in str(mark["reason"])
    lab.assert_pool_clean()


def test_powershell_direct_that_is_late_is_retried(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    host.faults.direct_unavailable["acad-01"] = 2
    request = launch_request(tmp_path, lab.spec())
    assert lab.plugin().run_shared(request, RecordingChild()) == 0
    assert "arming attempt 2 of 3 failed" in log_text(request)


def test_when_every_vm_fails_admission_the_child_never_runs(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02", "acad-03"])
    host.faults.never_heartbeat.update({"acad-01", "acad-02", "acad-03"})
    request = launch_request(tmp_path, lab.spec(boot_timeout_s=0.3, vm_attempts=2))
    child = RecordingChild()
    assert lab.plugin().run_shared(request, child) == EXIT_LAUNCH_FAILED
    assert child.runs == []
    states = [host.mark(vm)["state"] for vm in ("acad-01", "acad-02", "acad-03")]  # type: ignore[index]
    assert states == ["quarantined", "quarantined", "free"], "vm_attempts bounds the replacements"
    lab.assert_pool_clean()


def test_no_free_vm_within_the_wait_fails_before_any_model_call(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    host.vms["acad-01"].notes = json.dumps({"autocad_bench": 1, "state": "free",
                                            "broker_version": "windows-autocad-2019-v10"})
    request = launch_request(tmp_path, lab.spec(lease_wait_s=0.2))
    child = RecordingChild()
    assert lab.plugin().run_shared(request, child) == EXIT_LAUNCH_FAILED
    assert child.runs == [] and "no free VM with broker windows-autocad-2019-v11" in log_text(request)


def _result(paths: RolloutPaths, failure: FailureClass | None, turns: int = 0) -> None:
    now = datetime.now(UTC)
    atomic_write_json(paths.result, RolloutResult(
        rollout_id="r1", attempt_id="a", task_id="t", provider="scripted", model="m", infrastructure_backend="x",
        status="failed" if failure else "completed", failure_class=failure, stop_reason=None, turns=turns, actions=0,
        invalid_turns=0, model_responses=turns, usage={}, token_cost_usd=0.0, wall_seconds=0.0, drawing=None,
        attempts=1, started_at=now, finished_at=now, exit_code=1 if failure else 0).model_dump(mode="json"))


class HandoffFailing(RecordingChild):
    """Reports admission_failed (the exact lease/reset failed) on the first ``fail`` runs."""

    def __init__(self, paths: RolloutPaths, fail: int, *, model_started: bool = False) -> None:
        super().__init__()
        self.paths = paths
        self.fail = fail
        self.model_started = model_started

    async def run(self, environ: Mapping[str, str]) -> int:
        code = await super().run(environ)
        if len(self.runs) <= self.fail:
            _result(self.paths, FailureClass.ADMISSION_FAILED, turns=1 if self.model_started else 0)
            return 1
        _result(self.paths, None)
        return code


def test_a_failed_handoff_is_replayed_then_the_vm_is_replaced(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    request = launch_request(tmp_path, lab.spec())
    child = HandoffFailing(RolloutPaths(request.output_dir), fail=2)
    assert lab.plugin().run_shared(request, child) == 0
    urls = [url for url, _, _ in child.runs]
    assert urls == [lab.brokers["hv1/acad-01"].url] * 2 + [lab.brokers["hv1/acad-02"].url]
    assert host.mark("acad-01")["state"] == "quarantined"  # type: ignore[index]
    assert (request.output_dir / "admission-attempts").is_dir()
    lab.assert_pool_clean()


def test_no_rollout_is_replaced_after_its_model_started(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02"])
    request = launch_request(tmp_path, lab.spec())
    child = HandoffFailing(RolloutPaths(request.output_dir), fail=5, model_started=True)
    assert lab.plugin().run_shared(request, child) == 1
    assert [url for url, _, _ in child.runs] == [lab.brokers["hv1/acad-01"].url]
    assert host.vms["acad-02"].history == []
    lab.assert_pool_clean()


def test_a_child_that_raises_still_returns_the_vm(lab: Lab, tmp_path: Path) -> None:
    lab.add_host("hv1", ["acad-01"])

    class Boom(RecordingChild):
        async def run(self, environ: Mapping[str, str]) -> int:
            raise RuntimeError("pilot crashed")

    request = launch_request(tmp_path, lab.spec())
    try:
        lab.plugin().run_shared(request, Boom())
    except RuntimeError:
        pass
    else:
        raise AssertionError("the exception must propagate")
    lab.assert_pool_clean()


def test_two_controllers_never_share_a_vm_or_exceed_the_seats(lab: Lab, tmp_path: Path) -> None:
    hosts = [lab.add_host("hv1", ["acad-01", "acad-02"]), lab.add_host("hv2", ["acad-03"])]
    spec = lab.spec(lease_wait_s=20, licence_seats=2)
    controllers = [lab.plugin(), lab.plugin()]  # separate runners and pools, one set of hosts
    child = RecordingChild(hold_s=0.3)
    codes: list[int] = []

    def rollout(number: int) -> None:
        request = launch_request(tmp_path, spec, rollout_id=f"r{number}", batch_id=f"controller-{number % 2}")
        codes.append(controllers[number % 2].run_shared(request, child))

    threads = [threading.Thread(target=rollout, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert codes == [0] * 6
    events = sorted([(start, 1, url) for url, start, _ in child.runs] + [(end, -1, url) for url, _, end in child.runs])
    holding: list[str] = []
    for _, change, url in events:
        if change < 0:
            holding.remove(url)
            continue
        assert url not in holding, "two rollouts held one VM at once"
        holding.append(url)
        assert len(holding) <= 2, "more VMs in use than licence seats"
    assert len(child.runs) == 6
    for host in hosts:
        for vm in host.vms:
            # The Notes each VM went through (a restore briefly brings back the checkpoint's empty Notes,
            # inside the same locked script that re-marks it): every lease starts from a free mark.
            sequence = ['{"autocad_bench":1,"state":"free"']
            for name, _, after in host.leases:
                if name == vm and after and after != sequence[-1]:
                    sequence.append(after)
            for before, after in itertools.pairwise(sequence):
                if '"state":"leased"' in after:
                    assert '"state":"free"' in before, f"{vm}: {after} replaced {before}"
    lab.assert_pool_clean()


def test_subprocess_mode_runs_the_exact_child_through_a_real_powershell_process(lab: Lab, tmp_path: Path) -> None:
    lab.add_host("hv1", ["acad-01"])
    spec = lab.spec(subprocess=True)
    probe = tmp_path / "probe.json"
    child = (sys.executable, "-c",
             "import json, os, sys; json.dump({k: os.environ.get(k) for k in ('AUTOCAD_BENCH_BROKER_URL', "
             "'AUTOCAD_BENCH_BROKER_TOKEN', 'HYPERV_GUEST_PASSWORD', 'PROVIDER_KEY')}, open(sys.argv[1], 'w')); "
             "sys.exit(3)", str(probe))
    request = launch_request(tmp_path, spec, child=child).model_copy(
        update={"child_environment_names": ("PROVIDER_KEY",)})
    command = lab.plugin().build_rollout_command(request)
    environ = {**os.environ, **SECRETS_ENV, "PROVIDER_KEY": "provider-key-1"}
    assert run_subprocess(command, environ, tmp_path / "wrapper.log") == 3
    seen = json.loads(probe.read_text())
    assert seen["AUTOCAD_BENCH_BROKER_URL"] == lab.brokers["hv1/acad-01"].url
    assert seen["AUTOCAD_BENCH_BROKER_TOKEN"] and seen["PROVIDER_KEY"] == "provider-key-1"
    assert seen["HYPERV_GUEST_PASSWORD"] is None, "the guest credential must not reach the child"
    assert all(GUEST_PASSWORD not in arg for arg in command.argv)
    lab.assert_pool_clean()


def test_sigterm_to_the_wrapper_stops_the_child_and_returns_the_vm(lab: Lab, tmp_path: Path) -> None:
    host = lab.add_host("hv1", ["acad-01"])
    spec = lab.spec(subprocess=True)
    started = tmp_path / "started"
    child = (sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(60)", str(started))
    request = launch_request(tmp_path, spec, child=child)
    command = lab.plugin().build_rollout_command(request)
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ} | SECRETS_ENV | {
        "AUTOCAD_BENCH_HYPERV_TIME_SCALE": os.environ["AUTOCAD_BENCH_HYPERV_TIME_SCALE"]}
    process = subprocess.Popen(list(command.argv), env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), log_text(request)
    assert host.mark("acad-01")["state"] == "leased"  # type: ignore[index]
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    lab.assert_pool_clean()

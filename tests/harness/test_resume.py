"""Exact resume: a controller killed mid-turn continues without repeating a desktop action."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from autocad_bench.broker.protocol import Route
from autocad_bench.harness.checkpoints import load_checkpoint
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.testing.fake_broker import Fault, FaultKind
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, batch_config


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_sigkill_mid_turn_then_resume_has_no_duplicate_action(tmp_path: Path) -> None:
    with fake_brokers(1, token="resume-broker-token-77") as (broker,):
        config = batch_config([broker], tmp_path / "leases", "subprocess", rollouts=1)
        config_path = tmp_path / "batch.json"
        config_path.write_text(json.dumps(config))
        out = tmp_path / "out"
        env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": broker.token}
        # The second batch is held on the wire for a while, so the kill lands mid-turn:
        # the request has reached the broker, its response has not reached the pilot.
        broker.add_faults(Fault(FaultKind.PASS, Route.ACTIONS), Fault(FaultKind.DELAY, Route.ACTIONS, delay_s=1.5))
        controller = subprocess.Popen(
            ["autocad-bench-batch", "--config", str(config_path), "--execute", "--output-dir", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        lease_file = tmp_path / "leases" / "0.lease"
        _wait_for(lambda: len([r for r in broker.requests if r.route == Route.ACTIONS.value]) >= 2)
        wrapper_pid = json.loads(lease_file.read_text())["pid"]
        # Everything on the controller host dies at once: controller, wrapper, pilot.
        os.killpg(controller.pid, signal.SIGKILL)
        os.killpg(wrapper_pid, signal.SIGKILL)
        controller.wait(timeout=10)
        checkpoint = load_checkpoint(RolloutPaths(out / "rollouts" / "scripted-0"))
        assert checkpoint is not None and checkpoint.pending is not None, "the kill should land mid-batch"
        assert not (out / "rollouts" / "scripted-0" / "result.json").exists()

        plan = subprocess.run(["autocad-bench-resume", str(out)], env=env, capture_output=True, text=True,
                              timeout=120)
        assert plan.returncode == 0, plan.stderr
        entries = json.loads(plan.stdout)["entries"]
        assert [(e["rollout_id"], e["action"], e["worker_id"]) for e in entries] == [("scripted-0", "resume", "0")]

        resumed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], env=env, capture_output=True,
                                 text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        # The worker it reconnected to is the one it runs on: resume does not release it first.
        assert "released worker" not in (out / "logs" / "scripted-0.log").read_text()
        time.sleep(1.6)  # let the delayed original request land too: it must replay, not re-inject
        assert [i.index for i in broker.injected] == list(range(19))
    result = json.loads((out / "rollouts" / "scripted-0" / "result.json").read_text())
    assert result["status"] == "completed" and result["actions"] == 19 and result["attempts"] == 2
    receipts = [json.loads(line) for line in (out / "rollouts" / "scripted-0" / "input_receipts.jsonl").open()]
    assert [r["index"] for r in receipts] == list(range(19))
    state = json.loads((out / "batch-state.json").read_text())
    assert state["counts"]["done"] == 1


def test_backend_without_recovery_fails_resume_explicitly(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "rollouts" / "r1").mkdir(parents=True)
    (out / "rollouts" / "r1" / "resume-checkpoint.json").write_text("{}")
    state = {
        "batch_id": "b", "name": None, "config_path": "x.json", "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "execution_mode": "shared", "max_concurrency": 1,
        "admitted_wave": 1, "infrastructure_backend": "local-xvfb",
        "infrastructure": {"backend": "example-pool-norecovery", "broker_version": "windows-autocad-2019-v11"},
        "evaluation": {}, "budgets": {},
        "rollouts": [{"rollout_id": "r1", "task_id": "t", "provider": "scripted", "model": "m",
                      "attempt_id": "a", "infrastructure_backend": "local-xvfb"}],
    }
    (out / "batch-state.json").write_text(json.dumps(state))
    from click.testing import CliRunner

    from autocad_bench import InfrastructurePlugin, register_infrastructure_plugin
    from autocad_bench.cli.resume import resume_command
    from autocad_bench.plugins import default_registry

    class NoRecovery(InfrastructurePlugin):
        name = "no-recovery-test"

        def preflight(self, request):  # type: ignore[no-untyped-def]
            raise AssertionError

        def build_rollout_command(self, request):  # type: ignore[no-untyped-def]
            raise AssertionError

        def run_shared(self, request, child):  # type: ignore[no-untyped-def]
            raise AssertionError

        def reap_batch(self, request):  # type: ignore[no-untyped-def]
            raise AssertionError

    state["infrastructure_backend"] = "no-recovery-test"
    (out / "batch-state.json").write_text(json.dumps(state))
    register_infrastructure_plugin(NoRecovery())
    try:
        result = CliRunner().invoke(resume_command, [str(out)])
    finally:
        default_registry().unregister("infrastructure", "no-recovery-test")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: backend 'no-recovery-test' does not implement the recovery protocol "
                                     "(missing: validate_recovery_spec, create_recovery_session, list_active_workers, "
                                     "worker_id_from_log, worker_status, build_recovery_command, terminate_worker); "
                                     "its interrupted rollouts cannot be resumed")

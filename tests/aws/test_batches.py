"""Whole batches on the AWS backend: the happy path in both modes and the fault scenarios.

Invariant checked in every scenario: zero non-terminated instances tagged with the batch at
the end, no rollout replaced after its model started, every failure classified.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autocad_bench.testing.layout import check_batch_layout
from tests.aws.batches import aws_config, log, result, run_batch, state
from tests.aws.conftest import REPO, AwsEnv
from tests.aws.fakeaws import HostBehaviour

CHECK_LAYOUT = REPO.parent / "shared" / "tools" / "check-batch-layout"
CLASSES = {"admission_failed", "transport_exhausted", "model_contract_error", "action_rejected",
           "artifact_unavailable", "cleanup_error"}


def invariants(aws: AwsEnv, out: Path) -> dict[str, object]:
    batch = state(out)
    assert aws.live(batch["batch_id"]) == [], "tagged instances were left running"
    for rollout in batch["rollouts"]:
        assert rollout["state"] in ("done", "failed"), rollout
        if rollout["state"] == "failed":
            assert rollout["failure_class"] in CLASSES, rollout
            assert result(out, rollout["rollout_id"])["failure_class"] in CLASSES
    for host in aws.fake.hosts.values():
        if host.config.batch_id == batch["batch_id"] and not host.alive:
            continue
    return batch


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_a_batch_runs_end_to_end_and_leaves_nothing(aws: AwsEnv, mode: str) -> None:
    proc, out = run_batch(aws, aws_config(aws, mode=mode), name=mode)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    batch = invariants(aws, out)
    assert batch["counts"]["done"] == 2
    hosts = [h for h in aws.fake.hosts.values() if h.config.batch_id == batch["batch_id"]]
    # A third host means a clone was replaced: the rollout logs say which check it failed.
    assert len(hosts) == 2 and not any(h.alive for h in hosts), log(out, "r0") + log(out, "r1")
    for host in hosts:
        # 9 + 9 inputs, then done: every action injected exactly once, in order.
        assert [i.index for i in host.broker.injected] == list(range(19))
    for rollout in ("r0", "r1"):
        assert result(out, rollout)["status"] == "completed"
        assert "launched instance i-" in log(out, rollout)
    reconcile = json.loads((out / "reconcile.json").read_text())
    assert reconcile == {"cleaned": [], "errors": []}
    assert check_batch_layout(out, secrets=["testing"], evaluation=False) == []
    if CHECK_LAYOUT.exists():  # the shared checker, where this checkout sits next to it
        check = subprocess.run([sys.executable, str(CHECK_LAYOUT), str(out), "--no-evaluation",
                                "--secret", "testing"], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    # A broker token never reaches the controller's files.
    tokens = [h.config.broker_token for h in hosts]
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(token.encode() in data for token in tokens), path


def test_vcpu_limit_then_success(aws: AwsEnv) -> None:
    aws.fake.fail("RunInstances", "VcpuLimitExceeded", times=2)
    proc, out = run_batch(aws, aws_config(aws, rollouts=1))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    invariants(aws, out)
    assert aws.fake.count("RunInstances") == 3
    assert "VcpuLimitExceeded" in log(out, "r0")


def test_capacity_exhaustion_fails_admission_with_no_instance_left(aws: AwsEnv) -> None:
    aws.fake.fail("RunInstances", "InsufficientInstanceCapacity", times=100)
    proc, out = run_batch(aws, aws_config(aws, rollouts=1))
    assert proc.returncode == 1
    batch = invariants(aws, out)
    assert batch["rollouts"][0]["failure_class"] == "admission_failed"
    # 6 requests per clone, 2 clones; capacity errors walk through the subnets.
    assert aws.fake.count("RunInstances") == 12
    assert "next subnet" in log(out, "r0")


def test_a_throttling_storm_is_absorbed(aws: AwsEnv) -> None:
    for action in ("DescribeInstanceStatus", "DescribeInstanceInformation", "SendCommand", "GetCommandInvocation",
                   "StartSession"):
        aws.fake.fail(action, "ThrottlingException" if action != "DescribeInstanceStatus" else "RequestLimitExceeded",
                      times=4, status=400 if action != "DescribeInstanceStatus" else 503)
    aws.fake.fail("RunInstances", "RequestLimitExceeded", times=2, status=503)
    proc, out = run_batch(aws, aws_config(aws, rollouts=2))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    invariants(aws, out)


def test_a_clone_failing_the_handoff_is_replaced_once_before_any_model_call(aws: AwsEnv) -> None:
    aws.fake.behaviour = lambda n: HostBehaviour(reset_failures=2 if n == 1 else 0)
    proc, out = run_batch(aws, aws_config(aws, rollouts=1))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    batch = invariants(aws, out)
    hosts = sorted((h for h in aws.fake.hosts.values() if h.config.batch_id == batch["batch_id"]),
                   key=lambda h: h.config.clone)
    assert [h.config.clone for h in hosts] == [1, 2]
    assert hosts[0].broker.injected == [], "the replaced clone received model actions"
    assert len(hosts[1].broker.injected) == 19
    archived = sorted(p.name for p in (out / "rollouts" / "r0" / "admission-attempts").iterdir())
    assert archived == ["clone1-attempt1", "clone1-attempt2"]
    assert result(out, "r0")["status"] == "completed"
    assert "terminating it and replacing it" in log(out, "r0")


def test_a_clone_with_stale_readiness_is_replaced(aws: AwsEnv) -> None:
    aws.fake.behaviour = lambda n: HostBehaviour(stale_readiness=n == 1)
    proc, out = run_batch(aws, aws_config(aws, rollouts=1))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    invariants(aws, out)
    text = log(out, "r0")
    assert "readiness check 2 of 2 failed" in text and "clone 2" in text


def test_every_clone_failing_is_one_classified_admission_failure(aws: AwsEnv) -> None:
    aws.fake.behaviour = lambda n: HostBehaviour(reset_failures=2)
    proc, out = run_batch(aws, aws_config(aws, rollouts=1))
    assert proc.returncode == 1
    batch = invariants(aws, out)
    assert batch["rollouts"][0]["failure_class"] == "admission_failed"
    assert result(out, "r0")["model_responses"] == 0


def test_failing_terminate_is_a_cleanup_error_and_the_reconciler_cleans_up(aws: AwsEnv) -> None:
    aws.fake.fail("TerminateInstances", "InternalError", times=3, status=500)
    proc, out = run_batch(aws, aws_config(aws, rollouts=1))
    assert proc.returncode == 1
    batch = invariants(aws, out)
    assert batch["rollouts"][0]["failure_class"] == "cleanup_error"
    assert result(out, "r0")["failure_class"] == "cleanup_error"
    reconcile = json.loads((out / "reconcile.json").read_text())
    assert len(reconcile["cleaned"]) == 1 and reconcile["errors"] == []

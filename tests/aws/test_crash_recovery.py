"""The controller SIGKILLed mid-batch: its instances outlive it; reap or resume cleans up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.aws.batches import aws_config, batch_command, result, write_config
from tests.aws.conftest import AwsEnv


def start_and_kill(aws: AwsEnv, name: str) -> tuple[Path, str]:
    """Start a slow two-rollout batch, SIGKILL the controller once both models are running."""
    # A long model latency keeps both rollouts mid-flight well past the kill, even on a loaded machine.
    config = write_config(aws, aws_config(aws, rollouts=2, latency_s=4.0), name)
    out = aws.tmp / f"{name}-out"
    process = subprocess.Popen(batch_command(config, out), env=dict(os.environ), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            checkpoints = [out / "rollouts" / r / "resume-checkpoint.json" for r in ("r0", "r1")]
            if all(p.exists() and json.loads(p.read_text()).get("frame") for p in checkpoints):
                break
            assert process.poll() is None, "the batch ended before it could be killed"
            time.sleep(0.05)
        else:
            raise AssertionError("the rollouts never reached the model")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    batch_id = json.loads((out / "batch-state.json").read_text())["batch_id"]
    return out, batch_id


def test_sigkill_then_reap_leaves_nothing(aws: AwsEnv) -> None:
    out, batch_id = start_and_kill(aws, "killed")
    assert len(aws.live(batch_id)) == 2, "the killed controller's instances should still run"
    reap = subprocess.run(["autocad-bench", "reap", "--output-dir", str(out)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)
    assert reap.returncode == 0, reap.stdout + reap.stderr
    report = json.loads(reap.stdout)
    assert report["batch_id"] == batch_id and len(report["cleaned"]) == 2 and report["errors"] == []
    assert aws.live(batch_id) == []
    again = subprocess.run(["autocad-bench", "reap", "--output-dir", str(out)], capture_output=True, text=True,
                           env=dict(os.environ), timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["cleaned"] == []


def test_sigkill_then_resume_reconnects_to_the_same_workers(aws: AwsEnv) -> None:
    out, batch_id = start_and_kill(aws, "resumed")
    before = sorted(aws.live(batch_id))
    plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, env=dict(os.environ),
                          timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    entries = json.loads(plan.stdout)["entries"]
    assert {e["action"] for e in entries} == {"resume"}
    assert sorted(e["instance_id"] for e in entries) == before
    assert all(e["worker_id"] == e["instance_id"] and e["instance_state"] == "running"
               and e["instance_termination_requested"] is False for e in entries)
    done = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                          env=dict(os.environ), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + "".join(
        (out / "logs" / f"{r}.log").read_text() for r in ("r0", "r1"))
    for rollout in ("r0", "r1"):
        assert result(out, rollout)["status"] == "completed"
        assert "reconnected to i-" in (out / "logs" / f"{rollout}.log").read_text()
    hosts = [h for h in aws.fake.hosts.values() if h.config.batch_id == batch_id]
    assert len(hosts) == 2, "resume must reconnect, not launch"
    for host in hosts:
        assert [i.index for i in host.broker.injected] == list(range(19))
    assert aws.live(batch_id) == []


@pytest.mark.parametrize(("mode", "signum"), [
    ("shared", signal.SIGINT), pytest.param("subprocess", signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_signal_hands_every_instance_back_and_resume_completes(aws: AwsEnv, mode: str, signum: int) -> None:
    """First signal on AWS: rollouts stop as interrupted, every instance is terminated, the
    process exits 128 + signal in time; resume runs the interrupted rollouts again to the end."""
    config = write_config(aws, aws_config(aws, rollouts=2, mode=mode, latency_s=3.0), f"stop-{mode}")
    out = aws.tmp / f"stop-{mode}-out"
    process = subprocess.Popen(batch_command(config, out), env=dict(os.environ), start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        checkpoints = [out / "rollouts" / r / "resume-checkpoint.json" for r in ("r0", "r1")]
        while not all(p.exists() and json.loads(p.read_text()).get("frame") for p in checkpoints):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the rollouts never reached the model"
            time.sleep(0.05)
        sent = time.monotonic()
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 128 + signum, stdout + stderr
    assert took < 30, f"the stop took {took:.1f} s"
    batch = json.loads((out / "batch-state.json").read_text())
    assert aws.live(batch["batch_id"]) == [], "an instance outlived the graceful stop"
    assert batch["status"] == "interrupted"
    assert {(r["state"], r["failure_class"]) for r in batch["rollouts"]} == {("failed", "interrupted")}

    done = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                          env=dict(os.environ), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    batch = json.loads((out / "batch-state.json").read_text())
    assert {r["state"] for r in batch["rollouts"]} == {"done"}
    assert all(len(r["earlier_attempts"]) == 1 for r in batch["rollouts"])
    assert aws.live(batch["batch_id"]) == []

"""One live controller per batch: resume and reap refuse a batch whose controller is still
running (they would close its live rollouts as lost, release desktops in use and run queued
rollouts twice), and the hold ends with the controller however it ends, ``kill -9`` included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from autocad_bench.broker.protocol import Route
from autocad_bench.controller.ownership import HELD_HINT, hold_batch
from autocad_bench.errors import UserError
from autocad_bench.testing.fake_broker import Fault, FaultKind
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, batch_config


def test_a_held_batch_cannot_be_held_twice_and_is_free_again_after(tmp_path: Path) -> None:
    with hold_batch(tmp_path):
        with pytest.raises(UserError) as refused, hold_batch(tmp_path):
            pass
        assert [(p.location, p.message) for p in refused.value.problems] == [(str(tmp_path), HELD_HINT)]
    with hold_batch(tmp_path):  # released when the block ended
        pass


HOLD_S = 60.0
"""How long the live controller's first batch of actions is held at the broker."""


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _running(out: Path) -> bool:
    try:
        state = json.loads((out / "batch-state.json").read_text())
    except (FileNotFoundError, ValueError):
        return False
    return any(r["state"] == "running" for r in state["rollouts"])


def test_resume_and_reap_refuse_a_batch_whose_controller_runs_and_accept_it_once_it_is_killed(
        tmp_path: Path) -> None:
    # Two desktops, one free: only the hold stops a resume (admission would find room).
    with fake_brokers(2, token="ownership-broker-token") as brokers:
        config = batch_config(brokers, tmp_path / "leases", "shared", rollouts=1)
        # The rollout's first batch of actions waits HOLD_S at whichever broker it leased, so
        # the controller is certainly still running while resume and reap are tried, however
        # slowly they start on a loaded machine (turns that merely took long could all end first).
        for broker in brokers:
            broker.add_faults(Fault(FaultKind.DELAY, Route.ACTIONS, delay_s=HOLD_S))
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config))
        out = tmp_path / "out"
        env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token}
        controller = subprocess.Popen(
            ["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(out)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            _wait_for(lambda: _running(out))
            resumed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], env=env,
                                     capture_output=True, text=True, timeout=120)
            reaped = subprocess.run(["autocad-bench", "reap", "--output-dir", str(out)], env=env,
                                    capture_output=True, text=True, timeout=120)
            assert controller.poll() is None, "the controller should still be running"
            for refused in (resumed, reaped):
                assert refused.returncode == 2, refused.stdout + refused.stderr
                assert refused.stderr.strip() == f"error: {out}: {HELD_HINT}"
            # Nothing was closed, released or moved under the live controller.
            assert json.loads((out / "batch-state.json").read_text())["rollouts"][0]["state"] == "running"
            assert len(list((tmp_path / "leases").glob("*.lease"))) == 1
            assert not (out / "interrupted").exists()
            assert all(Route.RELEASE.value not in [r.route for r in b.requests] for b in brokers)
        finally:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait(timeout=30)
            for broker in brokers:  # the other broker's hold was never used: the resumed run must not meet it
                broker.clear_faults()
        # kill -9 ended the hold with the process: the batch can be continued now.
        resumed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], env=env,
                                 capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state = json.loads((out / "batch-state.json").read_text())
    assert [r["state"] for r in state["rollouts"]] == ["done"]

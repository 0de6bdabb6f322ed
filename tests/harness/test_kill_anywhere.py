"""Property: however a batch is stopped, resume finishes it with every action executed once.

Hypothesis picks the execution mode, how the controller is stopped (SIGKILL, one SIGINT, or
two SIGINTs) and after how many executed action batches; the brokers are in-process fakes
that record every injected action, so the property is checked on the broker's own log:
no (request id, action index) is injected twice, every rollout ends done, and the
summary's spend is the sum of every attempt's. The real-desktop versions of the same
promises are tests/xvfb/test_kill_points.py and tests/xvfb/test_stop_signals.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocad_bench.broker.protocol import Route
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, batch_config

pytestmark = pytest.mark.integration

STOPS = ("SIGKILL", "SIGINT", "SIGINT twice")


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _failures(out) -> str:  # type: ignore[no-untyped-def]
    """Why rollouts failed, from their results: the message a failing example needs."""
    lines = []
    for result in sorted((out / "rollouts").glob("*/result.json")):
        data = json.loads(result.read_text())
        if data.get("failure_class"):
            lines.append(f"{data['rollout_id']} ({data['attempt_id']}): {data.get('failure_class')}: "
                         f"{data.get('failure_detail')}")
            log = out / "logs" / f"{data['rollout_id']}.log"
            if log.is_file():
                lines += ["    " + line for line in log.read_text(errors="replace").splitlines()[-15:]]
    return "\n".join(lines) + "\n"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["shared", "subprocess"]), stop=st.sampled_from(STOPS),
       after=st.integers(min_value=1, max_value=4))
def test_any_stop_then_resume_injects_every_action_once(
        tmp_path_factory: pytest.TempPathFactory, mode: str, stop: str, after: int) -> None:
    tmp_path = tmp_path_factory.mktemp("kill")
    with fake_brokers(2, token="kill-anywhere-broker-token-5") as brokers:
        config = batch_config(brokers, tmp_path / "leases", mode, rollouts=3)
        config_path = tmp_path / "batch.json"
        config_path.write_text(json.dumps(config))
        out = tmp_path / "out"
        env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token, "CI": "1"}
        controller = subprocess.Popen(
            ["autocad-bench-batch", "--config", str(config_path), "--execute", "--output-dir", str(out)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            def batches() -> int:
                return sum(1 for b in brokers for r in b.requests if r.route == Route.ACTIONS.value)

            _wait_for(lambda: batches() >= after or controller.poll() is not None)
            if stop == "SIGKILL":
                # Everything on the controller host dies at once (subprocess children too).
                os.killpg(controller.pid, signal.SIGKILL)
                for lease in (tmp_path / "leases").glob("*.lease"):
                    with contextlib.suppress(ProcessLookupError, ValueError, KeyError, PermissionError):
                        os.killpg(json.loads(lease.read_text())["pid"], signal.SIGKILL)
            else:
                os.kill(controller.pid, signal.SIGINT)
                if stop == "SIGINT twice":
                    time.sleep(0.05)
                    os.kill(controller.pid, signal.SIGINT)
            controller.wait(timeout=60)
        finally:
            if controller.poll() is None:
                os.killpg(controller.pid, signal.SIGKILL)
        if stop != "SIGKILL" and controller.returncode not in (0, 1):
            assert controller.returncode == 130

        plan = subprocess.run(["autocad-bench-resume", str(out)], env=env, capture_output=True, text=True,
                              timeout=120)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        resumed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], env=env, capture_output=True,
                                 text=True, timeout=300)
        assert resumed.returncode == 0, _failures(out) + resumed.stderr
        injected = Counter((item.request_id, item.index) for b in brokers for item in b.injected)
    twice = [key for key, count in injected.items() if count > 1]
    assert not twice, f"injected more than once: {twice}"
    state = json.loads((out / "batch-state.json").read_text())
    assert {r["state"] for r in state["rollouts"]} == {"done"}
    for row in state["rollouts"]:
        result = json.loads((out / "rollouts" / row["rollout_id"] / "result.json").read_text())
        receipts = [json.loads(line)["index"]
                    for line in (out / "rollouts" / row["rollout_id"] / "input_receipts.jsonl").open()]
        assert receipts == list(range(result["actions"]))
    summary = json.loads((out / "summary.json").read_text())
    expected = sum((r["token_cost_usd"] or 0.0) + sum(a["token_cost_usd"] for a in r["earlier_attempts"])
                   for r in state["rollouts"])
    assert sum(r["token_cost_usd"] for r in summary["rollouts"]) == pytest.approx(expected)

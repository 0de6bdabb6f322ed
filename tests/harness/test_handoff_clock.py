"""The wall-clock budget is the model's time: it starts once the desktop is handed over.

A slow handoff (lease, reset, frame 0: the infrastructure's warm-up) must neither eat the
rollout's ``max_duration_s`` nor be hidden: it is reported as ``handoff_seconds``.
"""

from __future__ import annotations

from pathlib import Path

from autocad_bench.broker.protocol import Route
from autocad_bench.config.models import BudgetConfig
from autocad_bench.testing.fake_broker import Fault, FaultKind
from tests.harness.test_pilot_outcomes import MOVE, run


def test_a_slow_handoff_does_not_count_against_the_wall_clock_budget(tmp_path: Path) -> None:
    # The reset takes 1.5 s; the rollout may use 1 s of wall clock after the handoff.
    result, broker, _ = run(tmp_path, [{"actions": [MOVE]}, {"actions": [MOVE, {"type": "done"}]}],
                            budgets=BudgetConfig(max_duration_s=1.0),
                            faults=[Fault(FaultKind.DELAY, Route.RESET, delay_s=1.5)])
    assert (result["status"], result["stop_reason"]) == ("completed", "done")
    assert [i.index for i in broker.injected] == [0, 1, 2]
    assert result["handoff_seconds"] >= 1.5
    assert result["wall_seconds"] < 1.0 < result["handoff_seconds"]

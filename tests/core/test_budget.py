"""Rollout budget: each limit trips, trips are final, and state survives a resume."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocad_bench.costs import (
    BudgetExceeded,
    BudgetState,
    BudgetTracker,
    InvalidTurnLimitExceeded,
    ResponseCost,
    RolloutBudget,
    StopReason,
    cost_of,
    default_pricing,
)
from autocad_bench.providers.models import TokenUsage

D = Decimal


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def gpt5(input_tokens: int = 0, output_tokens: int = 0) -> ResponseCost:
    return cost_of("gpt-5", TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens), default_pricing())


def test_defaults_are_the_benchmark_contract() -> None:
    budget = RolloutBudget()
    assert budget.max_actions == 5000
    assert budget.max_consecutive_invalid_turns == 10
    assert (budget.max_cost_usd, budget.max_duration_s, budget.max_turns) == (None, None, None)
    with pytest.raises(ValueError, match="extra"):
        RolloutBudget.model_validate({"max_cost": 3})
    assert RolloutBudget.model_validate({"max_cost_usd": 0.1}).max_cost_usd == D("0.1")


def test_cost_cap_trips_after_the_response_that_reaches_it() -> None:
    tracker = BudgetTracker(RolloutBudget(max_cost_usd=D("0.02")), clock=FakeClock())
    tracker.check_before_call()
    assert tracker.record(gpt5(output_tokens=1_000)) is None  # $0.01
    tracker.check_before_call()
    assert tracker.record(gpt5(output_tokens=1_000)) is StopReason.COST  # $0.02 reaches the cap
    with pytest.raises(BudgetExceeded) as caught:
        tracker.check_before_call()
    assert caught.value.reason is StopReason.COST
    assert "$0.02" in str(caught.value)
    assert tracker.turns == 2  # the refused call was not counted


def test_duration_cap_uses_the_injected_clock() -> None:
    clock = FakeClock()
    tracker = BudgetTracker(RolloutBudget(max_duration_s=60), clock=clock)
    tracker.check_before_call()
    clock.advance(59.9)
    tracker.check_before_call()
    assert tracker.remaining_duration_s == pytest.approx(0.1)
    clock.advance(0.1)
    with pytest.raises(BudgetExceeded) as caught:
        tracker.check_before_call()
    assert caught.value.reason is StopReason.DURATION


def test_turn_cap_allows_exactly_max_turns_calls() -> None:
    tracker = BudgetTracker(RolloutBudget(max_turns=3), clock=FakeClock())
    for _ in range(3):
        tracker.check_before_call()
    with pytest.raises(BudgetExceeded) as caught:
        tracker.check_before_call()
    assert caught.value.reason is StopReason.TURNS
    assert tracker.turns == 3


def test_action_budget_counts_down_and_stops_calls_at_zero() -> None:
    tracker = BudgetTracker(RolloutBudget(max_actions=10), clock=FakeClock())
    assert tracker.remaining_actions == 10
    assert tracker.record_actions(7) is None
    assert tracker.remaining_actions == 3
    tracker.check_before_call()
    assert tracker.record_actions(3) is StopReason.ACTIONS
    assert tracker.remaining_actions == 0
    with pytest.raises(BudgetExceeded) as caught:
        tracker.check_before_call()
    assert caught.value.reason is StopReason.ACTIONS
    with pytest.raises(ValueError):
        tracker.record_actions(-1)


def test_a_trip_is_final_and_keeps_its_first_reason() -> None:
    clock = FakeClock()
    tracker = BudgetTracker(RolloutBudget(max_turns=1, max_duration_s=10), clock=clock)
    tracker.check_before_call()
    with pytest.raises(BudgetExceeded):
        tracker.check_before_call()
    clock.advance(100)  # the duration cap is now also exceeded
    for _ in range(3):
        with pytest.raises(BudgetExceeded) as caught:
            tracker.ensure_within_limits()
        assert caught.value.reason is StopReason.TURNS
    assert tracker.stop_reason is StopReason.TURNS
    # Billing still works after a trip: usage that was paid for is never dropped.
    tracker.record(gpt5(output_tokens=100))
    assert tracker.ledger.responses == 1


def test_ensure_within_limits_does_not_count_turns() -> None:
    tracker = BudgetTracker(RolloutBudget(max_turns=1), clock=FakeClock())
    for _ in range(5):
        tracker.ensure_within_limits()
    tracker.check_before_call()
    assert tracker.turns == 1


def test_status_reports_without_raising() -> None:
    tracker = BudgetTracker(RolloutBudget(max_cost_usd=D("0.001")), clock=FakeClock())
    assert tracker.status().ok
    tracker.record(gpt5(output_tokens=1_000))
    status = tracker.status()
    assert not status.ok and status.reason is StopReason.COST and status.cost_usd == D("0.01")


def test_invalid_turn_streak_resets_on_a_valid_batch() -> None:
    tracker = BudgetTracker(RolloutBudget(max_consecutive_invalid_turns=10), clock=FakeClock())
    for _ in range(9):
        tracker.record_invalid_turn()
    tracker.record_valid_turn()
    for _ in range(9):
        tracker.record_invalid_turn()
    with pytest.raises(InvalidTurnLimitExceeded) as caught:
        tracker.record_invalid_turn()
    assert caught.value.consecutive == 10
    assert tracker.snapshot().lifetime_invalid_turns == 19


def test_resume_continues_usage_cost_time_and_counts() -> None:
    clock = FakeClock()
    budget = RolloutBudget(max_cost_usd=D("1"), max_duration_s=100, max_actions=50)
    first = BudgetTracker(budget, clock=clock)
    first.check_before_call()
    first.record(gpt5(input_tokens=100_000, output_tokens=10_000))  # $0.225
    first.record_actions(20)
    first.record_invalid_turn()
    clock.advance(40)
    saved = json.loads(first.snapshot().model_dump_json())  # as persisted in run-state.json

    clock.advance(1_000)  # controller downtime is not rollout time
    second = BudgetTracker(budget, clock=clock, state=BudgetState.model_validate(saved))
    assert second.cost_usd == D("0.225")
    assert second.ledger.usage == TokenUsage(input_tokens=100_000, output_tokens=10_000)
    assert second.turns == 1 and second.actions == 20 and second.remaining_actions == 30
    assert second.elapsed_s == pytest.approx(40)
    assert second.snapshot().attempts == 2
    assert second.snapshot().consecutive_invalid_turns == 1
    clock.advance(60)
    with pytest.raises(BudgetExceeded) as caught:
        second.check_before_call()
    assert caught.value.reason is StopReason.DURATION


def test_a_tripped_rollout_stays_stopped_after_resume() -> None:
    tracker = BudgetTracker(RolloutBudget(max_turns=1), clock=FakeClock())
    tracker.check_before_call()
    with pytest.raises(BudgetExceeded):
        tracker.check_before_call()
    resumed = BudgetTracker(RolloutBudget(max_turns=100), clock=FakeClock(), state=tracker.snapshot())
    with pytest.raises(BudgetExceeded) as caught:
        resumed.check_before_call()
    assert caught.value.reason is StopReason.TURNS


# -- property: spend never runs past the cap by more than one response -----------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.integers(min_value=0, max_value=400_000), st.integers(0, 40_000)),
        st.tuples(st.just("wait"), st.floats(min_value=0, max_value=30), st.just(0)),
        st.tuples(st.just("act"), st.integers(min_value=0, max_value=400), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    ops=operations,
    cap=st.decimals(min_value=D("0.001"), max_value=D("5"), places=3),
    max_turns=st.one_of(st.none(), st.integers(1, 20)),
    max_duration=st.one_of(st.none(), st.floats(min_value=1, max_value=200)),
    model=st.sampled_from(["gpt-5", "claude-sonnet-4-5", "unlisted-model"]),
)
def test_no_call_after_a_trip_and_spend_bounded_by_one_response(
    ops: list[tuple[str, float, int]],
    cap: Decimal,
    max_turns: int | None,
    max_duration: float | None,
    model: str,
) -> None:
    clock = FakeClock()
    budget = RolloutBudget(max_cost_usd=cap, max_turns=max_turns, max_duration_s=max_duration, max_actions=2_000)
    tracker = BudgetTracker(budget, clock=clock)
    tripped = False
    largest = D(0)
    calls = 0
    for op, a, b in ops:
        if op == "wait":
            clock.advance(a)
        elif op == "act":
            tracker.record_actions(int(a))
        else:
            try:
                tracker.check_before_call()
            except BudgetExceeded:
                tripped = True
                continue
            assert not tripped, "a call was allowed after a limit tripped"
            calls += 1
            cost = cost_of(model, TokenUsage(input_tokens=int(a), output_tokens=b), default_pricing())
            largest = max(largest, cost.total_usd)
            tracker.record(cost)
        if tracker.stop_reason is not None:
            tripped = True
        assert tracker.cost_usd <= cap + largest
    assert max_turns is None or calls <= max_turns
    if tracker.cost_usd >= cap:
        assert tracker.stop_reason is not None

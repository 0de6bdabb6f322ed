"""Rollout budget: each limit trips, trips are final, and state survives a resume."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from autocad_bench.costs import (
    BudgetExceeded,
    BudgetState,
    BudgetStatus,
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


# -- exact limits of the configuration --------------------------------------------------------


def _error_type(**fields: object) -> str:
    with pytest.raises(ValidationError) as caught:
        RolloutBudget.model_validate(fields)
    return str(caught.value.errors()[0]["type"])


@pytest.mark.parametrize(
    ("field", "lowest", "highest"),
    [
        ("max_actions", 1, 10_000_000),
        ("max_consecutive_invalid_turns", 1, 10_000),
        ("max_turns", 1, 100_000),
    ],
)
def test_integer_limits_accept_exactly_their_range(field: str, lowest: int, highest: int) -> None:
    assert getattr(RolloutBudget.model_validate({field: lowest}), field) == lowest
    assert getattr(RolloutBudget.model_validate({field: highest}), field) == highest
    assert _error_type(**{field: lowest - 1}) == "greater_than_equal"
    assert _error_type(**{field: highest + 1}) == "less_than_equal"
    # Strict: a configuration count is a JSON integer, never text or a float.
    assert _error_type(**{field: str(lowest)}) == "int_type"
    assert _error_type(**{field: float(lowest)}) == "int_type"


def test_duration_limit_accepts_exactly_up_to_thirty_days() -> None:
    thirty_days = 30 * 24 * 3600
    assert thirty_days == 2_592_000
    assert RolloutBudget(max_duration_s=thirty_days).max_duration_s == thirty_days
    assert RolloutBudget(max_duration_s=0.5).max_duration_s == 0.5
    assert RolloutBudget(max_duration_s=1e-9).max_duration_s == 1e-9
    assert _error_type(max_duration_s=thirty_days + 0.5) == "less_than_equal"
    assert _error_type(max_duration_s=0) == "greater_than"
    assert _error_type(max_duration_s=-1e-9) == "greater_than"
    assert _error_type(max_duration_s=float("nan")) == "finite_number"
    assert _error_type(max_duration_s=float("inf")) == "finite_number"
    assert _error_type(max_duration_s="60") == "float_type"


def test_cost_limit_accepts_exactly_positive_numbers_up_to_a_million() -> None:
    assert RolloutBudget(max_cost_usd=D("1000000")).max_cost_usd == D("1000000")
    assert RolloutBudget.model_validate({"max_cost_usd": 0.5}).max_cost_usd == D("0.5")
    assert RolloutBudget.model_validate({"max_cost_usd": 2}).max_cost_usd == D(2)
    assert RolloutBudget(max_cost_usd=D("1e-12")).max_cost_usd == D("1e-12")
    assert _error_type(max_cost_usd=D("1000000.000001")) == "less_than_equal"
    assert _error_type(max_cost_usd=0) == "greater_than"
    assert _error_type(max_cost_usd=D("-0.01")) == "greater_than"
    assert _error_type(max_cost_usd=D("NaN")) == "finite_number"
    assert _error_type(max_cost_usd=float("nan")) == "finite_number"
    assert _error_type(max_cost_usd=D("Infinity")) == "finite_number"
    # Text and booleans are not numbers, even though Decimal would parse them.
    assert _error_type(max_cost_usd="2") == "decimal_type"
    assert _error_type(max_cost_usd=True) == "decimal_type"
    assert _error_type(max_cost_usd=False) == "decimal_type"


@pytest.mark.parametrize("cap", ["2", "2.4", "2.6", "0.5", "1.5", "0.001", "999999.99"])
def test_cost_limit_is_a_json_number_that_round_trips(cap: str) -> None:
    budget = RolloutBudget(max_cost_usd=D(cap))
    dumped = budget.model_dump(mode="json")["max_cost_usd"]
    assert isinstance(dumped, (int, float)) and not isinstance(dumped, bool)
    assert D(str(dumped)) == D(cap)
    assert json.loads(budget.model_dump_json())["max_cost_usd"] == float(cap)
    assert RolloutBudget.model_validate_json(budget.model_dump_json()) == budget
    assert budget.model_dump()["max_cost_usd"] == D(cap)  # python mode keeps the Decimal


def test_state_fields_default_to_zero_and_reject_negatives() -> None:
    state = BudgetState()
    assert (state.turns, state.actions, state.elapsed_s) == (0, 0, 0.0)
    assert (state.consecutive_invalid_turns, state.lifetime_invalid_turns, state.attempts) == (0, 0, 0)
    assert (state.stop_reason, state.stop_detail) == (None, "")
    assert state.ledger.responses == 0 and state.ledger.total_usd == 0
    for field in ("turns", "actions", "consecutive_invalid_turns", "lifetime_invalid_turns", "attempts"):
        assert getattr(BudgetState.model_validate({field: 0}), field) == 0
        with pytest.raises(ValidationError):
            BudgetState.model_validate({field: -1})
    assert BudgetState(elapsed_s=0.0).elapsed_s == 0.0
    for bad in (-1e-9, float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            BudgetState(elapsed_s=bad)


# -- the tracker, at exact limits ---------------------------------------------------------------


def test_a_fresh_tracker_starts_from_zero_with_the_default_budget() -> None:
    clock = FakeClock()
    tracker = BudgetTracker(clock=clock)
    assert tracker.budget == RolloutBudget()
    assert tracker.elapsed_s == 0.0
    assert tracker.remaining_duration_s is None
    assert (tracker.turns, tracker.actions, tracker.cost_usd) == (0, 0, D(0))
    assert tracker.remaining_actions == 5000
    assert tracker.stop_reason is None
    snap = tracker.snapshot()
    assert snap == BudgetState(attempts=1)
    status = tracker.status()
    assert status == BudgetStatus(
        ok=True,
        reason=None,
        detail="",
        cost_usd=D(0),
        elapsed_s=0.0,
        turns=0,
        actions=0,
        remaining_actions=5000,
    )


def test_the_given_budget_is_the_one_enforced() -> None:
    budget = RolloutBudget(max_actions=3, max_turns=2)
    tracker = BudgetTracker(budget, clock=FakeClock())
    assert tracker.budget is budget
    assert tracker.remaining_actions == 3


def test_elapsed_time_counts_from_the_clock_and_never_runs_backwards() -> None:
    clock = FakeClock(500.0)
    tracker = BudgetTracker(RolloutBudget(max_duration_s=100), clock=clock, state=BudgetState(elapsed_s=30.0))
    assert tracker.elapsed_s == 30.0
    assert tracker.remaining_duration_s == 70.0
    clock.advance(25)
    assert tracker.elapsed_s == 55.0
    assert tracker.remaining_duration_s == 45.0
    clock.advance(-40)  # a clock that steps back counts as no time, never as negative time
    assert tracker.elapsed_s == 30.0
    assert tracker.remaining_duration_s == 70.0
    clock.advance(95)
    assert tracker.elapsed_s == 110.0
    assert tracker.remaining_duration_s == 0.0  # never negative


def test_start_clock_restarts_this_attempt_but_keeps_earlier_time() -> None:
    clock = FakeClock()
    tracker = BudgetTracker(RolloutBudget(max_duration_s=50), clock=clock, state=BudgetState(elapsed_s=10.0))
    clock.advance(300)  # warm-up before the model gets the desktop
    tracker.start_clock()
    assert tracker.elapsed_s == 10.0
    clock.advance(39)
    tracker.check_before_call()
    clock.advance(1)
    with pytest.raises(BudgetExceeded) as caught:
        tracker.check_before_call()
    assert caught.value.reason is StopReason.DURATION
    assert caught.value.detail == "50.0 s elapsed (limit 50 s)"
    assert str(caught.value) == "budget exhausted (duration): 50.0 s elapsed (limit 50 s)"


def test_duration_trips_exactly_at_the_cap_not_before() -> None:
    clock = FakeClock()
    tracker = BudgetTracker(RolloutBudget(max_duration_s=2.5), clock=clock)
    clock.advance(2)
    assert tracker.status().ok
    tracker.ensure_within_limits()
    clock.advance(0.5)
    status = tracker.status()
    assert not status.ok and status.reason is StopReason.DURATION
    assert status.detail == "2.5 s elapsed (limit 2.5 s)"
    assert status.elapsed_s == 2.5


def test_turn_limit_details_and_a_resumed_count_beyond_the_limit() -> None:
    tracker = BudgetTracker(RolloutBudget(max_turns=2), clock=FakeClock())
    tracker.check_before_call()
    assert tracker.turns == 1
    tracker.check_before_call()
    assert tracker.turns == 2
    with pytest.raises(BudgetExceeded) as caught:
        tracker.check_before_call()
    assert caught.value.detail == "2 model calls (limit 2)"
    assert str(caught.value) == "budget exhausted (turns): 2 model calls (limit 2)"
    assert tracker.stop_reason is StopReason.TURNS
    assert tracker.snapshot().stop_detail == "2 model calls (limit 2)"
    # A resumed rollout whose count is already past a (lowered) limit may not call again.
    resumed = BudgetTracker(RolloutBudget(max_turns=3), clock=FakeClock(), state=BudgetState(turns=5))
    with pytest.raises(BudgetExceeded) as caught:
        resumed.check_before_call()
    assert caught.value.reason is StopReason.TURNS
    assert caught.value.detail == "5 model calls (limit 3)"
    assert resumed.turns == 5
    # Without a turn limit, calls are only counted.
    free = BudgetTracker(RolloutBudget(), clock=FakeClock(), state=BudgetState(turns=100_000))
    free.check_before_call()
    assert free.turns == 100_001


def test_cost_trips_exactly_at_the_cap_and_one_cent_below_does_not() -> None:
    tracker = BudgetTracker(RolloutBudget(max_cost_usd=D("0.03")), clock=FakeClock())
    assert tracker.record(gpt5(output_tokens=1_000)) is None  # $0.01
    assert tracker.record(gpt5(output_tokens=1_000)) is None  # $0.02: one cent below
    assert tracker.status().ok
    assert tracker.record(gpt5(output_tokens=1_000)) is StopReason.COST  # $0.03: exactly used up
    status = tracker.status()
    assert status.reason is StopReason.COST and status.cost_usd == D("0.03")
    assert status.detail == "spent $0.03 (limit $0.03)"


def test_cost_trips_when_one_response_jumps_past_the_cap() -> None:
    tracker = BudgetTracker(RolloutBudget(max_cost_usd=D("0.015")), clock=FakeClock())
    assert tracker.record(gpt5(output_tokens=1_000)) is None  # $0.01
    assert tracker.record(gpt5(output_tokens=1_000)) is StopReason.COST  # $0.02 > $0.015
    with pytest.raises(BudgetExceeded) as caught:
        tracker.ensure_within_limits()
    assert caught.value.detail == "spent $0.02 (limit $0.015)"
    assert str(caught.value) == "budget exhausted (cost): spent $0.02 (limit $0.015)"


def test_cost_is_checked_first_then_duration_then_actions() -> None:
    clock = FakeClock()
    budget = RolloutBudget(max_cost_usd=D("0.01"), max_duration_s=10, max_actions=5)
    every = BudgetTracker(budget, clock=clock, state=BudgetState(actions=5, elapsed_s=10.0))
    assert every.record(gpt5(output_tokens=1_000)) is StopReason.COST
    clock2 = FakeClock()
    late = BudgetTracker(budget, clock=clock2, state=BudgetState(actions=7))
    clock2.advance(10)
    assert late.status().reason is StopReason.DURATION


def test_actions_trip_exactly_at_the_limit_and_when_a_batch_overshoots() -> None:
    tracker = BudgetTracker(RolloutBudget(max_actions=10), clock=FakeClock())
    assert tracker.record_actions(0) is None  # an empty batch is fine
    assert tracker.actions == 0
    assert tracker.record_actions(9) is None
    assert tracker.remaining_actions == 1
    assert tracker.status().ok
    assert tracker.record_actions(1) is StopReason.ACTIONS
    assert tracker.status().detail == "10 actions (limit 10)"

    over = BudgetTracker(RolloutBudget(max_actions=10), clock=FakeClock())
    assert over.record_actions(4) is None
    assert over.record_actions(15) is StopReason.ACTIONS  # happened, so counted beyond the limit
    assert over.actions == 19
    assert over.remaining_actions == 0
    status = over.status()
    assert status.remaining_actions == 0 and status.actions == 19
    assert status.detail == "19 actions (limit 10)"
    with pytest.raises(ValueError, match="action count must be >= 0, got -1"):
        over.record_actions(-1)
    assert over.actions == 19


def test_refused_calls_count_nothing_and_every_later_gate_refuses() -> None:
    tracker = BudgetTracker(RolloutBudget(max_actions=1), clock=FakeClock())
    tracker.check_before_call()
    tracker.record_actions(1)
    for _ in range(3):
        with pytest.raises(BudgetExceeded) as caught:
            tracker.check_before_call()
        assert caught.value.reason is StopReason.ACTIONS
    assert tracker.turns == 1
    assert tracker.stop_reason is StopReason.ACTIONS


def test_record_returns_the_stop_even_for_responses_after_the_trip() -> None:
    tracker = BudgetTracker(RolloutBudget(max_turns=1), clock=FakeClock())
    tracker.check_before_call()
    assert tracker.record(gpt5(output_tokens=1_000)) is None
    with pytest.raises(BudgetExceeded):
        tracker.check_before_call()
    assert tracker.record(gpt5(output_tokens=1_000)) is StopReason.TURNS
    assert tracker.record_actions(2) is StopReason.TURNS
    assert tracker.cost_usd == D("0.02") and tracker.actions == 2
    assert tracker.ledger.responses == 2


def test_invalid_turns_raise_at_the_limit_and_keep_raising_past_it() -> None:
    tracker = BudgetTracker(RolloutBudget(max_consecutive_invalid_turns=2), clock=FakeClock())
    tracker.record_invalid_turn()
    assert tracker.snapshot().consecutive_invalid_turns == 1
    with pytest.raises(InvalidTurnLimitExceeded) as caught:
        tracker.record_invalid_turn()
    assert (caught.value.consecutive, caught.value.limit) == (2, 2)
    assert str(caught.value) == "2 consecutive invalid action batches (limit 2)"
    with pytest.raises(InvalidTurnLimitExceeded) as caught:
        tracker.record_invalid_turn()
    assert (caught.value.consecutive, caught.value.limit) == (3, 2)
    snap = tracker.snapshot()
    assert (snap.consecutive_invalid_turns, snap.lifetime_invalid_turns) == (3, 3)
    tracker.record_valid_turn()
    snap = tracker.snapshot()
    assert (snap.consecutive_invalid_turns, snap.lifetime_invalid_turns) == (0, 3)
    tracker.record_invalid_turn()
    assert tracker.snapshot().consecutive_invalid_turns == 1


def test_a_resumed_invalid_streak_past_the_limit_raises_on_the_next_invalid_turn() -> None:
    state = BudgetState(consecutive_invalid_turns=5, lifetime_invalid_turns=7)
    tracker = BudgetTracker(RolloutBudget(max_consecutive_invalid_turns=3), clock=FakeClock(), state=state)
    with pytest.raises(InvalidTurnLimitExceeded) as caught:
        tracker.record_invalid_turn()
    assert caught.value.consecutive == 6
    assert tracker.snapshot().lifetime_invalid_turns == 8
    # With a limit of one, the first invalid batch already ends the rollout.
    strict = BudgetTracker(RolloutBudget(max_consecutive_invalid_turns=1), clock=FakeClock())
    with pytest.raises(InvalidTurnLimitExceeded):
        strict.record_invalid_turn()


def test_snapshot_and_resume_carry_every_field() -> None:
    clock = FakeClock()
    state = BudgetState(
        turns=4,
        actions=6,
        elapsed_s=12.5,
        consecutive_invalid_turns=2,
        lifetime_invalid_turns=5,
        attempts=3,
    )
    state = state.model_copy(update={"ledger": state.ledger.add(gpt5(output_tokens=2_000))})
    tracker = BudgetTracker(RolloutBudget(max_actions=10), clock=clock, state=state)
    assert (tracker.turns, tracker.actions, tracker.cost_usd) == (4, 6, D("0.02"))
    assert tracker.remaining_actions == 4
    clock.advance(7.5)
    snap = tracker.snapshot()
    assert snap == BudgetState(
        turns=4,
        actions=6,
        elapsed_s=20.0,
        ledger=state.ledger,
        consecutive_invalid_turns=2,
        lifetime_invalid_turns=5,
        attempts=4,
        stop_reason=None,
        stop_detail="",
    )
    tripped = BudgetState(stop_reason=StopReason.COST, stop_detail="spent $9 (limit $1)")
    again = BudgetTracker(RolloutBudget(), clock=clock, state=tripped)
    assert again.stop_reason is StopReason.COST
    status = again.status()
    assert (status.ok, status.reason, status.detail) == (False, StopReason.COST, "spent $9 (limit $1)")
    assert again.snapshot().stop_detail == "spent $9 (limit $1)"


def test_duration_trips_when_the_clock_jumps_past_the_cap() -> None:
    clock = FakeClock()
    tracker = BudgetTracker(RolloutBudget(max_duration_s=10), clock=clock)
    tracker.check_before_call()
    clock.advance(25)  # one long model call runs far past the cap
    status = tracker.status()
    assert (status.ok, status.reason) == (False, StopReason.DURATION)
    assert status.detail == "25.0 s elapsed (limit 10 s)"
    with pytest.raises(BudgetExceeded):
        tracker.check_before_call()
    assert tracker.turns == 1


def test_the_budget_may_be_named_and_clock_and_state_must_be() -> None:
    tracker = BudgetTracker(budget=RolloutBudget(max_actions=3), clock=FakeClock(), state=BudgetState(actions=1))
    assert tracker.remaining_actions == 2
    with pytest.raises(TypeError):
        BudgetTracker(RolloutBudget(), FakeClock())  # type: ignore[call-arg]

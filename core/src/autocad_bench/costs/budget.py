"""Per-rollout budget: actions, turns, wall-clock time and model spend.

The pilot asks :class:`BudgetTracker` for permission before every model call and reports
every priced response and every executed action. Once any limit trips, the tracker stays
stopped with one :class:`StopReason` and refuses every later call, so spend can never run
past a cap by more than the one response that crossed it.

The tracker's :class:`BudgetState` is plain JSON; a resumed rollout passes it back and keeps
counting (cost, usage, turns, actions, elapsed time) instead of starting from zero.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer
from pydantic_core import PydanticCustomError

from autocad_bench.costs.calculator import CostLedger, ResponseCost
from autocad_bench.models import StrictModel

Clock = Callable[[], float]
"""A monotonic clock in seconds (``time.monotonic`` unless a test injects one)."""


def _usd_as_json_number(value: Decimal) -> float | int:
    return int(value) if value == value.to_integral_value() else float(value)


def _number_not_text_or_bool(value: object) -> object:
    # Decimal's lax mode would take "2" and true; a configuration cap must be a JSON number.
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("decimal_type", "Input should be a valid number")
    return value


CapUsd = Annotated[
    Decimal,
    BeforeValidator(_number_not_text_or_bool),
    Field(gt=0, allow_inf_nan=False),
    PlainSerializer(_usd_as_json_number, return_type=float, when_used="json"),
]


# Upper bounds of the budget fields (the duration is 30 days): larger values are typos.
MAX_ACTIONS = 10_000_000
MAX_CONSECUTIVE_INVALID_TURNS = 10_000
MAX_COST_USD = 1_000_000
MAX_DURATION_S = 30 * 24 * 3600
MAX_TURNS = 100_000


class RolloutBudget(StrictModel):
    """Limits of one rollout.

    ``max_actions`` bounds desktop actions across all batches; ``max_consecutive_invalid_turns``
    bounds rejected action batches in a row (a valid batch resets the streak). The optional
    caps stop the rollout when spend (USD), wall-clock seconds (all attempts together) or
    model calls reach them.
    """

    max_actions: int = Field(default=5000, strict=True, ge=1, le=MAX_ACTIONS)
    max_consecutive_invalid_turns: int = Field(default=10, strict=True, ge=1, le=MAX_CONSECUTIVE_INVALID_TURNS)
    max_cost_usd: Annotated[CapUsd, Field(le=MAX_COST_USD)] | None = None
    max_duration_s: float | None = Field(default=None, strict=True, gt=0, le=MAX_DURATION_S, allow_inf_nan=False)
    max_turns: int | None = Field(default=None, strict=True, ge=1, le=MAX_TURNS)


class StopReason(enum.StrEnum):
    """Which budget limit ended a rollout."""

    COST = "cost"
    DURATION = "duration"
    TURNS = "turns"
    ACTIONS = "actions"


class BudgetExceeded(Exception):
    """A budget limit tripped; no further model call is allowed.

    ``reason`` is the limit, ``detail`` a one-line explanation with the numbers.
    """

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"budget exhausted ({reason.value}): {detail}")
        self.reason = reason
        self.detail = detail


class InvalidTurnLimitExceeded(Exception):
    """The model produced ``max_consecutive_invalid_turns`` rejected batches in a row."""

    def __init__(self, consecutive: int, limit: int) -> None:
        super().__init__(f"{consecutive} consecutive invalid action batches (limit {limit})")
        self.consecutive = consecutive
        self.limit = limit


class BudgetState(StrictModel):
    """Serializable progress of a rollout against its budget (kept across attempts).

    ``elapsed_s`` is wall-clock time of all attempts so far; ``attempts`` how many tracker
    lifetimes contributed. ``stop_reason`` stays set once a limit tripped.
    """

    turns: int = Field(default=0, ge=0)
    actions: int = Field(default=0, ge=0)
    elapsed_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    ledger: CostLedger = Field(default_factory=CostLedger)
    consecutive_invalid_turns: int = Field(default=0, ge=0)
    lifetime_invalid_turns: int = Field(default=0, ge=0)
    attempts: int = Field(default=0, ge=0)
    stop_reason: StopReason | None = None
    stop_detail: str = ""


class BudgetStatus(StrictModel):
    """Result of :meth:`BudgetTracker.status`: whether another call may start, and the numbers."""

    ok: bool
    reason: StopReason | None
    detail: str
    cost_usd: Decimal
    elapsed_s: float
    turns: int
    actions: int
    remaining_actions: int


class BudgetTracker:
    """Enforces a :class:`RolloutBudget` for one rollout (one attempt at a time).

    Call :meth:`check_before_call` before each new model call (it counts the turn),
    :meth:`ensure_within_limits` before re-sending the same unconsumed call after a provider
    error (it does not count a turn), :meth:`record` with every priced response, and
    :meth:`record_actions` after executing actions. Pass ``state`` from a previous attempt
    to continue its totals. Not thread-safe: one tracker belongs to one rollout's loop.
    """

    def __init__(
        self,
        budget: RolloutBudget | None = None,
        *,
        clock: Clock = time.monotonic,
        state: BudgetState | None = None,
    ) -> None:
        self.budget = budget or RolloutBudget()
        self._clock = clock
        prior = state or BudgetState()
        self._started = clock()
        self._elapsed_before = prior.elapsed_s
        self._turns = prior.turns
        self._actions = prior.actions
        self._ledger = prior.ledger
        self._invalid_streak = prior.consecutive_invalid_turns
        self._invalid_total = prior.lifetime_invalid_turns
        self._attempts = prior.attempts + 1
        self._stop: StopReason | None = prior.stop_reason
        self._stop_detail = prior.stop_detail

    def start_clock(self) -> None:
        """Start (or restart) this attempt's wall clock now.

        The pilot calls it once the desktop has been handed to the model, so the
        ``max_duration_s`` budget counts the model's time, not the infrastructure's warm-up
        (lease, reset, first frame), which is reported separately. Time of earlier attempts
        is kept.
        """
        self._started = self._clock()

    # -- queries -------------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        """Wall-clock seconds of this and all previous attempts."""
        return self._elapsed_before + max(0.0, self._clock() - self._started)

    @property
    def cost_usd(self) -> Decimal:
        return self._ledger.total_usd

    @property
    def ledger(self) -> CostLedger:
        return self._ledger

    @property
    def turns(self) -> int:
        return self._turns

    @property
    def actions(self) -> int:
        return self._actions

    @property
    def remaining_actions(self) -> int:
        """Actions the model may still request (never negative)."""
        return max(0, self.budget.max_actions - self._actions)

    @property
    def remaining_duration_s(self) -> float | None:
        """Seconds left before the duration cap (``None`` without a cap)."""
        if self.budget.max_duration_s is None:
            return None
        return max(0.0, self.budget.max_duration_s - self.elapsed_s)

    @property
    def stop_reason(self) -> StopReason | None:
        """The limit that tripped, or ``None`` while the rollout may continue."""
        return self._stop

    def status(self) -> BudgetStatus:
        """Evaluate every limit without raising; a limit found reached is latched as the stop."""
        reason = self._evaluate()
        return BudgetStatus(
            ok=reason is None,
            reason=reason,
            detail=self._stop_detail,
            cost_usd=self.cost_usd,
            elapsed_s=self.elapsed_s,
            turns=self._turns,
            actions=self._actions,
            remaining_actions=self.remaining_actions,
        )

    def snapshot(self) -> BudgetState:
        """The serializable state to persist (and pass back as ``state`` on resume)."""
        return BudgetState(
            turns=self._turns,
            actions=self._actions,
            elapsed_s=self.elapsed_s,
            ledger=self._ledger,
            consecutive_invalid_turns=self._invalid_streak,
            lifetime_invalid_turns=self._invalid_total,
            attempts=self._attempts,
            stop_reason=self._stop,
            stop_detail=self._stop_detail,
        )

    # -- gates ---------------------------------------------------------------------------

    def check_before_call(self) -> None:
        """Permit one new model call and count it as a turn.

        Raises :class:`BudgetExceeded` (and counts nothing) if any limit is reached: cost,
        elapsed time, turns, or no actions left. After the first trip every call raises.
        """
        self.ensure_within_limits()
        if self.budget.max_turns is not None and self._turns >= self.budget.max_turns:
            self._trip(StopReason.TURNS, f"{self._turns} model calls (limit {self.budget.max_turns})")
            self.ensure_within_limits()
        self._turns += 1

    def ensure_within_limits(self) -> None:
        """Raise :class:`BudgetExceeded` if any limit is reached; counts nothing.

        Used before re-sending an unconsumed call after a provider error, so a long 429
        storm still ends at the duration cap.
        """
        reason = self._evaluate()
        if reason is not None:
            raise BudgetExceeded(reason, self._stop_detail)

    # -- recording -----------------------------------------------------------------------

    def record(self, cost: ResponseCost) -> StopReason | None:
        """Add one priced response; returns :attr:`StopReason.COST` if it reached the cap.

        Every response is recorded, even after a trip: usage that was billed is never dropped.
        """
        self._ledger = self._ledger.add(cost)
        return self._evaluate()

    def record_actions(self, count: int) -> StopReason | None:
        """Count ``count`` executed actions; returns :attr:`StopReason.ACTIONS` once none remain.

        Raises :class:`ValueError` for a negative count. Actions that already happened are
        always counted, even beyond the limit.
        """
        if count < 0:
            raise ValueError(f"action count must be >= 0, got {count}")
        self._actions += count
        return self._evaluate()

    def record_valid_turn(self) -> None:
        """A completely valid action batch: resets the consecutive-invalid streak."""
        self._invalid_streak = 0

    def record_invalid_turn(self) -> None:
        """A rejected action batch; raises :class:`InvalidTurnLimitExceeded` at the limit."""
        self._invalid_streak += 1
        self._invalid_total += 1
        limit = self.budget.max_consecutive_invalid_turns
        if self._invalid_streak >= limit:
            raise InvalidTurnLimitExceeded(self._invalid_streak, limit)

    # -- internals -----------------------------------------------------------------------

    def _evaluate(self) -> StopReason | None:
        if self._stop is not None:
            return self._stop
        budget = self.budget
        if budget.max_cost_usd is not None and self.cost_usd >= budget.max_cost_usd:
            self._trip(StopReason.COST, f"spent ${_usd(self.cost_usd)} (limit ${_usd(budget.max_cost_usd)})")
        elif budget.max_duration_s is not None and self.elapsed_s >= budget.max_duration_s:
            self._trip(
                StopReason.DURATION,
                f"{self.elapsed_s:.1f} s elapsed (limit {budget.max_duration_s:g} s)",
            )
        elif self._actions >= budget.max_actions:
            self._trip(StopReason.ACTIONS, f"{self._actions} actions (limit {budget.max_actions})")
        return self._stop

    def _trip(self, reason: StopReason, detail: str) -> None:
        if self._stop is None:
            self._stop = reason
            self._stop_detail = detail


def _usd(amount: Decimal) -> str:
    # Quantized amounts carry twelve decimals; trailing zeros only hide the number.
    return f"{amount.normalize():f}"

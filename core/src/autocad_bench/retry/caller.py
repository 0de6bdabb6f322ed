"""One model turn with the shared retry accounting applied.

:class:`ModelCaller` is the only place that calls :meth:`ProviderSession.next_turn`. It
retries failed requests according to their :class:`ProviderErrorKind` (see
``retry/policy.py`` for the rules), feeds malformed or missing ``computer_action`` responses
back to the model, prices and records every response it receives, and returns the first
well-formed turn together with everything that was billed on the way. Re-sending after a
provider error is always safe: the failed request left the session history unchanged and no
desktop action has happened for this turn yet.

Backoff waits go through an injectable ``sleep``. Each scheduled retry is also reported to
stamina's instrumentation hooks (``stamina.instrumentation``), so operators who configured
stamina's logging, structlog or Prometheus integration see model retries there too; with
``stamina.set_testing(True)`` the default sleep returns immediately.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import stamina
from pydantic import Field

from autocad_bench.costs.budget import BudgetExceeded, BudgetTracker, StopReason
from autocad_bench.costs.calculator import ResponseCost
from autocad_bench.models import StrictModel
from autocad_bench.providers.models import (
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry.accounting import RetryCounters
from autocad_bench.retry.policy import RetryPolicy, retry_delay

SleepFn = Callable[[float], Awaitable[None]]
"""Waits the given number of seconds (``asyncio.sleep`` unless a test injects one)."""
Pricer = Callable[[TokenUsage], ResponseCost]
"""Prices one response, e.g. ``functools.partial(cost_of, model_id, prices=table)``."""
ResponseHook = Callable[[ModelTurn, "ResponseCost | None"], None]
"""Called once per actual response (malformed ones too), e.g. to append it to the trace."""
RetryHook = Callable[["RetryEvent"], None]
"""Called once per scheduled retry, before waiting."""
FeedbackBuilder = Callable[[Observation, ModelTurn], Observation]
"""Builds the observation that answers a malformed response."""

_RETRY_NAME = "autocad_bench.model_request"
_BACKOFF_KINDS = frozenset(
    {ProviderErrorKind.RATE_LIMITED, ProviderErrorKind.SERVER_ERROR, ProviderErrorKind.TRANSIENT}
)
_MESSAGE_LIMIT = 500


async def default_sleep(seconds: float) -> None:
    """``asyncio.sleep``, skipped entirely while stamina's test mode is active."""
    if stamina.is_testing():
        return
    await asyncio.sleep(seconds)


class RetryEvent(StrictModel):
    """One scheduled retry of a failed request, for the trace.

    ``delay_s`` is what the policy asked for, ``slept_s`` what was actually waited (less
    only when the rollout's duration budget ends first). ``streak`` is the consecutive
    count of this kind including this failure. A 413 retry has ``delay_s == 0`` and
    ``shrunk`` set.
    """

    kind: ProviderErrorKind
    status: int | None = None
    streak: int = Field(ge=1)
    lifetime: int = Field(ge=1)
    delay_s: float = Field(ge=0)
    slept_s: float = Field(ge=0)
    retry_after_s: float | None = None
    shrunk: bool = False
    message: str = ""


class TurnResult(StrictModel):
    """A well-formed model turn and everything billed to obtain it.

    ``observation`` is the observation the turn answers (it differs from the one passed in
    when malformed responses were fed back first). ``responses`` and ``costs`` list every
    response received, in order, malformed ones included; ``usage`` is their sum and must be
    billed. ``budget_stop`` is set when the budget tripped on these responses: the turn is
    still returned, but no further call will be allowed.
    """

    turn: ModelTurn
    observation: Observation
    responses: tuple[ModelTurn, ...]
    costs: tuple[ResponseCost, ...] = ()
    usage: TokenUsage
    retries: tuple[RetryEvent, ...] = ()
    counters: RetryCounters
    budget_stop: StopReason | None = None


@dataclass(frozen=True)
class Billed:
    """What a model turn consumed before it ended: responses, their usage and costs, retries."""

    usage: TokenUsage
    responses: tuple[ModelTurn, ...]
    costs: tuple[ResponseCost, ...]
    retries: tuple[RetryEvent, ...]
    counters: RetryCounters


class ModelCallError(Exception):
    """A model turn could not be obtained; the rollout must stop.

    :attr:`billed` holds what was consumed before the failure (bill its ``usage``), the
    retries made and the counters after the failure. The provider error or budget exception
    that ended the turn is the ``__cause__``.
    """

    def __init__(self, message: str, billed: Billed) -> None:
        super().__init__(message)
        self.billed = billed

    @property
    def usage(self) -> TokenUsage:
        return self.billed.usage

    @property
    def counters(self) -> RetryCounters:
        return self.billed.counters


class TransientRetriesExhausted(ModelCallError):
    """The consecutive transient-failure budget (408/409/connection/read) ran out."""


class MalformedResponsesExhausted(ModelCallError):
    """Too many consecutive responses without a usable ``computer_action`` call."""


class ModelStopped(ModelCallError):
    """The model ended the rollout itself without finishing the task: it refused, or its
    computer-use tool raised a safety check that the provider's policy does not acknowledge.

    Not retried: asking again would only repeat the verdict (or acknowledge a check
    nobody approved). :attr:`stop_reason` is the turn's (``refusal`` or ``safety_check``).
    """

    def __init__(self, message: str, billed: Billed, stop_reason: str) -> None:
        super().__init__(message, billed)
        self.stop_reason = stop_reason


STOPPING_REASONS: frozenset[str] = frozenset({"refusal", "safety_check"})
"""``ModelTurn.stop_reason`` values of a malformed turn that end the rollout at once."""


class RequestTooLarge(ModelCallError):
    """A 413 could not be fixed: the session could not shrink the request, or it stayed too large."""


class FatalProviderError(ModelCallError):
    """The provider rejected the request in a way retrying cannot fix (auth, bad request...)."""


class BudgetStopped(ModelCallError):
    """The rollout budget refused the next model call; ``reason`` names the limit."""

    def __init__(self, message: str, billed: Billed, *, reason: StopReason) -> None:
        super().__init__(message, billed)
        self.reason = reason


def malformed_feedback(observation: Observation, turn: ModelTurn) -> Observation:
    """Default answer to a malformed response: same desktop, an explanation, the next index."""
    problem = turn.malformed or "the response did not call computer_action"
    return Observation(
        turn_index=observation.turn_index + 1,
        frame=observation.frame,
        feedback=(
            f"No action was executed: {problem}. "
            "Reply with exactly one computer_action call whose arguments follow its schema."
        ),
        tool_use_id=turn.tool_use_id,
        remaining_actions=observation.remaining_actions,
        post_action_visual_stable=observation.post_action_visual_stable,
        pointer=observation.pointer,
    )


def native_malformed_feedback(observation: Observation, turn: ModelTurn) -> Observation:
    """The answer to a malformed response in native tool mode: the model acts through its own
    computer-use tool or action language, so the hint does not name ``computer_action``."""
    problem = turn.malformed or "the response contained no action"
    return malformed_feedback(observation, turn).model_copy(update={"feedback": (
        f"No action was executed: {problem}. Reply with actions in the format of your computer-use tool, "
        "or end your turn without one when the task is finished.")})


def is_well_formed(turn: ModelTurn) -> bool:
    """Whether ``turn`` carries a ``computer_action`` argument object to validate."""
    return turn.action_input is not None and turn.malformed is None


@dataclass
class _TurnLog:
    responses: list[ModelTurn] = field(default_factory=list)
    costs: list[ResponseCost] = field(default_factory=list)
    retries: list[RetryEvent] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    waited_s: float = 0.0


class ModelCaller:
    """Obtains model turns for one rollout under the shared retry contract.

    One caller per rollout: it owns the rollout's :class:`RetryCounters` (pass the persisted
    ones back on resume) and is not safe for concurrent use. ``budget`` (with ``pricer``,
    which it requires) gates every new call and every retry and records every response's
    cost; ``on_response`` sees every response, ``on_retry`` every scheduled retry. ``sleep``
    and ``rng`` (jitter) are injectable for tests. Raises :class:`ValueError` if ``budget``
    is given without ``pricer``.
    """

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        counters: RetryCounters | None = None,
        sleep: SleepFn = default_sleep,
        rng: random.Random | None = None,
        budget: BudgetTracker | None = None,
        pricer: Pricer | None = None,
        on_response: ResponseHook | None = None,
        on_retry: RetryHook | None = None,
        feedback: FeedbackBuilder = malformed_feedback,
        instrument: bool = True,
    ) -> None:
        if budget is not None and pricer is None:
            # Without prices the cost cap would silently never trip.
            raise ValueError("a budget needs a pricer so that every response is charged")
        self.policy = policy or RetryPolicy()
        self._counters = counters or RetryCounters()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._budget = budget
        self._pricer = pricer
        self._on_response = on_response
        self._on_retry = on_retry
        self._feedback = feedback
        self._instrument = instrument

    @property
    def counters(self) -> RetryCounters:
        """Current counters (an immutable snapshot; persist it with the run state)."""
        return self._counters

    async def request_turn(self, session: ProviderSession, observation: Observation) -> TurnResult:
        """Call ``session.next_turn(observation)`` until a well-formed turn arrives.

        Provider errors are retried per their kind; malformed responses are answered with
        ``feedback`` and the model is asked again. Raises a :class:`ModelCallError` subclass
        when a limit is reached or the budget refuses a call; exceptions other than
        :class:`ProviderRequestError` from the session propagate unchanged.
        """
        log = _TurnLog()
        current = observation
        self._gate(log, new_call=True)
        while True:
            try:
                turn = await session.next_turn(current)
            except ProviderRequestError as exc:
                await self._after_error(session, exc, log)
                self._gate(log, new_call=False)
                continue
            well_formed = is_well_formed(turn)
            self._counters = self._counters.after_response(well_formed=well_formed)
            self._bill(turn, log)
            if well_formed:
                return TurnResult(
                    turn=turn,
                    observation=current,
                    responses=tuple(log.responses),
                    costs=tuple(log.costs),
                    usage=log.usage,
                    retries=tuple(log.retries),
                    counters=self._counters,
                    budget_stop=self._budget.stop_reason if self._budget else None,
                )
            if turn.stop_reason in STOPPING_REASONS:
                raise ModelStopped(
                    f"the model stopped the rollout ({turn.stop_reason}): {turn.malformed or turn.text or 'no detail'}",
                    self._billed(log), turn.stop_reason)
            streak = self._counters.malformed.consecutive
            if streak >= self.policy.max_consecutive_malformed:
                raise MalformedResponsesExhausted(
                    f"{streak} consecutive responses without a valid computer_action call "
                    f"(limit {self.policy.max_consecutive_malformed}); last: "
                    f"{turn.malformed or 'no call'}",
                    self._billed(log),
                )
            current = self._feedback(current, turn)
            self._gate(log, new_call=True)

    # -- internals -----------------------------------------------------------------------

    def _bill(self, turn: ModelTurn, log: _TurnLog) -> None:
        cost = self._pricer(turn.usage) if self._pricer is not None else None
        log.responses.append(turn)
        log.usage = log.usage + turn.usage
        if cost is not None:
            log.costs.append(cost)
            if self._budget is not None:
                self._budget.record(cost)
        if self._on_response is not None:
            self._on_response(turn, cost)

    def _gate(self, log: _TurnLog, *, new_call: bool) -> None:
        if self._budget is None:
            return
        try:
            if new_call:
                self._budget.check_before_call()
            else:
                self._budget.ensure_within_limits()
        except BudgetExceeded as exc:
            raise BudgetStopped(str(exc), self._billed(log), reason=exc.reason) from exc

    async def _after_error(self, session: ProviderSession, exc: ProviderRequestError, log: _TurnLog) -> None:
        kind = exc.kind
        self._counters = self._counters.after_error(kind)
        counter = self._counters.for_kind(kind)
        policy = self.policy
        if kind is ProviderErrorKind.REQUEST_TOO_LARGE:
            if counter.consecutive > policy.max_shrink_retries:
                raise RequestTooLarge(
                    f"request still too large after {policy.max_shrink_retries} shrink(s): {exc}",
                    self._billed(log),
                ) from exc
            if not session.shrink():
                raise RequestTooLarge(
                    f"request too large and the session cannot shrink it: {exc}", self._billed(log)
                ) from exc
            self._counters = self._counters.after_shrink()
            await self._schedule(exc, counter.consecutive, counter.lifetime, 0.0, log, shrunk=True)
            return
        transient = kind is ProviderErrorKind.TRANSIENT
        if transient and counter.consecutive >= policy.max_consecutive_transient:
            raise TransientRetriesExhausted(
                f"{counter.consecutive} consecutive transient failures "
                f"(limit {policy.max_consecutive_transient}); last: {exc}",
                self._billed(log),
            ) from exc
        if kind not in _BACKOFF_KINDS:
            raise FatalProviderError(f"provider request failed: {exc}", self._billed(log)) from exc
        delay = retry_delay(policy, kind, counter.consecutive, exc.retry_after_s, self._rng)
        await self._schedule(exc, counter.consecutive, counter.lifetime, delay, log)

    async def _schedule(
        self,
        exc: ProviderRequestError,
        streak: int,
        lifetime: int,
        delay: float,
        log: _TurnLog,
        *,
        shrunk: bool = False,
    ) -> None:
        slept = delay
        remaining = self._budget.remaining_duration_s if self._budget is not None else None
        if remaining is not None:
            # Waiting past the duration cap only delays the inevitable stop.
            slept = min(slept, remaining)
        event = RetryEvent(
            kind=exc.kind,
            status=exc.status,
            streak=streak,
            lifetime=lifetime,
            delay_s=delay,
            slept_s=slept,
            retry_after_s=exc.retry_after_s,
            shrunk=shrunk,
            message=str(exc)[:_MESSAGE_LIMIT],
        )
        log.retries.append(event)
        if self._on_retry is not None:
            self._on_retry(event)
        with contextlib.ExitStack() as hooks:
            if self._instrument:
                self._notify_stamina(exc, streak, slept, log.waited_s, hooks)
            if slept > 0:
                await self._sleep(slept)
        log.waited_s += slept
        self._counters = self._counters.after_backoff(slept)

    @staticmethod
    def _notify_stamina(
        exc: ProviderRequestError,
        streak: int,
        wait_for: float,
        waited_so_far: float,
        hooks: contextlib.ExitStack,
    ) -> None:
        details = stamina.instrumentation.RetryDetails(
            name=f"{_RETRY_NAME}.{exc.kind.value}",
            args=(),
            kwargs={},
            retry_num=streak,
            wait_for=wait_for,
            waited_so_far=waited_so_far,
            caused_by=exc,
        )
        for hook in stamina.instrumentation.get_on_retry_hooks():
            # A hook may return a context manager that spans the wait (stamina's contract).
            maybe_cm = hook(details)
            if isinstance(maybe_cm, contextlib.AbstractContextManager):
                hooks.enter_context(maybe_cm)

    def _billed(self, log: _TurnLog) -> Billed:
        return Billed(
            usage=log.usage,
            responses=tuple(log.responses),
            costs=tuple(log.costs),
            retries=tuple(log.retries),
            counters=self._counters,
        )


async def request_turn(
    session: ProviderSession,
    observation: Observation,
    *,
    policy: RetryPolicy | None = None,
    counters: RetryCounters | None = None,
    sleep: SleepFn = default_sleep,
    rng: random.Random | None = None,
    budget: BudgetTracker | None = None,
    pricer: Pricer | None = None,
    on_response: ResponseHook | None = None,
    on_retry: RetryHook | None = None,
) -> TurnResult:
    """One-shot form of :meth:`ModelCaller.request_turn`; the new counters are in the result.

    Prefer a long-lived :class:`ModelCaller` per rollout; this helper suits tests and
    callers that persist :class:`RetryCounters` themselves.
    """
    caller = ModelCaller(
        policy,
        counters=counters,
        sleep=sleep,
        rng=rng,
        budget=budget,
        pricer=pricer,
        on_response=on_response,
        on_retry=on_retry,
    )
    return await caller.request_turn(session, observation)

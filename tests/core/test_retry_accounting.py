"""Shared model-retry accounting, driven by a scripted provider session.

The fake session is a real :class:`ProviderSession` whose requests fail or answer from a
script; the caller's injected sleep records every requested delay, so the tests run
instantly and assert exact backoff values.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import random
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
import stamina
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from autocad_bench.costs import BudgetTracker, RolloutBudget, StopReason, cost_of, default_pricing
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import (
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry import (
    BudgetStopped,
    FatalProviderError,
    MalformedResponsesExhausted,
    ModelCaller,
    ModelCallError,
    ModelStopped,
    RequestTooLarge,
    RetryCounters,
    RetryEvent,
    RetryPolicy,
    StreakCounter,
    TransientRetriesExhausted,
    default_sleep,
    exponential_backoff,
    request_turn,
    retry_delay,
)

K = ProviderErrorKind
FRAME = ArtifactRef(path="frames/0000.png", sha256="0" * 64)
NO_JITTER = RetryPolicy(jitter=0)


class ScriptExhausted(Exception):
    """The fake ran out of scripted outcomes (not a provider error: it propagates)."""


def err(kind: ProviderErrorKind, status: int | None = None, retry_after: float | None = None) -> ProviderRequestError:
    return ProviderRequestError(
        kind, f"HTTP {status}" if status else kind.value, status=status, retry_after_s=retry_after
    )


def ok(n: int = 0, usage: TokenUsage | None = None) -> ModelTurn:
    return ModelTurn(
        tool_use_id=f"call-{n}",
        action_input={"actions": [{"type": "wait", "ms": 10}]},
        usage=usage or TokenUsage(input_tokens=100, output_tokens=10),
    )


def bad(n: int = 0, usage: TokenUsage | None = None, *, missing: bool = False) -> ModelTurn:
    return ModelTurn(
        tool_use_id=f"bad-{n}",
        action_input=None if missing else {"actions": "nope"},
        malformed=None if missing else "arguments are not valid JSON",
        usage=usage or TokenUsage(input_tokens=100, output_tokens=10),
    )


class ScriptedSession(ProviderSession):
    """Answers each ``next_turn`` with the next scripted outcome and records what it sent.

    ``payload`` stands for the serialized request: it changes when a 413 shrink succeeds,
    so the tests can prove no identical oversized payload is ever resent.
    """

    def __init__(
        self, script: Sequence[ModelTurn | ProviderRequestError], shrink_results: list[bool] | None = None
    ) -> None:
        self.script = list(script)
        self.shrink_results = list(shrink_results or [])
        self.sent: list[tuple[Observation, int]] = []
        self.payload = 1_000_000
        self.shrinks = 0

    async def next_turn(self, observation: Observation) -> ModelTurn:
        self.sent.append((observation, self.payload))
        if not self.script:
            raise ScriptExhausted
        outcome = self.script.pop(0)
        if isinstance(outcome, ProviderRequestError):
            raise outcome
        return outcome

    def shrink(self) -> bool:
        self.shrinks += 1
        result = self.shrink_results.pop(0) if self.shrink_results else True
        if result:
            self.payload //= 2
        return result

    def checkpoint(self) -> JsonObject:
        return {}


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def first_observation() -> Observation:
    return Observation(turn_index=0, frame=FRAME, remaining_actions=5000)


def caller(policy: RetryPolicy = NO_JITTER, **kwargs: Any) -> tuple[ModelCaller, Sleeps]:
    sleeps = Sleeps()
    return ModelCaller(policy, sleep=sleeps, instrument=False, **kwargs), sleeps


# -- the counters and the policy on their own ------------------------------------------------


class FixedRandom(random.Random):
    """A random source whose every draw is ``value`` (the jitter arithmetic made exact)."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def test_a_streak_counter_starts_at_zero_and_bumps_both_counts_by_one() -> None:
    counter = StreakCounter()
    assert (counter.consecutive, counter.lifetime) == (0, 0)
    for n in range(1, 4):
        counter = counter.bump()
        assert (counter.consecutive, counter.lifetime) == (n, n)
    assert StreakCounter(consecutive=3, lifetime=5).bump() == StreakCounter(consecutive=4, lifetime=6)


@pytest.mark.parametrize("consecutive", [0, 1, 2, 7])
def test_reset_ends_the_streak_and_keeps_the_lifetime_total(consecutive: int) -> None:
    assert StreakCounter(consecutive=consecutive, lifetime=9).reset() == StreakCounter(consecutive=0, lifetime=9)


@pytest.mark.parametrize("field", ["consecutive", "lifetime"])
def test_streak_counts_are_never_negative(field: str) -> None:
    assert getattr(StreakCounter.model_validate({field: 0}), field) == 0
    with pytest.raises(ValidationError):
        StreakCounter.model_validate({field: -1})


def test_fresh_retry_counters_are_all_zero() -> None:
    zero = {"consecutive": 0, "lifetime": 0}
    assert RetryCounters().model_dump() == {
        "rate_limited": zero, "server_error": zero, "transient": zero, "request_too_large": zero, "fatal": zero,
        "malformed": zero, "responses": 0, "shrinks": 0, "backoff_s": 0.0}


@pytest.mark.parametrize(("field", "valid", "invalid"), [
    ("responses", 0, -1), ("shrinks", 0, -1), ("backoff_s", 0.0, -0.5), ("backoff_s", 0.5, math.inf),
    ("backoff_s", 0.5, math.nan),
])
def test_retry_totals_are_never_negative_nor_infinite(field: str, valid: float, invalid: float) -> None:
    assert getattr(RetryCounters.model_validate({field: valid}), field) == valid
    with pytest.raises(ValidationError):
        RetryCounters.model_validate({field: invalid})


@pytest.mark.parametrize("kind", list(K))
def test_an_error_bumps_only_the_counter_of_its_kind(kind: ProviderErrorKind) -> None:
    base = RetryCounters(responses=2, shrinks=1, backoff_s=3.0)
    after = base.after_error(kind).after_error(kind)
    assert after.for_kind(kind) == StreakCounter(consecutive=2, lifetime=2)
    assert all(after.for_kind(other) == StreakCounter() for other in K if other is not kind)
    assert (after.malformed, after.responses, after.shrinks, after.backoff_s) == (StreakCounter(), 2, 1, 3.0)


def test_a_response_resets_every_error_streak_and_counts_malformed_ones() -> None:
    counters = RetryCounters(responses=3, shrinks=2, backoff_s=1.5)
    for kind in K:
        counters = counters.after_error(kind)
    counters = counters.after_response(well_formed=False)
    assert all(counters.for_kind(kind) == StreakCounter(consecutive=0, lifetime=1) for kind in K)
    assert (counters.malformed, counters.responses) == (StreakCounter(consecutive=1, lifetime=1), 4)
    counters = counters.after_response(well_formed=False)
    assert (counters.malformed, counters.responses) == (StreakCounter(consecutive=2, lifetime=2), 5)
    counters = counters.after_response(well_formed=True)
    assert (counters.malformed, counters.responses) == (StreakCounter(consecutive=0, lifetime=2), 6)
    assert (counters.shrinks, counters.backoff_s) == (2, 1.5)
    assert RetryCounters().after_response(well_formed=True).responses == 1


def test_shrinks_and_backoff_accumulate() -> None:
    counters = RetryCounters()
    assert counters.after_shrink().shrinks == 1 and counters.after_shrink().after_shrink().shrinks == 2
    assert RetryCounters(shrinks=3).after_shrink().shrinks == 4
    assert counters.after_backoff(0.25).backoff_s == 0.25
    assert RetryCounters(backoff_s=2.0).after_backoff(1.5).backoff_s == 3.5
    assert RetryCounters(responses=5).after_shrink().after_backoff(1.0).responses == 5


def test_the_default_policy_is_the_written_contract() -> None:
    assert RetryPolicy().model_dump() == {
        "backoff_initial_s": 1.0, "backoff_multiplier": 2.0, "backoff_cap_s": 60.0, "jitter": 0.25,
        "max_retry_after_s": 900.0, "max_consecutive_transient": 10, "max_consecutive_malformed": 10,
        "max_shrink_retries": 1}


@pytest.mark.parametrize(("field", "lowest", "below"), [
    ("backoff_initial_s", 0.001, 0.0), ("backoff_multiplier", 1.0, 0.999), ("backoff_cap_s", 0.001, 0.0),
    ("jitter", 0.0, -0.001), ("max_retry_after_s", 0.001, 0.0), ("max_consecutive_transient", 1, 0),
    ("max_consecutive_malformed", 1, 0), ("max_shrink_retries", 0, -1),
])
def test_policy_lower_bounds(field: str, lowest: float, below: float) -> None:
    assert getattr(RetryPolicy.model_validate({field: lowest}), field) == lowest
    with pytest.raises(ValidationError):
        RetryPolicy.model_validate({field: below})


def test_jitter_stays_below_one() -> None:
    assert RetryPolicy(jitter=0.999).jitter == 0.999
    with pytest.raises(ValidationError):
        RetryPolicy(jitter=1.0)


@pytest.mark.parametrize("field", ["backoff_initial_s", "backoff_multiplier", "backoff_cap_s", "max_retry_after_s"])
def test_policy_times_are_finite(field: str) -> None:
    with pytest.raises(ValidationError):
        RetryPolicy.model_validate({field: math.inf})


def test_exponential_backoff_grows_from_the_initial_delay_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff_initial_s=3.0, backoff_multiplier=2.0, backoff_cap_s=40.0, jitter=0)
    assert [exponential_backoff(policy, streak) for streak in range(1, 8)] == [3, 6, 12, 24, 40, 40, 40]
    assert exponential_backoff(policy, 100_000) == 40.0  # 2.0 ** 99_999 overflows a float: still the cap
    assert exponential_backoff(RetryPolicy(backoff_initial_s=0.5, backoff_multiplier=1.0), 50) == 0.5
    for streak in (0, -1):
        with pytest.raises(ValueError, match="streak must be >= 1"):
            exponential_backoff(policy, streak)


def test_jitter_removes_its_share_of_the_backoff() -> None:
    policy = RetryPolicy(backoff_initial_s=8.0, jitter=0.5)
    assert retry_delay(policy, K.SERVER_ERROR, 1, None, FixedRandom(0.5)) == 6.0  # 8 x (1 - 0.5 x 0.5)
    assert retry_delay(policy, K.RATE_LIMITED, 2, None, FixedRandom(0.0)) == 16.0
    assert retry_delay(policy.model_copy(update={"jitter": 0.0}), K.TRANSIENT, 2, None, FixedRandom(0.5)) == 16.0


@pytest.mark.parametrize(("kind", "hint", "delay"), [
    (K.RATE_LIMITED, 300.0, 300.0),  # beyond the backoff cap: honoured
    (K.RATE_LIMITED, 5_000.0, 900.0),  # ...up to max_retry_after_s
    (K.SERVER_ERROR, 300.0, 60.0),  # other kinds honour a hint only up to the backoff cap
    (K.TRANSIENT, 300.0, 60.0),
    (K.SERVER_ERROR, 20.0, 20.0),
    (K.RATE_LIMITED, 2.0, 4.0),  # shorter than the backoff: the backoff wins
    (K.TRANSIENT, 4.5, 4.5),
])
def test_a_retry_after_hint_is_honoured_within_its_ceiling(kind: ProviderErrorKind, hint: float, delay: float) -> None:
    assert retry_delay(NO_JITTER, kind, 3, hint, random.Random(1)) == delay


@pytest.mark.parametrize("hint", [None, 0.0, -0.5, -5.0, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("kind", [K.RATE_LIMITED, K.SERVER_ERROR, K.TRANSIENT])
def test_a_missing_or_senseless_retry_after_is_ignored(kind: ProviderErrorKind, hint: float | None) -> None:
    assert retry_delay(NO_JITTER, kind, 3, hint, random.Random(1)) == 4.0


def test_a_short_hint_beats_a_shorter_backoff() -> None:
    policy = RetryPolicy(backoff_initial_s=0.1, jitter=0)
    assert retry_delay(policy, K.RATE_LIMITED, 1, 0.5, random.Random(1)) == 0.5
    assert retry_delay(policy, K.SERVER_ERROR, 1, 0.05, random.Random(1)) == 0.1


@pytest.mark.parametrize("kind", [K.REQUEST_TOO_LARGE, K.FATAL])
def test_kinds_without_a_backoff_have_no_retry_delay(kind: ProviderErrorKind) -> None:
    with pytest.raises(ValueError, match="not retried after a backoff"):
        retry_delay(NO_JITTER, kind, 1, None, random.Random(1))


# -- rate limits -----------------------------------------------------------------------------


async def test_rate_limit_honours_a_longer_retry_after() -> None:
    session = ScriptedSession(
        [err(K.RATE_LIMITED, 429, retry_after=30), err(K.RATE_LIMITED, 429, retry_after=0.5), ok()]
    )
    model, sleeps = caller()
    result = await model.request_turn(session, first_observation())
    assert sleeps.delays == [30, 2]  # 30 s beats the 1 s backoff; 0.5 s loses to the 2 s one
    assert result.turn.tool_use_id == "call-0"
    assert [event.delay_s for event in result.retries] == [30, 2]
    assert model.counters.rate_limited.consecutive == 0 and model.counters.rate_limited.lifetime == 2


async def test_rate_limit_retry_after_beyond_the_backoff_cap_is_still_honoured() -> None:
    session = ScriptedSession([err(K.RATE_LIMITED, 429, retry_after=300), ok()])
    model, sleeps = caller()
    await model.request_turn(session, first_observation())
    assert sleeps.delays == [300]
    # ...up to the policy ceiling, so a bogus header cannot park a rollout for a day.
    session = ScriptedSession([err(K.RATE_LIMITED, 429, retry_after=86_400), ok()])
    model, sleeps = caller()
    await model.request_turn(session, first_observation())
    assert sleeps.delays == [900]


async def test_rate_limit_without_retry_after_backs_off_exponentially_forever() -> None:
    session = ScriptedSession([err(K.RATE_LIMITED, 429) for _ in range(200)] + [ok()])
    model, sleeps = caller()
    result = await model.request_turn(session, first_observation())
    assert sleeps.delays[:8] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert len(sleeps.delays) == 200 and max(sleeps.delays) == 60
    assert result.counters.rate_limited.lifetime == 200
    assert result.counters.transient.lifetime == 0  # throttling never consumes the transient budget


async def test_jitter_only_shortens_delays_and_is_reproducible_with_a_seeded_rng() -> None:
    script: list[ModelTurn | ProviderRequestError] = [err(K.RATE_LIMITED, 429) for _ in range(20)] + [ok()]
    delays = []
    for _ in range(2):
        sleeps = Sleeps()
        model = ModelCaller(RetryPolicy(jitter=0.5), sleep=sleeps, rng=random.Random(7), instrument=False)
        await model.request_turn(ScriptedSession(script), first_observation())
        delays.append(sleeps.delays)
    assert delays[0] == delays[1]
    ideal = [min(60.0, 2.0**i) for i in range(20)]
    assert all(0.5 * cap <= d <= cap for d, cap in zip(delays[0], ideal, strict=True))


# -- server errors ---------------------------------------------------------------------------


async def test_server_error_burst_of_50_is_retried_with_delays_capped_at_60() -> None:
    script: list[ModelTurn | ProviderRequestError] = [err(K.SERVER_ERROR, 500 + i % 4) for i in range(50)]
    session = ScriptedSession([*script, ok()])
    model, sleeps = caller()
    result = await model.request_turn(session, first_observation())
    assert sleeps.delays == [min(60, 2**i) for i in range(50)]
    assert len(session.sent) == 51
    assert result.counters.server_error.lifetime == 50
    assert result.counters.server_error.consecutive == 0


async def test_server_error_retry_after_is_capped_at_60() -> None:
    session = ScriptedSession(
        [err(K.SERVER_ERROR, 503, retry_after=600), err(K.SERVER_ERROR, 503, retry_after=20), ok()]
    )
    model, sleeps = caller()
    await model.request_turn(session, first_observation())
    assert sleeps.delays == [60, 20]


# -- transient failures ----------------------------------------------------------------------


async def test_ten_consecutive_transient_failures_fail_the_turn() -> None:
    session = ScriptedSession([err(K.TRANSIENT, 408) for _ in range(10)] + [ok()])
    model, sleeps = caller()
    with pytest.raises(TransientRetriesExhausted) as caught:
        await model.request_turn(session, first_observation())
    assert len(session.sent) == 10  # the 11th request is never made
    assert len(sleeps.delays) == 9
    assert caught.value.counters.transient.consecutive == 10
    assert isinstance(caught.value.__cause__, ProviderRequestError)


async def test_nine_transient_failures_then_success_passes_and_resets_the_streak() -> None:
    session = ScriptedSession(
        [err(K.TRANSIENT, 408) for _ in range(9)] + [ok(1)] + [err(K.TRANSIENT, 409) for _ in range(9)] + [ok(2)]
    )
    model, _ = caller()
    first = await model.request_turn(session, first_observation())
    assert first.counters.transient.consecutive == 0
    second = await model.request_turn(session, first_observation())
    assert second.turn.tool_use_id == "call-2"
    assert model.counters.transient == model.counters.transient.model_copy(update={"consecutive": 0, "lifetime": 18})


async def test_a_malformed_response_is_a_response_and_resets_the_transient_streak() -> None:
    script: list[ModelTurn | ProviderRequestError] = []
    for i in range(9):
        script += [err(K.TRANSIENT, 408) for _ in range(9)] + [bad(i)]
    session = ScriptedSession([*script, ok()])
    model, _ = caller()
    result = await model.request_turn(session, first_observation())
    assert result.counters.transient.lifetime == 81
    assert result.counters.malformed.lifetime == 9


# -- malformed responses ---------------------------------------------------------------------


async def test_ten_consecutive_malformed_responses_fail_and_are_all_billed() -> None:
    usage = TokenUsage(input_tokens=1_000, cached_input_tokens=500, output_tokens=50, reasoning_tokens=20)
    session = ScriptedSession([bad(i, usage, missing=i % 2 == 0) for i in range(10)] + [ok()])
    seen: list[ModelTurn] = []
    model, _ = caller(on_response=lambda turn, cost: seen.append(turn))
    with pytest.raises(MalformedResponsesExhausted) as caught:
        await model.request_turn(session, first_observation())
    assert len(session.sent) == 10
    assert len(seen) == 10
    assert caught.value.usage == TokenUsage(
        input_tokens=10_000, cached_input_tokens=5_000, output_tokens=500, reasoning_tokens=200
    )
    assert len(caught.value.billed.responses) == 10


@pytest.mark.parametrize("reason", ["refusal", "safety_check"])
async def test_a_refusal_or_a_safety_stop_ends_the_turn_at_once_and_is_billed(reason: str) -> None:
    stopped = ModelTurn(tool_use_id="r", action_input=None, malformed=f"the model stopped: {reason}",
                        stop_reason=reason, usage=TokenUsage(input_tokens=700, output_tokens=7))
    session = ScriptedSession([bad(0), stopped, ok(2)])
    model, sleeps = caller()
    with pytest.raises(ModelStopped) as caught:
        await model.request_turn(session, first_observation())
    assert caught.value.stop_reason == reason and f"the model stopped: {reason}" in str(caught.value)
    assert len(session.sent) == 2 and sleeps.delays == []  # never asked again
    assert caught.value.usage == TokenUsage(input_tokens=800, output_tokens=17)


async def test_other_stop_reasons_of_a_malformed_turn_are_asked_again() -> None:
    cut = ModelTurn(tool_use_id="c", action_input=None, malformed="cut off", stop_reason="max_tokens")
    session = ScriptedSession([cut, ok(1)])
    model, _ = caller()
    result = await model.request_turn(session, first_observation())
    assert result.turn.tool_use_id == "call-1" and len(session.sent) == 2


async def test_nine_malformed_then_valid_passes_with_feedback_and_full_usage() -> None:
    session = ScriptedSession([bad(i) for i in range(9)] + [ok(9)])
    pricer = functools.partial(cost_of, "gpt-5", prices=default_pricing())
    model, _ = caller(pricer=pricer)
    result = await model.request_turn(session, first_observation())
    assert result.turn.tool_use_id == "call-9"
    assert len(result.responses) == 10 and len(result.costs) == 10
    assert result.usage == TokenUsage(input_tokens=1_000, output_tokens=100)
    assert sum((c.total_usd for c in result.costs), Decimal(0)) == Decimal("0.00225")
    # Each malformed answer was fed back: same desktop, the failed call answered, next index.
    sent = [obs for obs, _ in session.sent]
    assert [obs.turn_index for obs in sent] == list(range(10))
    assert [obs.tool_use_id for obs in sent[1:]] == [f"bad-{i}" for i in range(9)]
    assert all(obs.frame == FRAME and "No action was executed" in obs.feedback for obs in sent[1:])
    assert result.observation == sent[-1]
    assert result.counters.malformed.consecutive == 0 and result.counters.malformed.lifetime == 9


async def test_provider_errors_do_not_reset_or_consume_the_malformed_streak() -> None:
    script: list[ModelTurn | ProviderRequestError] = []
    for i in range(10):
        script += [err(K.RATE_LIMITED, 429), err(K.SERVER_ERROR, 502), err(K.TRANSIENT, 408), bad(i)]
    session = ScriptedSession(script)
    model, _ = caller()
    with pytest.raises(MalformedResponsesExhausted):
        await model.request_turn(session, first_observation())
    assert model.counters.malformed.consecutive == 10
    assert model.counters.transient.consecutive == 0  # every malformed response reset it


async def test_rate_limits_between_transient_failures_neither_count_nor_reset_them() -> None:
    script: list[ModelTurn | ProviderRequestError] = [err(K.TRANSIENT, 408) for _ in range(9)]
    script += [err(K.RATE_LIMITED, 429) for _ in range(30)] + [err(K.SERVER_ERROR, 500) for _ in range(5)]
    script += [err(K.TRANSIENT, 408), ok()]
    session = ScriptedSession(script)
    model, _ = caller()
    with pytest.raises(TransientRetriesExhausted):
        await model.request_turn(session, first_observation())
    assert model.counters.rate_limited.lifetime == 30
    assert model.counters.transient.consecutive == 10


# -- 413 request too large -------------------------------------------------------------------


async def test_413_shrinks_then_retries_exactly_once_without_waiting() -> None:
    session = ScriptedSession([err(K.REQUEST_TOO_LARGE, 413), ok()])
    model, sleeps = caller()
    result = await model.request_turn(session, first_observation())
    assert session.shrinks == 1
    assert sleeps.delays == []
    assert [payload for _, payload in session.sent] == [1_000_000, 500_000]
    assert result.retries[0].shrunk and result.retries[0].delay_s == 0
    assert result.counters.shrinks == 1


async def test_413_that_cannot_shrink_fails_without_resending() -> None:
    session = ScriptedSession([err(K.REQUEST_TOO_LARGE, 413), ok()], shrink_results=[False])
    model, _ = caller()
    with pytest.raises(RequestTooLarge, match="cannot shrink"):
        await model.request_turn(session, first_observation())
    assert len(session.sent) == 1


async def test_413_again_after_shrinking_fails_and_never_resends_an_identical_payload() -> None:
    session = ScriptedSession([err(K.REQUEST_TOO_LARGE, 413), err(K.REQUEST_TOO_LARGE, 413), ok()])
    model, _ = caller()
    with pytest.raises(RequestTooLarge, match="still too large"):
        await model.request_turn(session, first_observation())
    assert len(session.sent) == 2
    payloads = [payload for _, payload in session.sent]
    assert len(set(payloads)) == len(payloads)
    assert session.shrinks == 1


async def test_fatal_errors_fail_immediately() -> None:
    session = ScriptedSession([err(K.FATAL, 401), ok()])
    model, sleeps = caller()
    with pytest.raises(FatalProviderError, match="401"):
        await model.request_turn(session, first_observation())
    assert len(session.sent) == 1 and sleeps.delays == []
    assert model.counters.fatal.lifetime == 1


async def test_other_exceptions_propagate_unchanged() -> None:
    model, _ = caller()
    with pytest.raises(ScriptExhausted):
        await model.request_turn(ScriptedSession([]), first_observation())


# -- counters persistence, hooks, stamina ----------------------------------------------------


async def test_counters_are_serializable_and_resume_where_they_stopped() -> None:
    script: list[ModelTurn | ProviderRequestError] = [err(K.TRANSIENT, 408) for _ in range(5)]
    session = ScriptedSession([*script, bad(), err(K.TRANSIENT, 408), ok()])
    model, _ = caller()
    await model.request_turn(session, first_observation())
    saved = model.counters.model_dump_json()
    restored = RetryCounters.model_validate_json(saved)
    assert restored == model.counters
    assert restored.transient.lifetime == 6 and restored.malformed.lifetime == 1
    assert restored.responses == 2
    # A resumed caller keeps counting lifetime totals.
    session = ScriptedSession([err(K.TRANSIENT, 408), ok()])
    result = await request_turn(session, first_observation(), policy=NO_JITTER, counters=restored, sleep=Sleeps())
    assert result.counters.transient.lifetime == 7


async def test_on_retry_sees_every_scheduled_retry() -> None:
    events: list[RetryEvent] = []
    session = ScriptedSession(
        [err(K.RATE_LIMITED, 429, 5), err(K.SERVER_ERROR, 503), err(K.REQUEST_TOO_LARGE, 413), ok()]
    )
    model, _ = caller(on_retry=events.append)
    await model.request_turn(session, first_observation())
    assert [(e.kind, e.status, e.streak, e.delay_s) for e in events] == [
        (K.RATE_LIMITED, 429, 1, 5),
        (K.SERVER_ERROR, 503, 1, 1),
        (K.REQUEST_TOO_LARGE, 413, 1, 0),
    ]


async def test_retries_are_reported_to_stamina_instrumentation() -> None:
    seen: list[stamina.instrumentation.RetryDetails] = []
    entered: list[str] = []

    @contextlib.contextmanager
    def span() -> Iterator[None]:
        entered.append("enter")
        yield
        entered.append("exit")

    def hook(details: stamina.instrumentation.RetryDetails) -> contextlib.AbstractContextManager[None] | None:
        seen.append(details)
        return span()

    stamina.instrumentation.set_on_retry_hooks([hook])
    try:
        sleeps = Sleeps()
        model = ModelCaller(NO_JITTER, sleep=sleeps)
        await model.request_turn(
            ScriptedSession([err(K.SERVER_ERROR, 500), err(K.SERVER_ERROR, 500), ok()]), first_observation()
        )
    finally:
        stamina.instrumentation.set_on_retry_hooks(None)
    assert [(d.name, d.retry_num, d.wait_for, d.waited_so_far) for d in seen] == [
        ("autocad_bench.model_request.server_error", 1, 1, 0),
        ("autocad_bench.model_request.server_error", 2, 2, 1),
    ]
    assert isinstance(seen[0].caused_by, ProviderRequestError)
    assert entered == ["enter", "exit", "enter", "exit"]


async def test_default_sleep_is_skipped_in_stamina_test_mode() -> None:
    with stamina.set_testing(True):
        # Would hang the test for an hour if it really slept.
        await asyncio.wait_for(default_sleep(3600), timeout=1)
        session = ScriptedSession([err(K.RATE_LIMITED, 429, retry_after=3600), ok()])
        await ModelCaller(NO_JITTER, instrument=False).request_turn(session, first_observation())


# -- budget integration ----------------------------------------------------------------------


def gpt5_pricer() -> functools.partial[Any]:
    return functools.partial(cost_of, "gpt-5", prices=default_pricing())


async def test_budget_counts_every_response_and_stops_the_malformed_loop_at_the_cap() -> None:
    tracker = BudgetTracker(RolloutBudget(max_cost_usd=Decimal("0.03")))
    expensive = TokenUsage(output_tokens=1_000)  # $0.01 each on gpt-5
    session = ScriptedSession([bad(i, expensive) for i in range(8)] + [ok()])
    model, _ = caller(budget=tracker, pricer=gpt5_pricer())
    with pytest.raises(BudgetStopped) as caught:
        await model.request_turn(session, first_observation())
    assert caught.value.reason is StopReason.COST
    assert len(session.sent) == 3  # the call after the cap was never made
    assert caught.value.usage == TokenUsage(output_tokens=3_000)
    assert tracker.cost_usd == Decimal("0.03")
    assert tracker.turns == 3


async def test_a_429_storm_ends_at_the_duration_cap() -> None:
    now = [0.0]
    tracker = BudgetTracker(RolloutBudget(max_duration_s=100), clock=lambda: now[0])

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    model = ModelCaller(NO_JITTER, sleep=sleep, budget=tracker, pricer=gpt5_pricer(), instrument=False)
    session = ScriptedSession([err(K.RATE_LIMITED, 429) for _ in range(1_000)])
    with pytest.raises(BudgetStopped) as caught:
        await model.request_turn(session, first_observation())
    assert caught.value.reason is StopReason.DURATION
    assert now[0] == 100  # the last wait was cut to the time left
    assert tracker.turns == 1  # retries of one unconsumed turn are not new turns


async def test_budget_requires_a_pricer() -> None:
    with pytest.raises(ValueError, match="pricer"):
        ModelCaller(budget=BudgetTracker())


async def test_a_turn_that_reaches_the_cap_is_returned_and_flagged() -> None:
    tracker = BudgetTracker(RolloutBudget(max_cost_usd=Decimal("0.01")))
    model, _ = caller(budget=tracker, pricer=gpt5_pricer())
    result = await model.request_turn(ScriptedSession([ok(usage=TokenUsage(output_tokens=1_000))]), first_observation())
    assert result.budget_stop is StopReason.COST
    with pytest.raises(BudgetStopped):
        await model.request_turn(ScriptedSession([ok()]), first_observation())


# -- property: the counters behave like the written rules, independently ----------------------

EVENTS = ("429", "5xx", "408", "413+", "413-", "ok", "bad", "fatal")


def reference(events: list[str], policy: RetryPolicy) -> tuple[list[str], int, list[float]]:
    """The contract written as plainly as possible: outcomes, requests consumed, delays."""
    streak = {"429": 0, "5xx": 0, "408": 0, "413": 0}
    malformed = 0
    outcomes: list[str] = []
    delays: list[float] = []
    for consumed, event in enumerate(events, start=1):
        if event == "fatal":
            return [*outcomes, "fatal"], consumed, delays
        if event in ("429", "5xx", "408"):
            streak[event] += 1
            if event == "408" and streak["408"] >= policy.max_consecutive_transient:
                return [*outcomes, "transient"], consumed, delays
            delays.append(min(policy.backoff_cap_s, 2.0 ** (streak[event] - 1)))
            continue
        if event.startswith("413"):
            streak["413"] += 1
            if streak["413"] > policy.max_shrink_retries or event == "413-":
                return [*outcomes, "too_large"], consumed, delays
            continue
        streak = dict.fromkeys(streak, 0)  # any actual response
        if event == "ok":
            malformed = 0
            outcomes.append("turn")
        else:
            malformed += 1
            if malformed >= policy.max_consecutive_malformed:
                return [*outcomes, "malformed"], consumed, delays
    return [*outcomes, "exhausted"], len(events), delays


async def run_caller(events: list[str], policy: RetryPolicy) -> tuple[list[str], int, list[float]]:
    script: list[ModelTurn | ProviderRequestError] = []
    shrinks: list[bool] = []
    for i, event in enumerate(events):
        if event == "429":
            script.append(err(K.RATE_LIMITED, 429))
        elif event == "5xx":
            script.append(err(K.SERVER_ERROR, 503))
        elif event == "408":
            script.append(err(K.TRANSIENT, 408))
        elif event.startswith("413"):
            script.append(err(K.REQUEST_TOO_LARGE, 413))
            shrinks.append(event == "413+")
        elif event == "fatal":
            script.append(err(K.FATAL, 400))
        elif event == "ok":
            script.append(ok(i))
        else:
            script.append(bad(i))
    session = ScriptedSession(script, shrink_results=shrinks)
    sleeps = Sleeps()
    model = ModelCaller(policy, sleep=sleeps, instrument=False)
    outcomes: list[str] = []
    names: dict[type[ModelCallError], str] = {
        TransientRetriesExhausted: "transient",
        MalformedResponsesExhausted: "malformed",
        RequestTooLarge: "too_large",
        FatalProviderError: "fatal",
    }
    while True:
        try:
            await model.request_turn(session, first_observation())
        except ScriptExhausted:
            return [*outcomes, "exhausted"], len(session.sent) - 1, sleeps.delays
        except ModelCallError as exc:
            return [*outcomes, names[type(exc)]], len(session.sent), sleeps.delays
        outcomes.append("turn")


runs = st.lists(
    st.tuples(st.sampled_from(EVENTS), st.integers(min_value=1, max_value=12)),
    max_size=25,
).map(lambda pairs: [event for event, repeat in pairs for _ in range(repeat)])


@settings(max_examples=400, deadline=None)
@given(events=runs, shrink_retries=st.integers(min_value=0, max_value=2))
def test_counters_match_the_reference_rules(events: list[str], shrink_retries: int) -> None:
    policy = RetryPolicy(jitter=0, max_shrink_retries=shrink_retries)
    assert asyncio.run(run_caller(events, policy)) == reference(events, policy)

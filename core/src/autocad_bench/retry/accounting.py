"""Retry counters of one rollout: current streaks and lifetime totals, per kind.

The counters are independent by contract: a rate limit neither adds to nor resets the
transient streak, a malformed response does not touch the transient streak except as
"a response arrived", and so on. The transitions are pure functions on an immutable model,
so the state written to the run state and trace is always a consistent snapshot.

Transitions:

* a provider error of kind K increments K's streak and lifetime total, nothing else;
* any actual response (well-formed or not) resets the streaks of every error kind;
* a well-formed response resets the malformed streak; a malformed one increments it.
"""

from __future__ import annotations

from pydantic import Field

from autocad_bench.models import StrictModel
from autocad_bench.providers.models import ProviderErrorKind


class StreakCounter(StrictModel):
    """``consecutive`` failures of one kind since the last reset, and the ``lifetime`` total."""

    consecutive: int = Field(default=0, ge=0)
    lifetime: int = Field(default=0, ge=0)

    def bump(self) -> StreakCounter:
        return StreakCounter(consecutive=self.consecutive + 1, lifetime=self.lifetime + 1)

    def reset(self) -> StreakCounter:
        if self.consecutive == 0:
            return self
        return StreakCounter(consecutive=0, lifetime=self.lifetime)


class RetryCounters(StrictModel):
    """Serializable retry accounting of one rollout (kept across attempts on resume).

    ``responses`` counts actual provider responses, ``shrinks`` successful request rewrites
    after a 413, ``backoff_s`` the total time spent waiting before retries.
    """

    rate_limited: StreakCounter = Field(default_factory=StreakCounter)
    server_error: StreakCounter = Field(default_factory=StreakCounter)
    transient: StreakCounter = Field(default_factory=StreakCounter)
    request_too_large: StreakCounter = Field(default_factory=StreakCounter)
    fatal: StreakCounter = Field(default_factory=StreakCounter)
    malformed: StreakCounter = Field(default_factory=StreakCounter)
    responses: int = Field(default=0, ge=0)
    shrinks: int = Field(default=0, ge=0)
    backoff_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    def for_kind(self, kind: ProviderErrorKind) -> StreakCounter:
        """The counter of one provider error kind."""
        return getattr(self, _FIELD[kind])  # type: ignore[no-any-return]

    def after_error(self, kind: ProviderErrorKind) -> RetryCounters:
        """Counters after one failed request of ``kind`` (only that kind changes)."""
        field = _FIELD[kind]
        return self.model_copy(update={field: self.for_kind(kind).bump()})

    def after_response(self, *, well_formed: bool) -> RetryCounters:
        """Counters after an actual provider response."""
        update: dict[str, object] = {field: getattr(self, field).reset() for field in _FIELD.values()}
        update["malformed"] = self.malformed.reset() if well_formed else self.malformed.bump()
        update["responses"] = self.responses + 1
        return self.model_copy(update=update)

    def after_shrink(self) -> RetryCounters:
        return self.model_copy(update={"shrinks": self.shrinks + 1})

    def after_backoff(self, seconds: float) -> RetryCounters:
        return self.model_copy(update={"backoff_s": self.backoff_s + seconds})


_FIELD: dict[ProviderErrorKind, str] = {
    ProviderErrorKind.RATE_LIMITED: "rate_limited",
    ProviderErrorKind.SERVER_ERROR: "server_error",
    ProviderErrorKind.TRANSIENT: "transient",
    ProviderErrorKind.REQUEST_TOO_LARGE: "request_too_large",
    ProviderErrorKind.FATAL: "fatal",
}

"""The retry policy for model requests and its backoff arithmetic.

The numbers of the shared retry contract live here, in one place:

=====================  =====================================================================
kind                   rule
=====================  =====================================================================
rate limited (429)     retried forever; exponential backoff capped at ``backoff_cap_s``, but a
                       longer ``retry-after`` is honoured (up to ``max_retry_after_s``)
server error (5xx)     retried forever; backoff (and any ``retry-after``) capped at
                       ``backoff_cap_s``
transient (408/409,    retried with the same backoff; the ``max_consecutive_transient``-th
connection, read)      failure in a row fails the rollout
request too large      retried immediately only after the session shrank the request;
(413)                  at most ``max_shrink_retries`` times in a row
malformed response     fed back to the model; the ``max_consecutive_malformed``-th in a row
                       fails the rollout
fatal                  fails at once
=====================  =====================================================================
"""

from __future__ import annotations

import math
import random

from pydantic import Field

from autocad_bench.models import StrictModel
from autocad_bench.providers.models import ProviderErrorKind


class RetryPolicy(StrictModel):
    """Tunable limits of the model-request retry contract (defaults are the contract)."""

    backoff_initial_s: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    backoff_multiplier: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    backoff_cap_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    jitter: float = Field(default=0.25, ge=0, lt=1, allow_inf_nan=False)
    """Fraction of each backoff removed at random, spreading out hundreds of rollouts that
    were throttled together. Jitter only shortens a delay, so the cap always holds."""
    max_retry_after_s: float = Field(default=900.0, gt=0, allow_inf_nan=False)
    """Ceiling on an honoured 429 ``retry-after``: a bogus header cannot park a rollout for
    hours (the rollout's duration budget still applies on top)."""
    max_consecutive_transient: int = Field(default=10, ge=1)
    max_consecutive_malformed: int = Field(default=10, ge=1)
    max_shrink_retries: int = Field(default=1, ge=0)


def exponential_backoff(policy: RetryPolicy, streak: int) -> float:
    """Jitter-free backoff after the ``streak``-th consecutive failure of one kind (1-based)."""
    if streak < 1:
        raise ValueError(f"streak must be >= 1, got {streak}")
    try:
        raw = policy.backoff_initial_s * policy.backoff_multiplier ** (streak - 1)
    except OverflowError:
        return policy.backoff_cap_s
    return min(policy.backoff_cap_s, raw)


def retry_delay(
    policy: RetryPolicy,
    kind: ProviderErrorKind,
    streak: int,
    retry_after_s: float | None,
    rng: random.Random,
) -> float:
    """Seconds to wait before retrying after the ``streak``-th consecutive ``kind`` failure.

    Rate limits honour a longer ``retry_after_s`` (bounded by ``max_retry_after_s``); server
    and transient errors honour it only up to ``backoff_cap_s``. A missing, negative or
    non-finite ``retry_after_s`` is ignored. Raises :class:`ValueError` for kinds that are
    not retried after a wait (413, fatal).
    """
    if kind not in (
        ProviderErrorKind.RATE_LIMITED,
        ProviderErrorKind.SERVER_ERROR,
        ProviderErrorKind.TRANSIENT,
    ):
        raise ValueError(f"{kind.value} errors are not retried after a backoff")
    backoff = exponential_backoff(policy, streak)
    if policy.jitter:
        backoff *= 1.0 - policy.jitter * rng.random()
    hint = retry_after_s if retry_after_s is not None and math.isfinite(retry_after_s) else None
    if hint is None or hint <= 0:
        return backoff
    ceiling = policy.max_retry_after_s if kind is ProviderErrorKind.RATE_LIMITED else policy.backoff_cap_s
    return max(backoff, min(hint, ceiling))

"""Retry accounting for model requests, shared by every provider.

Providers make exactly one request per :meth:`ProviderSession.next_turn` call and classify
failures; :class:`ModelCaller` decides whether, when and how often to try again.
"""

from autocad_bench.retry.accounting import RetryCounters, StreakCounter
from autocad_bench.retry.caller import (
    Billed,
    BudgetStopped,
    FatalProviderError,
    MalformedResponsesExhausted,
    ModelCaller,
    ModelCallError,
    ModelStopped,
    RequestTooLarge,
    RetryEvent,
    TransientRetriesExhausted,
    TurnResult,
    default_sleep,
    is_well_formed,
    malformed_feedback,
    native_malformed_feedback,
    request_turn,
)
from autocad_bench.retry.policy import RetryPolicy, exponential_backoff, retry_delay

__all__ = [
    "Billed",
    "BudgetStopped",
    "FatalProviderError",
    "MalformedResponsesExhausted",
    "ModelCallError",
    "ModelCaller",
    "ModelStopped",
    "RequestTooLarge",
    "RetryCounters",
    "RetryEvent",
    "RetryPolicy",
    "StreakCounter",
    "TransientRetriesExhausted",
    "TurnResult",
    "default_sleep",
    "exponential_backoff",
    "is_well_formed",
    "malformed_feedback",
    "native_malformed_feedback",
    "request_turn",
    "retry_delay",
]

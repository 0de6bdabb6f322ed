"""Deliberately broken providers: each breaks one rule the provider kit enforces.

All of them are the shipped ``openai`` provider (so they talk to a real
:class:`~autocad_bench.testing.wire.ResponsesWire` through the real SDK) with one fault
planted, mostly by wrapping its session. The meta-tests run the provider kit against each
one and expect a failure naming the rule.
"""

from __future__ import annotations

from typing import Any

from autocad_bench.errors import Problem
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import (
    Credentials,
    ModelSpec,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry.caller import is_well_formed
from autocad_bench_openai.provider import OpenaiProvider


class FaultySession(ProviderSession):
    """Delegates to a working session; ``provider`` rewrites its turns and errors."""

    def __init__(self, inner: ProviderSession, provider: SessionFault) -> None:
        self._inner = inner
        self._provider = provider

    async def next_turn(self, observation: Observation) -> ModelTurn:
        try:
            turn = await self._inner.next_turn(observation)
        except ProviderRequestError as error:
            raise self._provider.rewrite_error(error) from None
        return self._provider.rewrite_turn(turn)

    def shrink(self) -> bool:
        return self._inner.shrink()

    def checkpoint(self) -> JsonObject:
        return self._inner.checkpoint()

    async def aclose(self) -> None:
        await self._inner.aclose()


class SessionFault(OpenaiProvider):
    """The openai provider whose session goes through :meth:`rewrite_turn` / :meth:`rewrite_error`."""

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        return FaultySession(super().open_session(request, credentials), self)

    def rewrite_turn(self, turn: ModelTurn) -> ModelTurn:
        return turn

    def rewrite_error(self, error: ProviderRequestError) -> ProviderRequestError:
        return error


def _reclassified(error: ProviderRequestError, kind: ProviderErrorKind) -> ProviderRequestError:
    return ProviderRequestError(kind, str(error), status=error.status, retry_after_s=error.retry_after_s)


class WrongToolSchema(OpenaiProvider):
    """tool-schema: sends a computer_action schema that is not the declared one (no array bound)."""

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        schema: dict[str, Any] = {**request.action_schema}
        properties = dict(schema["properties"])
        properties["actions"] = {**properties["actions"], "description": "Anything goes."}
        schema["properties"] = properties
        return super().open_session(request.model_copy(update={"action_schema": schema}), credentials)


class RateLimitIsFatal(SessionFault):
    """retry-classification: a 429 fails the rollout instead of waiting."""

    def rewrite_error(self, error: ProviderRequestError) -> ProviderRequestError:
        return _reclassified(error, ProviderErrorKind.FATAL) if error.status == 429 else error


class UnauthorizedIsRetried(SessionFault):
    """retry-classification: a 401 is retried as transient instead of failing at once."""

    def rewrite_error(self, error: ProviderRequestError) -> ProviderRequestError:
        return _reclassified(error, ProviderErrorKind.TRANSIENT) if error.status == 401 else error


class TimeoutIsFatal(SessionFault):
    """retry-classification: a client timeout fails the rollout."""

    def rewrite_error(self, error: ProviderRequestError) -> ProviderRequestError:
        return _reclassified(error, ProviderErrorKind.FATAL) if "timed out" in str(error) else error


class CostCountedTwice(SessionFault):
    """cost-accounting: every response reports its usage twice."""

    def rewrite_turn(self, turn: ModelTurn) -> ModelTurn:
        return turn.model_copy(update={"usage": turn.usage + turn.usage})


class CostNotCounted(SessionFault):
    """cost-accounting: responses report no usage at all."""

    def rewrite_turn(self, turn: ModelTurn) -> ModelTurn:
        return turn.model_copy(update={"usage": TokenUsage()})


class ReasoningAddedToOutput(SessionFault):
    """cost-accounting: reasoning tokens added to output tokens (charged twice)."""

    def rewrite_turn(self, turn: ModelTurn) -> ModelTurn:
        usage = turn.usage.model_copy(update={"output_tokens": turn.usage.output_tokens + turn.usage.reasoning_tokens})
        return turn.model_copy(update={"usage": usage})


class ExtraOptionsAccepted(OpenaiProvider):
    """options-validation: unknown provider_options are dropped silently instead of reported."""

    def validate_model_spec(self, model: ModelSpec, location: str) -> list[Problem]:
        known = {k: v for k, v in model.options.items() if k in self.options_model.model_fields}
        return super().validate_model_spec(model.model_copy(update={"options": known}), location)


class RefusalBecomesEmptyActions(SessionFault):
    """refusal-and-malformed-output: a response without a usable call becomes ``{"actions": []}``."""

    def rewrite_turn(self, turn: ModelTurn) -> ModelTurn:
        if is_well_formed(turn):
            return turn
        return turn.model_copy(update={"action_input": {"actions": []}, "malformed": None})


class MalformedOutputRaises(SessionFault):
    """refusal-and-malformed-output: malformed arguments raise instead of becoming a turn."""

    def rewrite_turn(self, turn: ModelTurn) -> ModelTurn:
        if turn.malformed is not None:
            raise ValueError(f"cannot parse the computer_action arguments: {turn.malformed}")
        return turn



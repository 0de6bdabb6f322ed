"""The ``mantle`` model provider: Amazon Bedrock's OpenAI-compatible endpoint, SigV4-signed.

``moonshotai.kimi-k2.5`` (profile ``mantle-kimi-k2.5-chat``) uses Chat Completions with
strict client-side tools, multimodal user messages and an append-only history compacted
at 24 messages or before 3 MiB; other models use Responses when their catalog entry
advertises it. Credentials come from the standard AWS chain; see
``docs/providers-chat-and-aws.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from autocad_bench.errors import Problem
from autocad_bench.models import JsonObject
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import (
    CatalogEntry,
    Credentials,
    ModelSpec,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.aws_chain import AWS_CHAIN_ENV

from .options import PINNED_MODEL, MantleOptions, model_problems, parse_options

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from autocad_bench.providers.chat.session import HistorySession


class MantleProvider(ModelProvider):
    """AWS Bedrock Mantle: Chat Completions (Kimi K2.5) or Responses, signed with SigV4."""

    name: ClassVar[str] = "mantle"
    credential_env: ClassVar[tuple[str, ...]] = ()
    """None: the AWS standard chain (profile, SSO, roles) supplies credentials, so ``credential_names`` is empty."""
    optional_env: ClassVar[tuple[str, ...]] = AWS_CHAIN_ENV
    """The chain's variables that are set are handed to every rollout (subprocess mode included)."""
    pinned_models: ClassVar[tuple[str, ...]] = (PINNED_MODEL,)
    """Checked by ``autocad-bench-models`` when no configuration or model is named."""
    catalog_region_option: ClassVar[str] = "region"
    catalog_profile_option: ClassVar[str] = "aws_profile"
    options_model: ClassVar[type[MantleOptions]] = MantleOptions

    def check_options(self, model: ModelSpec, options: MantleOptions, location: str) -> list[Problem]:
        """The pinned profile pins its model id; chat-only models refuse ``api: responses``."""
        return model_problems(model, options, location)

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        from .catalog import check_catalog

        return check_catalog(self.name, models)

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        import httpx
        from openai import AsyncOpenAI

        from autocad_bench.providers.chat.session import session_key

        from .catalog import SIGV4_PLACEHOLDER_KEY, resolve_region
        from .options import base_url
        from .sigv4 import AwsCredentialSource, MantleSigV4Auth

        options = parse_options(request.model)
        source = AwsCredentialSource(options.aws_profile)
        region = resolve_region(options, source)
        http = httpx.AsyncClient(auth=MantleSigV4Auth(source, region), timeout=options.timeout_s)
        client = AsyncOpenAI(api_key=SIGV4_PLACEHOLDER_KEY, base_url=base_url(options, region), max_retries=0,
                             timeout=options.timeout_s, http_client=cast(Any, http))
        state = request.resume_state if isinstance(request.resume_state, dict) else None
        key = str(state["session_key"]) if state and isinstance(state.get("session_key"), str) else (
            session_key(request))
        model = request.model.model
        configured = options.resolved_api(model)

        def make(api: Literal["chat", "responses"], resume: JsonObject | None) -> HistorySession:
            return _session(request.model_copy(update={"resume_state": resume}), api, key, client)

        if configured != "auto":
            return make(configured, state)
        saved = state.get("api") if state else None
        api: Literal["chat", "responses"] | None = "chat" if saved == "chat" else (
            "responses" if saved == "responses" else None)
        inner = make(api, state) if api is not None else None
        return AutoApiSession(model, client, make, inner, api)


def _session(request: SessionRequest, api: Literal["chat", "responses"], key: str,
             client: AsyncOpenAI) -> HistorySession:
    from autocad_bench.providers.chat.history import HistoryLimits
    from autocad_bench.providers.chat.session import ChatCompletionsSession, SessionSettings

    options = parse_options(request.model)
    model = request.model.model
    settings = SessionSettings(
        provider="mantle",
        profile=options.profile_name(model),
        model=model,
        max_tokens=options.max_tokens,
        limits=HistoryLimits.of(options),
        strict_tools=options.strict(api, model),
        temperature=options.temperature,
        header_prefixes=("x-amzn-bedrock-", "x-ratelimit-"),
        header_names=frozenset({"retry-after", "retry-after-ms", "x-amzn-requestid", "x-request-id"}),
        telemetry=options.telemetry,
    )
    if api == "responses":
        from .responses import ResponsesSession

        return ResponsesSession(request, settings, key, client)
    return ChatCompletionsSession(request, settings, key, client)


class AutoApiSession(ProviderSession):
    """Chooses Chat or Responses from the signed catalog on the first turn, then delegates.

    The choice is part of the checkpoint, so a resumed rollout never re-decides it.
    """

    def __init__(
        self,
        model: str,
        client: AsyncOpenAI,
        make: Callable[[Literal["chat", "responses"], JsonObject | None], HistorySession],
        inner: HistorySession | None,
        api: Literal["chat", "responses"] | None,
    ) -> None:
        self._model = model
        self._client = client
        self._make = make
        self.inner = inner
        self.api = api

    async def next_turn(self, observation: Observation) -> ModelTurn:
        if self.inner is None:
            self.api = await self._resolve()
            self.inner = self._make(self.api, None)
        return await self.inner.next_turn(observation)

    async def _resolve(self) -> Literal["chat", "responses"]:
        import openai

        from autocad_bench.providers.chat.session import failure

        from .catalog import advertises_responses

        try:
            page = await self._client.models.list()
        except openai.APIError as exc:
            raise failure(exc) from None
        entry = next((m.to_dict() for m in page.data if m.id == self._model), None)
        if entry is None:
            raise ProviderRequestError(ProviderErrorKind.FATAL, f"{self._model} is not in the Mantle catalog")
        return "responses" if advertises_responses(entry) else "chat"

    def shrink(self) -> bool:
        return self.inner.shrink() if self.inner is not None else False

    def checkpoint(self) -> JsonObject:
        if self.inner is None:
            return {"api": None}
        return {**self.inner.checkpoint(), "api": self.api}

    async def aclose(self) -> None:
        await self._client.close()

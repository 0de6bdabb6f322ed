"""The ``fireworks`` model provider: Kimi through Fireworks' OpenAI-compatible Chat Completions.

The pinned profile ``fireworks-kimi-k2p6-fast-chat`` runs the Fast router
``accounts/fireworks/routers/kimi-k2p6-fast`` with a 1,024-token thinking budget inside a
2,048-token output ceiling, returned ``reasoning_content`` echoed with its tool call, and
rollout-stable ``x-session-affinity`` / ``x-multi-turn-session-id`` headers and
``prompt_cache_key`` so the append-only prefix stays on one replica's cache. See
``docs/providers-chat-and-aws.md``.
"""

from __future__ import annotations

from typing import ClassVar

from autocad_bench.errors import Problem
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession

from .options import PINNED_MODEL, FireworksOptions, parse_options, profile_problems

API_KEY_ENV = "FIREWORKS_API_KEY"


class FireworksProvider(ModelProvider):
    """Fireworks Chat Completions with an append-only, compacting history."""

    name: ClassVar[str] = "fireworks"
    credential_env: ClassVar[tuple[str, ...]] = (API_KEY_ENV,)
    pinned_models: ClassVar[tuple[str, ...]] = (PINNED_MODEL,)
    """Checked by ``autocad-bench-models`` when no configuration or model is named."""
    options_model: ClassVar[type[FireworksOptions]] = FireworksOptions

    def check_options(self, model: ModelSpec, options: FireworksOptions, location: str) -> list[Problem]:
        """The pinned profile pins its model id."""
        return profile_problems(model, options, location)

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        from .catalog import check_catalog

        return check_catalog(self.name, models, credentials.get(API_KEY_ENV))

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        from openai import AsyncOpenAI

        from autocad_bench.providers.chat.history import HistoryLimits
        from autocad_bench.providers.chat.session import ChatCompletionsSession, SessionSettings, session_key

        key_value = credentials.get(API_KEY_ENV)
        if not key_value:
            raise ValueError(f"{API_KEY_ENV} is not set")
        options = parse_options(request.model)
        model = request.model.model
        key = session_key(request)
        if isinstance(request.resume_state, dict) and isinstance(request.resume_state.get("session_key"), str):
            key = str(request.resume_state["session_key"])
        headers = {"x-session-affinity": key, "x-multi-turn-session-id": key} if options.session_affinity else {}
        budget = options.thinking_budget(model)
        settings = SessionSettings(
            provider=self.name,
            profile=options.profile_name(model),
            model=model,
            max_tokens=options.max_tokens,
            limits=HistoryLimits.of(options),
            strict_tools=options.strict_tools,
            temperature=options.temperature,
            reasoning_effort=options.reasoning_effort,
            prompt_cache_key=key if options.prompt_cache_key else None,
            extra_body={"thinking": {"type": "enabled", "budget_tokens": budget}} if budget else {},
            header_prefixes=("fireworks-", "x-ratelimit-", "ratelimit-"),
            header_names=frozenset({"retry-after", "retry-after-ms", "x-request-id", "server-timing"}),
            cached_tokens_header="fireworks-cached-prompt-tokens",
            telemetry=options.telemetry,
        )
        client = AsyncOpenAI(
            api_key=key_value,
            base_url=options.base_url,
            max_retries=0,
            timeout=options.timeout_s,
            default_headers=headers,
        )
        return ChatCompletionsSession(request, settings, key, client)

"""The ``anthropic`` model provider: Claude through the official Messages SDK.

Select it with ``"provider": "anthropic"`` and a Claude model id; it reads
``ANTHROPIC_API_KEY``. See ``docs/providers-anthropic.md`` for options, caching and
compaction. The SDK is imported inside the hooks, never at module import.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ValidationError

from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench_anthropic.options import COMPACTION_EDIT, CREDENTIAL_ENV, AnthropicOptions
from autocad_bench_anthropic.session import AnthropicSession

_REASON_LIMIT = 300


class AnthropicProvider(ModelProvider):
    """Claude models through the Anthropic Messages API."""

    name: ClassVar[str] = "anthropic"
    credential_env: ClassVar[tuple[str, ...]] = (CREDENTIAL_ENV,)
    options_model: ClassVar[type[AnthropicOptions]] = AnthropicOptions
    tool_modes: ClassVar[frozenset[str]] = frozenset({"function", "native"})

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Look each id up with ``GET /v1/models/{id}`` (read-only, SDK retries off)."""
        key = credentials.get(CREDENTIAL_ENV)
        if not key:
            return [CatalogEntry(provider=self.name, model=m.model, available=False,
                                 reason=f"not checked: {CREDENTIAL_ENV} is not set") for m in models]
        import anthropic

        entries: list[CatalogEntry] = []
        clients: dict[str, anthropic.Anthropic] = {}
        try:
            for spec in models:
                try:
                    options = AnthropicOptions.model_validate(spec.options)
                except ValidationError:
                    entries.append(CatalogEntry(provider=self.name, model=spec.model, available=False,
                                                reason="invalid provider_options"))
                    continue
                client = clients.get(options.base_url)
                if client is None:
                    client = anthropic.Anthropic(api_key=key, base_url=options.base_url, max_retries=0,
                                                 timeout=30.0)
                    clients[options.base_url] = client
                entries.append(self._catalog_entry(client, spec, options))
        finally:
            for client in clients.values():
                client.close()
        return entries

    def _catalog_entry(self, client: Any, spec: ModelSpec, options: AnthropicOptions) -> CatalogEntry:
        import anthropic

        try:
            info = client.models.retrieve(spec.model)
        except anthropic.NotFoundError:
            return CatalogEntry(provider=self.name, model=spec.model, available=False,
                                reason="not in the Anthropic model catalog")
        except anthropic.APIStatusError as error:
            return CatalogEntry(provider=self.name, model=spec.model, available=False,
                                reason=f"catalog lookup failed: HTTP {error.status_code}")
        except anthropic.APIConnectionError as error:
            return CatalogEntry(provider=self.name, model=spec.model, available=False,
                                reason=f"catalog lookup failed: {type(error).__name__}")
        capabilities = getattr(info, "capabilities", None)
        image_input = _supported(getattr(capabilities, "image_input", None))
        reasons = []
        if getattr(info, "lifecycle", "active") == "retired":
            return CatalogEntry(provider=self.name, model=spec.model, available=False, image_input=image_input,
                                reason="the model is retired")
        if image_input is False:
            return CatalogEntry(provider=self.name, model=spec.model, available=False, image_input=False,
                                reason="the model does not accept image input")
        mode = options.compaction_mode(spec.model)
        if mode == "server":
            context = getattr(capabilities, "context_management", None)
            compact = _supported(getattr(context, COMPACTION_EDIT, None))
            if compact is False:
                return CatalogEntry(
                    provider=self.name, model=spec.model, available=False, image_input=image_input,
                    reason=f"the model does not support {COMPACTION_EDIT}; set server_compaction to false "
                    "or list it in client_compaction_models")
            if compact is None:
                reasons.append(f"{COMPACTION_EDIT} support not reported")
        structured = _supported(getattr(capabilities, "structured_outputs", None))
        if structured is False:
            reasons.append("the catalog reports no strict tool support")
        if getattr(info, "lifecycle", "active") == "deprecated":
            reasons.append("the model is deprecated")
        reasons.insert(0, f"available ({mode} compaction)")
        return CatalogEntry(provider=self.name, model=spec.model, available=True, image_input=image_input,
                            reason="; ".join(reasons)[:_REASON_LIMIT])

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        options = AnthropicOptions.model_validate(request.model.options)
        if request.model.tool_mode == "native":
            from autocad_bench_anthropic.native.session import NativeAnthropicSession, computer_tool_version

            version = options.computer_tool or computer_tool_version(request.model.model)
            return NativeAnthropicSession(request, options, credentials.get(CREDENTIAL_ENV), tool_version=version,
                                          history_turns=options.native_history_turns)
        return AnthropicSession(request, options, credentials.get(CREDENTIAL_ENV))


def _supported(capability: Any) -> bool | None:
    value = getattr(capability, "supported", None)
    return value if isinstance(value, bool) else None

"""The ``openrouter`` model provider: OpenRouter's Responses endpoint through the OpenAI SDK.

Credential: ``OPENROUTER_API_KEY``. Options:
:class:`~autocad_bench_openrouter.options.OpenrouterOptions`. The SDK is imported only
when a session or a catalog check needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from autocad_bench.errors import Problem
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.catalog import base_url_or_default, check_per_base_url, not_checked
from autocad_bench_openrouter.options import DEFAULT_BASE_URL, OpenrouterOptions
from autocad_bench_openrouter.session import CREDENTIAL, OpenrouterSession

if TYPE_CHECKING:
    import openai

CATALOG_TIMEOUT_S = 30.0


class OpenrouterProvider(ModelProvider):
    """OpenRouter Responses API with an append-only history and a strict, forced tool."""

    name: ClassVar[str] = "openrouter"
    credential_env: ClassVar[tuple[str, ...]] = (CREDENTIAL,)
    options_model: ClassVar[type[OpenrouterOptions]] = OpenrouterOptions

    def __repr__(self) -> str:
        return "OpenrouterProvider()"

    def validate_model_spec(self, model: ModelSpec, location: str) -> list[Problem]:
        """The base checks (id, :attr:`options_model`), after the ``vendor/model`` id check."""
        problems = super().validate_model_spec(model, location)
        if isinstance(model.model, str) and model.model.strip() and "/" not in model.model:
            problems.insert(0, Problem(f"{location}.model",
                                       "OpenRouter model ids are 'vendor/model' (e.g. 'anthropic/claude-sonnet-4.5')"))
        return problems

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Look the ids up in ``GET /models`` (read-only) when the key is set."""
        if CREDENTIAL not in credentials:
            return not_checked(self.name, models, f"{CREDENTIAL} is not set")
        import openai as sdk

        def check(base: str, specs: list[ModelSpec]) -> list[CatalogEntry]:
            with sdk.OpenAI(api_key=credentials[CREDENTIAL], base_url=base, max_retries=0,
                            timeout=CATALOG_TIMEOUT_S) as client:
                catalog = self._catalog(client)
                return [self._entry(spec.model, catalog) for spec in specs]

        return check_per_base_url(models, lambda spec: base_url_or_default(spec, _parse, DEFAULT_BASE_URL), check)

    @staticmethod
    def _catalog(client: openai.OpenAI) -> dict[str, Any] | str:
        """``{id: model}`` from the catalog, or the reason it could not be read."""
        import openai as sdk

        try:
            return {m.id: m for m in client.models.list()}
        except sdk.APIStatusError as error:
            return f"catalog answered HTTP {error.status_code}"
        except sdk.APIError as error:
            return f"catalog unreachable ({type(error).__name__})"

    def _entry(self, model: str, catalog: dict[str, Any] | str) -> CatalogEntry:
        if isinstance(catalog, str):
            return CatalogEntry(provider=self.name, model=model, available=True, reason=f"not checked: {catalog}")
        found = catalog.get(model)
        if found is None:
            return CatalogEntry(provider=self.name, model=model, available=False,
                                reason="the model id is not in the OpenRouter catalog")
        architecture = getattr(found, "architecture", None)
        modalities = architecture.get("input_modalities") if isinstance(architecture, dict) else None
        image_input = "image" in modalities if isinstance(modalities, list) else None
        reason = "the model does not accept image input" if image_input is False else ""
        return CatalogEntry(provider=self.name, model=model, available=image_input is not False,
                            image_input=image_input, reason=reason)

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        return OpenrouterSession(request, _parse(request.model), credentials)


def _parse(model: ModelSpec) -> OpenrouterOptions:
    return OpenrouterOptions.model_validate(model.options)

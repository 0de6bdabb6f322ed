"""The ``openai`` model provider: OpenAI's Responses API through the official SDK.

Credential: ``OPENAI_API_KEY``. Options: :class:`~autocad_bench_openai.options.OpenaiOptions`.
The SDK is imported only when a session or a catalog check needs it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, ClassVar

from pydantic import ValidationError

from autocad_bench.errors import Problem
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench.validation import problems_from_validation_error
from autocad_bench_openai.options import DEFAULT_BASE_URL, OpenaiOptions
from autocad_bench_openai.session import CREDENTIAL, OpenaiSession

if TYPE_CHECKING:
    import openai

CATALOG_TIMEOUT_S = 30.0


class OpenaiProvider(ModelProvider):
    """OpenAI Responses API with a strict, forced ``computer_action`` function tool."""

    name: ClassVar[str] = "openai"
    credential_env: ClassVar[tuple[str, ...]] = (CREDENTIAL,)

    def __repr__(self) -> str:
        return "OpenaiProvider()"

    def validate_model_spec(self, model: ModelSpec, location: str) -> list[Problem]:
        problems: list[Problem] = []
        if not model.model.strip():
            problems.append(Problem(f"{location}.model", "model id must not be empty"))
        try:
            OpenaiOptions.model_validate(model.options)
        except ValidationError as error:
            problems.extend(problems_from_validation_error(error, f"{location}.provider_options"))
        return problems

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Retrieve each model id from ``GET /models/{id}`` (read-only) when the key is set."""
        if CREDENTIAL not in credentials:
            return [CatalogEntry(provider=self.name, model=m.model, available=True,
                                 reason=f"not checked: {CREDENTIAL} is not set") for m in models]
        import openai

        by_base: dict[str, list[ModelSpec]] = defaultdict(list)
        for spec in models:
            try:
                base = OpenaiOptions.model_validate(spec.options).base_url or DEFAULT_BASE_URL
            except ValidationError:
                base = DEFAULT_BASE_URL
            by_base[base].append(spec)
        entries: dict[int, CatalogEntry] = {}
        for base, specs in by_base.items():
            with openai.OpenAI(api_key=credentials[CREDENTIAL], base_url=base, max_retries=0,
                               timeout=CATALOG_TIMEOUT_S) as client:
                for spec in specs:
                    entries[id(spec)] = self._lookup(client, spec.model)
        return [entries[id(spec)] for spec in models]

    def _lookup(self, client: openai.OpenAI, model: str) -> CatalogEntry:
        import openai as sdk

        try:
            found = client.models.retrieve(model)
        except sdk.NotFoundError:
            return CatalogEntry(provider=self.name, model=model, available=False,
                                reason="the model id is not in the OpenAI catalog")
        except sdk.AuthenticationError:
            return CatalogEntry(provider=self.name, model=model, available=False,
                                reason=f"{CREDENTIAL} was rejected (HTTP 401)")
        except sdk.PermissionDeniedError:
            return CatalogEntry(provider=self.name, model=model, available=False,
                                reason="this key may not use the model (HTTP 403)")
        except sdk.APIStatusError as error:
            return CatalogEntry(provider=self.name, model=model, available=True,
                                reason=f"not checked: catalog answered HTTP {error.status_code}")
        except sdk.APIError as error:
            return CatalogEntry(provider=self.name, model=model, available=True,
                                reason=f"not checked: catalog unreachable ({type(error).__name__})")
        return CatalogEntry(provider=self.name, model=found.id, available=True)

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        options = OpenaiOptions.model_validate(request.model.options)
        return OpenaiSession(request, options, credentials)

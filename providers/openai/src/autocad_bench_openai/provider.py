"""The ``openai`` model provider: OpenAI's Responses API through the official SDK.

Credential: ``OPENAI_API_KEY``. Options: :class:`~autocad_bench_openai.options.OpenaiOptions`.
The SDK is imported only when a session or a catalog check needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from autocad_bench.errors import Problem
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.catalog import base_url_or_default, check_per_base_url, not_checked
from autocad_bench.providers.support.specs import spec_problems
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
        return spec_problems(model, location, _parse)[0]

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Retrieve each model id from ``GET /models/{id}`` (read-only) when the key is set."""
        if CREDENTIAL not in credentials:
            return not_checked(self.name, models, f"{CREDENTIAL} is not set")
        import openai

        def check(base: str, specs: list[ModelSpec]) -> list[CatalogEntry]:
            with openai.OpenAI(api_key=credentials[CREDENTIAL], base_url=base, max_retries=0,
                               timeout=CATALOG_TIMEOUT_S) as client:
                return [self._lookup(client, spec.model) for spec in specs]

        return check_per_base_url(models, lambda spec: base_url_or_default(spec, _parse, DEFAULT_BASE_URL), check)

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
        return OpenaiSession(request, _parse(request.model), credentials)


def _parse(model: ModelSpec) -> OpenaiOptions:
    return OpenaiOptions.model_validate(model.options)

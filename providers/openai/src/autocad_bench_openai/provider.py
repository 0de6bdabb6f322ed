"""The ``openai`` model provider: OpenAI's Responses API through the official SDK.

Credential: ``OPENAI_API_KEY``. Options: :class:`~autocad_bench_openai.options.OpenaiOptions`.
The SDK is imported only when a session or a catalog check needs it.

Base URL: ``provider_options.base_url`` wins; else ``OPENAI_BASE_URL`` as the official SDK
reads it; else OpenAI's own URL. ``OPENAI_BASE_URL`` is not a secret, but a child harness
sees only the base environment and the names admission hands it, so the provider declares
it in :attr:`OpenaiProvider.optional_env`: admission passes it (with the credentials) to
the catalog check and to every rollout when it is set, and a missing one is not an error.
The catalog check names the URL used and where it came from (``provider_options.base_url``,
``environment OPENAI_BASE_URL`` or the default), and fails when that URL cannot be
connected to (refused, unknown host, no connection within :data:`CONNECT_TIMEOUT_S`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.catalog import check_per_base_url, not_checked
from autocad_bench_openai.options import BASE_URL_ENV, BaseUrl, OpenaiOptions, resolve_base_url
from autocad_bench_openai.session import CREDENTIAL, OpenaiSession

if TYPE_CHECKING:
    import openai

CATALOG_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 3.0
"""How long the catalog check waits for a connection before it calls the base URL unreachable."""


class OpenaiProvider(ModelProvider):
    """OpenAI Responses API with a strict, forced ``computer_action`` function tool."""

    name: ClassVar[str] = "openai"
    credential_env: ClassVar[tuple[str, ...]] = (CREDENTIAL,)
    optional_env: ClassVar[tuple[str, ...]] = (BASE_URL_ENV,)
    """Non-secret variables the provider reads when they are set (admission passes them on)."""
    options_model: ClassVar[type[OpenaiOptions]] = OpenaiOptions
    tool_modes: ClassVar[frozenset[str]] = frozenset({"function", "native"})
    """``native`` drives OpenAI's own computer tool (:mod:`autocad_bench_openai.native`)."""

    def __repr__(self) -> str:
        return "OpenaiProvider()"

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Retrieve each model id from ``GET /models/{id}`` (read-only) when the key is set.

        Every reason names the base URL used and its origin; a base URL that refuses the
        connection, does not resolve or does not connect within :data:`CONNECT_TIMEOUT_S`
        makes its models unavailable (once per URL, not once per model).
        """
        endpoints: dict[str, BaseUrl] = {}
        invalid: dict[int, str] = {}
        for spec in models:
            try:
                endpoint = resolve_base_url(_parse(spec), credentials)
            except (ValueError, TypeError) as error:  # ValidationError is a ValueError
                invalid[id(spec)] = str(error)
                continue
            endpoints[endpoint.url] = endpoint

        def url_of(spec: ModelSpec) -> str:
            return "" if id(spec) in invalid else resolve_base_url(_parse(spec), credentials).url

        if CREDENTIAL not in credentials:
            def unchecked(base: str, specs: list[ModelSpec]) -> list[CatalogEntry]:
                if not base:
                    return [self._invalid(spec, invalid[id(spec)]) for spec in specs]
                return not_checked(self.name, specs, f"{CREDENTIAL} is not set; base URL {endpoints[base]}")

            return check_per_base_url(models, url_of, unchecked)
        import openai

        def check(base: str, specs: list[ModelSpec]) -> list[CatalogEntry]:
            if not base:
                return [self._invalid(spec, invalid[id(spec)]) for spec in specs]
            endpoint = endpoints[base]
            timeout = openai.Timeout(CATALOG_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
            out: list[CatalogEntry] = []
            with openai.OpenAI(api_key=credentials[CREDENTIAL], base_url=base, max_retries=0,
                               timeout=timeout) as client:
                for spec in specs:
                    if out and out[-1].reason.startswith(UNREACHABLE):
                        out.append(out[-1].model_copy(update={"model": spec.model}))
                        continue
                    out.append(self._lookup(client, spec.model, endpoint))
            return out

        return check_per_base_url(models, url_of, check)

    def _invalid(self, spec: ModelSpec, reason: str) -> CatalogEntry:
        return CatalogEntry(provider=self.name, model=spec.model, available=False, reason=reason)

    def _lookup(self, client: openai.OpenAI, model: str, endpoint: BaseUrl) -> CatalogEntry:
        import openai as sdk

        def entry(available: bool, reason: str, found: str = model) -> CatalogEntry:
            return CatalogEntry(provider=self.name, model=found, available=available, reason=reason)

        try:
            found = client.models.retrieve(model)
        except sdk.NotFoundError:
            return entry(False, f"the model id is not in the catalog at {endpoint}")
        except sdk.AuthenticationError:
            return entry(False, f"{CREDENTIAL} was rejected (HTTP 401) by {endpoint}")
        except sdk.PermissionDeniedError:
            return entry(False, f"this key may not use the model (HTTP 403) at {endpoint}")
        except sdk.APIStatusError as error:
            return entry(True, f"not checked: catalog answered HTTP {error.status_code} at {endpoint}")
        except sdk.APIConnectionError as error:
            cause = error.__cause__
            # The HTTP client's ConnectError (refused, unknown host) or ConnectTimeout, by name:
            # the SDK's HTTP library is its own business.
            if cause is not None and {"ConnectError", "ConnectTimeout"} & {c.__name__ for c in type(cause).__mro__}:
                detail = str(cause) or type(cause).__name__
                return entry(False, f"{UNREACHABLE} {endpoint}: {detail}")
            return entry(True, f"not checked: catalog unreachable ({type(error).__name__}) at {endpoint}")
        except sdk.APIError as error:
            return entry(True, f"not checked: catalog unreachable ({type(error).__name__}) at {endpoint}")
        return entry(True, f"available at {endpoint}", found.id)

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        options = _parse(request.model)
        if request.model.tool_mode == "native":
            from autocad_bench_openai.native.session import NativeOpenAISession

            return NativeOpenAISession(request, options, credentials, variant=options.computer_tool,
                                       safety_checks=options.safety_checks)
        return OpenaiSession(request, options, credentials)


UNREACHABLE = "cannot connect to base URL"


def _parse(model: ModelSpec) -> OpenaiOptions:
    return OpenaiOptions.model_validate(model.options)

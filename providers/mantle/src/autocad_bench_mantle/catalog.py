"""Live, read-only Mantle catalog (signed ``GET /v1/models``): exact ids and advertised image input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from autocad_bench.providers.chat.wire import advertised_image_input, classify_openai_error
from autocad_bench.providers.models import CatalogEntry, ModelSpec
from autocad_bench.providers.support.catalog import check_grouped

from .options import MantleOptions, base_url, parse_options
from .sigv4 import AwsCredentialSource, MantleSigV4Auth, NoAwsCredentialsError

SIGV4_PLACEHOLDER_KEY = "sigv4"
"""The OpenAI SDK insists on an API key; SigV4 replaces the header it produces."""


def resolve_region(options: MantleOptions, source: AwsCredentialSource) -> str:
    """The option, else the AWS configuration of the environment/profile; raises if there is none."""
    region = options.region or source.region()
    if not region:
        raise ValueError("no AWS region for Mantle: set provider_options.region "
                         "(or AWS_DEFAULT_REGION / a profile region)")
    return region


def advertises_responses(entry: Mapping[str, Any]) -> bool:
    """Whether a Mantle catalog entry advertises the Responses API (unconfirmed field names)."""
    for key in ("supported_endpoints", "endpoints", "supported_apis", "apis"):
        value = entry.get(key)
        if isinstance(value, list) and any(isinstance(v, str) and "responses" in v.lower() for v in value):
            return True
    capabilities = entry.get("capabilities")
    if isinstance(capabilities, Mapping):
        for key in ("responses", "responses_api"):
            if capabilities.get(key) is True:
                return True
    return False


def list_models(url: str, auth: MantleSigV4Auth, timeout_s: float = 30.0) -> dict[str, dict[str, Any]]:
    """Catalog entries by id; raises the OpenAI SDK's errors or :class:`NoAwsCredentialsError`."""
    import httpx
    import openai

    with httpx.Client(auth=auth, timeout=timeout_s) as http:
        client = openai.OpenAI(api_key=SIGV4_PLACEHOLDER_KEY, base_url=url, max_retries=0, timeout=timeout_s,
                               http_client=cast(Any, http))
        try:
            return {m.id: m.to_dict() for m in client.models.list()}
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, NoAwsCredentialsError):
                raise cause from None
            raise


def check_catalog(provider: str, models: list[ModelSpec]) -> list[CatalogEntry]:
    """The live capability check of ``models``: one catalog request per region, profile and
    base URL; models whose options do not parse are unavailable entries.
    """
    return check_grouped(provider, models, parse_options,
                         lambda options: (options.region, options.aws_profile, options.base_url),
                         lambda _, items: _check_group(provider, items))


def _check_group(provider: str, items: list[tuple[ModelSpec, MantleOptions]]) -> list[CatalogEntry]:
    import openai

    options = items[0][1]
    source = AwsCredentialSource(options.aws_profile)
    credentials = f"credentials: {source.describe()}; no API key variable is used"

    def failed(reason: str) -> list[CatalogEntry]:
        return [CatalogEntry(provider=provider, model=s.model, available=False, reason=f"{reason}; {credentials}")
                for s, _ in items]

    try:
        region = resolve_region(options, source)
    except ValueError as error:
        return failed(str(error))
    url = base_url(options, region)
    try:
        listed = list_models(url, MantleSigV4Auth(source, region))
    except NoAwsCredentialsError as error:
        return failed(f"not checked: {error}")
    except openai.APIError as exc:
        return failed(f"{region}: GET /v1/models failed: {classify_openai_error(exc) or exc}")
    entries = []
    for spec, opts in items:
        entry = listed.get(spec.model)
        if entry is None:
            entries.append(CatalogEntry(provider=provider, model=spec.model, available=False,
                                        reason=f"{region}: not in the Mantle catalog ({len(listed)} models); "
                                               f"{credentials}"))
            continue
        image = advertised_image_input(entry)
        api = opts.resolved_api(spec.model)
        if api == "auto":
            api = "responses" if advertises_responses(entry) else "chat"
        if image is False:
            available, note = False, "listed, but it does not advertise image input"
        elif image is None and opts.require_advertised_image_input:
            available, note = False, "listed, but the catalog does not advertise image input"
        else:
            available = True
            note = "listed; advertises image input" if image else "listed; image input not advertised (accepted)"
        entries.append(CatalogEntry(provider=provider, model=spec.model, available=available, image_input=image,
                                    reason=f"{region}: {note}; api {api}; {credentials}"))
    return entries

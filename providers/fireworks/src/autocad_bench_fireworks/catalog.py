"""Live, read-only lookup of Fireworks model ids (``GET {base_url}/models``)."""

from __future__ import annotations

from typing import Any

from autocad_bench.providers.chat.wire import advertised_image_input, classify_openai_error
from autocad_bench.providers.models import CatalogEntry, ModelSpec
from autocad_bench.providers.support.catalog import check_grouped

from .options import parse_options


def check_catalog(provider: str, models: list[ModelSpec], api_key: str | None) -> list[CatalogEntry]:
    """One entry per model: listed (or retrievable) ids are available unless they refuse images."""
    if not api_key:
        return [CatalogEntry(provider=provider, model=m.model, available=False,
                             reason="not checked: FIREWORKS_API_KEY is not set") for m in models]
    return check_grouped(provider, models, parse_options, lambda options: options.base_url,
                         lambda base_url, items: _check_endpoint(provider, base_url, [s for s, _ in items], api_key))


def _check_endpoint(provider: str, base_url: str, specs: list[ModelSpec], api_key: str) -> list[CatalogEntry]:
    import openai

    client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=30.0)
    try:
        try:
            listed = {m.id: m.to_dict() for m in client.models.list()}
        except openai.APIError as exc:
            error = classify_openai_error(exc)
            reason = f"catalog request failed: {error or exc}"
            return [CatalogEntry(provider=provider, model=s.model, available=False, reason=reason) for s in specs]
        return [_entry(provider, client, spec.model, listed) for spec in specs]
    finally:
        client.close()


def _entry(provider: str, client: Any, model: str, listed: dict[str, dict[str, Any]]) -> CatalogEntry:
    import openai

    found = listed.get(model)
    source = "listed"
    if found is None:
        # Routers and account models are not always in the listing; ask for the id itself.
        try:
            value = client.get(f"/models/{model}", cast_to=object)
        except openai.NotFoundError:
            return CatalogEntry(provider=provider, model=model, available=False,
                                reason=f"not in the Fireworks catalog ({len(listed)} models listed)")
        except openai.APIError as exc:
            return CatalogEntry(provider=provider, model=model, available=False,
                                reason=f"lookup failed: {classify_openai_error(exc) or exc}")
        found = value if isinstance(value, dict) else {}
        source = "retrieved by id"
        if found.get("id") not in (None, model):
            return CatalogEntry(provider=provider, model=model, available=False,
                                reason=f"the catalog answered with a different id {found.get('id')!r}")
    image = advertised_image_input(found)
    if image is False:
        return CatalogEntry(provider=provider, model=model, available=False, image_input=False,
                            reason=f"{source}, but the catalog says it does not accept image input")
    note = "advertises image input" if image else "image input not advertised by the catalog"
    return CatalogEntry(provider=provider, model=model, available=True, image_input=image,
                        reason=f"{source}; {note}")

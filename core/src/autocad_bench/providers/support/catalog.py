"""Catalog checks: model specs grouped by the endpoint (or account) that answers for them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Protocol, TypeVar

from pydantic import ValidationError

from autocad_bench.providers.models import CatalogEntry, ModelSpec

Options = TypeVar("Options")
Key = TypeVar("Key", bound=Hashable)


def check_grouped(
    provider: str,
    models: list[ModelSpec],
    parse: Callable[[ModelSpec], Options],
    key: Callable[[Options], Key],
    check: Callable[[Key, list[tuple[ModelSpec, Options]]], list[CatalogEntry]],
) -> list[CatalogEntry]:
    """One ``check`` (one catalog request) per group of specs whose parsed options have the same ``key``.

    Specs whose options do not parse come first, as unavailable entries; then the
    entries of each group, groups in the order of their first spec.
    """
    out: list[CatalogEntry] = []
    groups: dict[Key, list[tuple[ModelSpec, Options]]] = defaultdict(list)
    for spec in models:
        try:
            options = parse(spec)
        except (ValidationError, ValueError, TypeError) as error:
            out.append(CatalogEntry(provider=provider, model=spec.model, available=False,
                                    reason=f"invalid provider_options: {error}"))
            continue
        groups[key(options)].append((spec, options))
    for group_key, items in groups.items():
        out.extend(check(group_key, items))
    return out


class _HasBaseUrl(Protocol):
    @property
    def base_url(self) -> str | None: ...


def base_url_or_default(spec: ModelSpec, parse: Callable[[ModelSpec], _HasBaseUrl], default: str) -> str:
    """The ``base_url`` option of ``spec``, or ``default`` when it is unset or the options are invalid."""
    try:
        return parse(spec).base_url or default
    except ValidationError:
        return default


def check_per_base_url(
    models: list[ModelSpec],
    base_url: Callable[[ModelSpec], str],
    check: Callable[[str, list[ModelSpec]], list[CatalogEntry]],
) -> list[CatalogEntry]:
    """One ``check(base_url, specs)`` (one entry per spec, in order) per base URL; entries in ``models`` order."""
    by_base: dict[str, list[ModelSpec]] = defaultdict(list)
    for spec in models:
        by_base[base_url(spec)].append(spec)
    entries: dict[int, CatalogEntry] = {}
    for base, specs in by_base.items():
        for spec, entry in zip(specs, check(base, specs), strict=True):
            entries[id(spec)] = entry
    return [entries[id(spec)] for spec in models]


def not_checked(provider: str, models: list[ModelSpec], reason: str) -> list[CatalogEntry]:
    """Every model usable but unchecked (``not checked: {reason}``), e.g. without a credential."""
    return [CatalogEntry(provider=provider, model=m.model, available=True, reason=f"not checked: {reason}")
            for m in models]

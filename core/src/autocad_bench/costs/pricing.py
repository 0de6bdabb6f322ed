"""Model and infrastructure prices, and how the effective price table is chosen.

A :class:`PricingContract` is a dated table: USD per million tokens for every priced model
and USD per hour for every priced infrastructure key (an instance type or a backend name).
The same model serves three purposes:

* the shipped default table (:func:`default_pricing`, see ``default_prices.py``);
* the optional contract pinned in a batch configuration, copied into ``batch-state.json``
  so a resumed batch is priced exactly like the first attempt;
* the operator override file named by ``AUTOCAD_BENCH_PRICING_JSON``, deep-merged over the
  defaults when nothing is pinned.

Pricing exists to enforce cost caps, so every doubt resolves towards charging more: an
unknown model is priced at the most expensive listed rates (never $0) and a broken override
file is an error, never silently ignored.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Mapping
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, PlainSerializer, ValidationError, model_validator

from autocad_bench.errors import ConfigError, Problem
from autocad_bench.models import StrictModel

PRICING_ENV = "AUTOCAD_BENCH_PRICING_JSON"
"""Environment variable naming an operator pricing override file (a path to JSON)."""


def _decimal_as_json_number(value: Decimal) -> float | int:
    # Prices are short human-written decimals; as JSON numbers they stay readable in
    # batch-state.json and round-trip exactly (pydantic parses floats through ``str``).
    return int(value) if value == value.to_integral_value() else float(value)


PerMillionUsd = Annotated[
    Decimal,
    Field(ge=0, allow_inf_nan=False, description="USD per million tokens"),
    PlainSerializer(_decimal_as_json_number, return_type=float, when_used="json"),
]
"""A price in USD per million tokens (finite, not negative)."""

PerHourUsd = Annotated[
    Decimal,
    Field(ge=0, allow_inf_nan=False, description="USD per hour"),
    PlainSerializer(_decimal_as_json_number, return_type=float, when_used="json"),
]
"""A price in USD per hour of server time (finite, not negative)."""

Multiplier = Annotated[
    Decimal,
    Field(ge=1, allow_inf_nan=False),
    PlainSerializer(_decimal_as_json_number, return_type=float, when_used="json"),
]
"""A long-context price multiplier: a premium, so never below 1."""

HourlyUsd = Annotated[float, Field(ge=0, allow_inf_nan=False, description="USD per hour")]


class ModelPrice(StrictModel):
    """Rates of one model, in USD per million tokens.

    ``cached_input`` prices cache reads, ``cache_write`` prices tokens written to a prompt
    cache (Anthropic's five-minute write; providers without a write surcharge list their
    input rate). When ``long_context_threshold_tokens`` is set, a response whose total
    input (uncached + cached + cache writes) is strictly greater than the threshold has
    all its input rates multiplied by ``long_context_input_multiplier`` and its output rate
    by ``long_context_output_multiplier``; smaller responses pay the base rates.
    """

    input: PerMillionUsd
    cached_input: PerMillionUsd
    cache_write: PerMillionUsd
    output: PerMillionUsd
    server_hour: PerHourUsd = Field(
        default=Decimal(0), description="USD per hour of server time (TokenUsage.server_seconds): a self-hosted "
        "model's GPU-hour price; 0 for metered APIs")
    long_context_threshold_tokens: int | None = Field(default=None, gt=0)
    long_context_input_multiplier: Multiplier = Decimal(1)
    long_context_output_multiplier: Multiplier = Decimal(1)

    @model_validator(mode="after")
    def _multipliers_need_threshold(self) -> ModelPrice:
        # A multiplier without a threshold would silently never apply: reject the typo.
        has_premium = self.long_context_input_multiplier != 1 or self.long_context_output_multiplier != 1
        if has_premium and self.long_context_threshold_tokens is None:
            raise ValueError("long-context multipliers need long_context_threshold_tokens")
        return self


class PricingContract(StrictModel):
    """A dated price table for models and infrastructure.

    ``models`` is keyed by the exact model id a provider is called with (``ModelSpec.model``);
    ``infrastructure_hourly_usd`` by instance type (``m6i.2xlarge``) or backend name
    (``local-xvfb``). Lookups are exact: no prefix or alias matching, because a guessed
    match could price a model at a cheaper sibling's rates.
    """

    as_of: datetime.date
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    infrastructure_hourly_usd: dict[str, HourlyUsd] = Field(default_factory=dict)


class ResolvedPrice(StrictModel):
    """The rates used for one model, and whether they came from the conservative fallback."""

    model: str
    price: ModelPrice
    priced_by_fallback: bool
    as_of: datetime.date


class ResolvedHourlyRate(StrictModel):
    """The hourly rate used for one infrastructure key, and whether it is the fallback."""

    key: str
    hourly_usd: Decimal
    priced_by_fallback: bool


class PricingError(ConfigError):
    """A pricing override file (or a pricing setting) is missing, unreadable or invalid.

    Each problem names the file and the JSON path of the offending value.
    """


def default_pricing() -> PricingContract:
    """The shipped, dated default table (validated once, shared, immutable)."""
    return _default_pricing()


@cache
def _default_pricing() -> PricingContract:
    from autocad_bench.costs.default_prices import DEFAULT_PRICING

    return PricingContract.model_validate(DEFAULT_PRICING)


def load_pricing(
    environ: Mapping[str, str] | None = None,
    *,
    pinned: PricingContract | None = None,
) -> PricingContract:
    """The effective price table for a batch.

    A ``pinned`` contract (from the batch configuration or a resumed batch state) is used
    exactly as given: it is what the batch was admitted with, and re-merging a possibly
    edited override file on resume would change the price of a half-finished batch.
    Otherwise the defaults are deep-merged with the file named by ``AUTOCAD_BENCH_PRICING_JSON``
    (an empty value counts as unset). Raises :class:`PricingError` if that file is missing,
    not JSON, or produces an invalid table.
    """
    if pinned is not None:
        return pinned
    env = os.environ if environ is None else environ
    path = env.get(PRICING_ENV, "").strip()
    if not path:
        return default_pricing()
    return merge_pricing_file(default_pricing(), Path(path))


def merge_pricing_file(base: PricingContract, path: Path) -> PricingContract:
    """Deep-merge the JSON object in ``path`` over ``base`` and validate the result.

    Objects merge key by key (so ``{"models": {"gpt-5": {"output": 12}}}`` changes one rate
    and keeps the rest); any other value replaces the base value. Raises
    :class:`PricingError` naming ``path`` and the JSON path of each problem.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PricingError(
            [Problem(source, f"cannot read pricing override ({PRICING_ENV}): {exc.strerror or exc}")]
        ) from exc
    try:
        override = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise PricingError(
            [Problem(f"{source} line {exc.lineno} column {exc.colno}", f"not valid JSON: {exc.msg}")]
        ) from exc
    except ValueError as exc:
        raise PricingError([Problem(source, str(exc))]) from exc
    return merge_pricing(base, override, source=source)


def merge_pricing(base: PricingContract, override: Any, *, source: str) -> PricingContract:
    """Deep-merge an already parsed JSON ``override`` over ``base`` (see :func:`merge_pricing_file`).

    ``source`` names where the override came from in error messages.
    """
    if not isinstance(override, dict):
        raise PricingError(
            [Problem(f"{source} $", f"the pricing override must be a JSON object, not {_json_type(override)}")]
        )
    merged = _deep_merge(base.model_dump(mode="json"), override)
    try:
        return PricingContract.model_validate(merged)
    except ValidationError as exc:
        raise PricingError(Problem(f"{source} {json_path(err['loc'])}", err["msg"]) for err in exc.errors()) from exc


def with_declared_prices(prices: PricingContract, declared: Mapping[str, ModelPrice]) -> PricingContract:
    """``prices`` plus the rates providers declared for their rollouts' models.

    A declared rate is the operator's own statement in the rollout's ``provider_options``
    (a self-hosted model's price per token), so it wins over a table entry of the same id.
    """
    if not declared:
        return prices
    return prices.model_copy(update={"models": {**prices.models, **declared}})


def price_for(model: str, prices: PricingContract) -> ResolvedPrice:
    """The rates for ``model``: its listed entry, else the conservative fallback (flagged)."""
    listed = prices.models.get(model)
    if listed is not None:
        return ResolvedPrice(model=model, price=listed, priced_by_fallback=False, as_of=prices.as_of)
    return ResolvedPrice(model=model, price=fallback_price(prices), priced_by_fallback=True, as_of=prices.as_of)


def fallback_price(prices: PricingContract) -> ModelPrice:
    """The most expensive rates of ``prices`` and of the default table, field by field.

    The defaults always take part, so even an empty pinned contract cannot make an unknown
    model free. The long-context premium uses the lowest listed threshold and the highest
    listed multipliers, i.e. it also charges as much as anything listed.
    """
    return _fallback_from(tuple(prices.models.values()) + tuple(default_pricing().models.values()))


def hourly_rate(key: str, prices: PricingContract) -> ResolvedHourlyRate:
    """The hourly infrastructure rate for ``key``, or the highest listed rate (flagged).

    Like model prices, the fallback includes the default table so it is never below the
    most expensive shipped rate.
    """
    listed = prices.infrastructure_hourly_usd.get(key)
    if listed is not None:
        return ResolvedHourlyRate(key=key, hourly_usd=_to_decimal(listed), priced_by_fallback=False)
    rates = list(prices.infrastructure_hourly_usd.values())
    rates += default_pricing().infrastructure_hourly_usd.values()
    return ResolvedHourlyRate(key=key, hourly_usd=max(_to_decimal(r) for r in rates), priced_by_fallback=True)


def json_path(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """Render a pydantic error location as a JSON path (``$.models["gpt-5"].output``)."""
    parts = ["$"]
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif _PLAIN_KEY.fullmatch(item):
            parts.append(f".{item}")
        else:
            parts.append(f"[{json.dumps(item)}]")
    return "".join(parts)


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _fallback_from(listed: tuple[ModelPrice, ...]) -> ModelPrice:
    thresholds = [p.long_context_threshold_tokens for p in listed if p.long_context_threshold_tokens]
    return ModelPrice(
        input=max(p.input for p in listed),
        cached_input=max(p.cached_input for p in listed),
        cache_write=max(p.cache_write for p in listed),
        output=max(p.output for p in listed),
        long_context_threshold_tokens=min(thresholds) if thresholds else None,
        long_context_input_multiplier=max(p.long_context_input_multiplier for p in listed),
        long_context_output_multiplier=max(p.long_context_output_multiplier for p in listed),
    )


def _deep_merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _deep_merge(base[key], value) if key in base else value
        return merged
    return override


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN/Infinity by default; a NaN price would compare false against
    # every cap, so refuse it at parse time with a clear message.
    raise ValueError(f"{name} is not a valid price (JSON numbers must be finite)")


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def _to_decimal(value: float | int | Decimal) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite amount: {value!r}")
    # str() gives the shortest repr, so 0.1 becomes Decimal("0.1"), not its binary expansion.
    return Decimal(str(value))

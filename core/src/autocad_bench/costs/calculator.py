"""Cost of model responses and VM time, in exact decimal USD.

Every response is priced on its own (:func:`cost_of`) because long-context premiums depend
on that one request's input size. Amounts are :class:`~decimal.Decimal` computed in a private
context and quantized to :data:`USD_QUANTUM`, so the same usage always yields the same
amount and sums do not depend on the order of addition or on the caller's decimal context.
In JSON they are strings, which round-trip exactly through a resume.
"""

from __future__ import annotations

import datetime
import math
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext

from pydantic import Field

from autocad_bench.costs.pricing import PricingContract, ResolvedPrice, price_for
from autocad_bench.models import StrictModel
from autocad_bench.providers.models import TokenUsage

USD_QUANTUM = Decimal("1e-12")
"""Resolution of every amount: a picodollar, finer than any rate times one token."""

_MILLION = Decimal(1_000_000)
_SECONDS_PER_HOUR = Decimal(3600)
# Wide enough that no realistic product or sum is ever rounded before quantization.
_CONTEXT = Context(prec=60, rounding=ROUND_HALF_EVEN)
_ZERO = Decimal(0)


def quantize_usd(amount: Decimal) -> Decimal:
    """Round ``amount`` to :data:`USD_QUANTUM` (half-even), independent of the ambient context."""
    with localcontext(_CONTEXT):
        return (amount + 0).quantize(USD_QUANTUM)


class ResponseCost(StrictModel):
    """The price of one model response, broken down by token category.

    ``reasoning_tokens`` in :attr:`usage` are part of ``output_tokens`` and are not charged
    again. ``long_context`` says whether this response crossed its model's threshold;
    ``priced_by_fallback`` whether the model was unlisted and charged the fallback rates.
    """

    model: str
    usage: TokenUsage
    input_usd: Decimal
    cached_input_usd: Decimal
    cache_write_usd: Decimal
    output_usd: Decimal
    server_usd: Decimal = Decimal(0)
    total_usd: Decimal
    long_context: bool = False
    priced_by_fallback: bool = False
    pricing_as_of: datetime.date


def cost_of(model: str, usage: TokenUsage, prices: PricingContract) -> ResponseCost:
    """Price one response of ``model`` with ``usage`` under ``prices``.

    Uncached input, cached reads, cache writes and output are each charged at their own
    rate. If the model lists a long-context threshold and this response's total input is
    strictly above it, the input multiplier applies to all three input categories and the
    output multiplier to output. Unknown models are charged the conservative fallback
    (``priced_by_fallback=True``), never $0. Never raises for valid usage.
    """
    return price_response(price_for(model, prices), usage)


def price_response(resolved: ResolvedPrice, usage: TokenUsage) -> ResponseCost:
    """:func:`cost_of` with the model's rates already looked up (once per rollout, say)."""
    model = resolved.model
    rate = resolved.price
    threshold = rate.long_context_threshold_tokens
    long_context = threshold is not None and usage.total_input_tokens > threshold
    with localcontext(_CONTEXT):
        in_mult = rate.long_context_input_multiplier if long_context else Decimal(1)
        out_mult = rate.long_context_output_multiplier if long_context else Decimal(1)
        input_usd = _per_million(usage.input_tokens, rate.input * in_mult)
        cached_usd = _per_million(usage.cached_input_tokens, rate.cached_input * in_mult)
        write_usd = _per_million(usage.cache_write_tokens, rate.cache_write * in_mult)
        output_usd = _per_million(usage.output_tokens, rate.output * out_mult)
        # Server time is billed per hour, never with the long-context premium.
        server_usd = Decimal(str(usage.server_seconds)) * rate.server_hour / 3600
        total = input_usd + cached_usd + write_usd + output_usd + server_usd
    return ResponseCost(
        model=model,
        usage=usage,
        input_usd=input_usd,
        cached_input_usd=cached_usd,
        cache_write_usd=write_usd,
        output_usd=output_usd,
        server_usd=server_usd,
        total_usd=quantize_usd(total),
        long_context=long_context,
        priced_by_fallback=resolved.priced_by_fallback,
        pricing_as_of=resolved.as_of,
    )


def infrastructure_cost(vm_seconds: float, hourly_usd: float | Decimal) -> Decimal:
    """USD for ``vm_seconds`` of a machine billed ``hourly_usd`` per hour (per-second billing).

    Raises :class:`ValueError` for negative or non-finite inputs.
    """
    seconds = _non_negative("vm_seconds", vm_seconds)
    rate = _non_negative("hourly_usd", hourly_usd)
    with localcontext(_CONTEXT):
        return quantize_usd(seconds * rate / _SECONDS_PER_HOUR)


class CostLedger(StrictModel):
    """Running totals of priced responses for one rollout (immutable; :meth:`add` returns a new one).

    Serialized into run state so that a resumed rollout keeps counting from where the
    previous attempt stopped (:meth:`merge` combines ledgers of separate attempts).
    """

    responses: int = Field(default=0, ge=0)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    input_usd: Decimal = _ZERO
    cached_input_usd: Decimal = _ZERO
    cache_write_usd: Decimal = _ZERO
    output_usd: Decimal = _ZERO
    total_usd: Decimal = _ZERO
    long_context_responses: int = Field(default=0, ge=0)
    fallback_priced_responses: int = Field(default=0, ge=0)
    fallback_priced_models: tuple[str, ...] = ()

    def add(self, cost: ResponseCost) -> CostLedger:
        """A ledger that also contains ``cost``."""
        return self.merge(
            CostLedger(
                responses=1,
                usage=cost.usage,
                input_usd=cost.input_usd,
                cached_input_usd=cost.cached_input_usd,
                cache_write_usd=cost.cache_write_usd,
                output_usd=cost.output_usd,
                total_usd=cost.total_usd,
                long_context_responses=int(cost.long_context),
                fallback_priced_responses=int(cost.priced_by_fallback),
                fallback_priced_models=(cost.model,) if cost.priced_by_fallback else (),
            )
        )

    def merge(self, other: CostLedger) -> CostLedger:
        """The sum of two ledgers (e.g. two attempts of one rollout)."""
        with localcontext(_CONTEXT):
            return CostLedger(
                responses=self.responses + other.responses,
                usage=self.usage + other.usage,
                input_usd=self.input_usd + other.input_usd,
                cached_input_usd=self.cached_input_usd + other.cached_input_usd,
                cache_write_usd=self.cache_write_usd + other.cache_write_usd,
                output_usd=self.output_usd + other.output_usd,
                total_usd=self.total_usd + other.total_usd,
                long_context_responses=self.long_context_responses + other.long_context_responses,
                fallback_priced_responses=(self.fallback_priced_responses + other.fallback_priced_responses),
                fallback_priced_models=tuple(
                    sorted(set(self.fallback_priced_models) | set(other.fallback_priced_models))
                ),
            )


def _per_million(tokens: int, rate: Decimal) -> Decimal:
    return quantize_usd(Decimal(tokens) * rate / _MILLION)


def _non_negative(name: str, value: float | Decimal) -> Decimal:
    if isinstance(value, Decimal):
        amount = value
    else:
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
        amount = Decimal(str(value))
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{name} must be a finite amount >= 0, got {value!r}")
    return amount

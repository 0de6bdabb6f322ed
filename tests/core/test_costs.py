"""Pricing tables, per-response cost arithmetic, overrides and infrastructure cost."""

from __future__ import annotations

import datetime
import json
import random
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocad_bench.costs import (
    PRICING_ENV,
    CostLedger,
    ModelPrice,
    PricingContract,
    PricingError,
    ResponseCost,
    cost_of,
    default_pricing,
    fallback_price,
    hourly_rate,
    infrastructure_cost,
    load_pricing,
    price_for,
)
from autocad_bench.errors import ConfigError
from autocad_bench.providers.models import TokenUsage

D = Decimal


def usage(**fields: int) -> TokenUsage:
    return TokenUsage(**fields)


# -- the default table -----------------------------------------------------------------------


def test_default_table_is_dated_and_covers_the_benchmark_models() -> None:
    table = default_pricing()
    assert table.as_of == datetime.date(2026, 11, 30)
    for model in (
        "gpt-5",
        "gpt-5.5",
        "claude-opus-5",
        "claude-sonnet-4-5",
        "claude-fable-5",
        "accounts/fireworks/routers/kimi-k2p6-fast",
        "accounts/fireworks/models/kimi-k2p5",
        "moonshotai.kimi-k2.5",
    ):
        assert model in table.models, model
    # Every listed model charges something for input and output.
    assert all(p.input > 0 and p.output > 0 for p in table.models.values())


def test_price_models_reject_unknown_fields_and_bad_values() -> None:
    with pytest.raises(ValueError, match="extra"):
        ModelPrice.model_validate({"input": 1, "cached_input": 1, "cache_write": 1, "output": 1, "outptu": 2})
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        ModelPrice(input=D(-1), cached_input=D(0), cache_write=D(0), output=D(0))
    with pytest.raises(ValueError, match="threshold"):
        ModelPrice(input=D(1), cached_input=D(1), cache_write=D(1), output=D(1), long_context_input_multiplier=D(2))


def test_contract_round_trips_through_json_with_numbers() -> None:
    table = default_pricing()
    dumped = table.model_dump(mode="json")
    assert dumped["models"]["gpt-5"]["cached_input"] == 0.125  # a number, readable in batch-state.json
    assert PricingContract.model_validate_json(json.dumps(dumped)) == table


# -- per-response cost -----------------------------------------------------------------------


def test_openai_cached_input_and_reasoning_subset() -> None:
    cost = cost_of(
        "gpt-5",
        usage(input_tokens=1_000, cached_input_tokens=2_000, output_tokens=500, reasoning_tokens=300),
        default_pricing(),
    )
    assert cost.input_usd == D("0.00125")  # 1,000 x $1.25/M
    assert cost.cached_input_usd == D("0.00025")  # 2,000 x $0.125/M
    assert cost.output_usd == D("0.005")  # 500 x $10/M; the 300 reasoning tokens are inside it
    assert cost.total_usd == D("0.0065")
    assert not cost.long_context
    assert not cost.priced_by_fallback


def test_anthropic_cache_reads_and_writes_priced_apart() -> None:
    cost = cost_of(
        "claude-sonnet-4-5",
        usage(input_tokens=10_000, cached_input_tokens=50_000, cache_write_tokens=20_000, output_tokens=1_000),
        default_pricing(),
    )
    assert (cost.input_usd, cost.cached_input_usd, cost.cache_write_usd, cost.output_usd) == (
        D("0.03"),
        D("0.015"),
        D("0.075"),
        D("0.015"),
    )
    assert cost.total_usd == D("0.135")


def test_long_context_multipliers_apply_only_above_the_threshold() -> None:
    prices = default_pricing()
    # Exactly at the 200K threshold: base rates.
    at = cost_of(
        "claude-sonnet-4-5",
        usage(input_tokens=140_000, cached_input_tokens=40_000, cache_write_tokens=20_000, output_tokens=1_000),
        prices,
    )
    assert not at.long_context
    assert at.total_usd == D("0.42") + D("0.012") + D("0.075") + D("0.015")
    # 210K total input: every input category doubles, output x1.5.
    above = cost_of(
        "claude-sonnet-4-5",
        usage(input_tokens=150_000, cached_input_tokens=40_000, cache_write_tokens=20_000, output_tokens=1_000),
        prices,
    )
    assert above.long_context
    assert (above.input_usd, above.cached_input_usd, above.cache_write_usd, above.output_usd) == (
        D("0.9"),
        D("0.024"),
        D("0.15"),
        D("0.0225"),
    )
    assert above.total_usd == D("1.0965")


def test_long_context_is_decided_per_response_not_per_rollout() -> None:
    prices = default_pricing()
    big = cost_of("gpt-5.4", usage(input_tokens=272_001, output_tokens=100), prices)
    small = cost_of("gpt-5.4", usage(input_tokens=1_000, output_tokens=100), prices)
    assert big.long_context and big.total_usd == D("1.360005") + D("0.00225")
    assert not small.long_context and small.total_usd == D("0.0025") + D("0.0015")
    # Models without a threshold never get a premium, however large the input.
    huge = cost_of("claude-opus-5", usage(input_tokens=900_000), prices)
    assert not huge.long_context and huge.total_usd == D("4.5")


def test_unknown_model_is_priced_by_the_most_expensive_rates_never_zero() -> None:
    prices = default_pricing()
    cost = cost_of("mystery-model-9000", usage(input_tokens=1_000, output_tokens=1_000), prices)
    assert cost.priced_by_fallback
    assert cost.total_usd == D("0.21")  # $30/M input + $180/M output: the dearest listed rates
    for listed in prices.models:
        listed_cost = cost_of(listed, usage(input_tokens=1_000, output_tokens=1_000), prices)
        assert cost.total_usd >= listed_cost.total_usd


def test_unknown_model_is_not_free_even_under_an_empty_pinned_contract() -> None:
    empty = PricingContract(as_of=datetime.date(2026, 1, 1))
    cost = cost_of("anything", usage(input_tokens=100_000), empty)
    assert cost.priced_by_fallback and cost.total_usd == D("3")
    # The fallback also carries the strictest long-context premium (lowest threshold, 2x input).
    assert cost_of("anything", usage(input_tokens=1_000_000), empty).total_usd == D("60")
    assert load_pricing({}, pinned=empty) is empty


def test_fallback_dominates_every_listed_rate() -> None:
    prices = default_pricing()
    fallback = fallback_price(prices)
    for price in prices.models.values():
        assert fallback.input >= price.input
        assert fallback.cached_input >= price.cached_input
        assert fallback.cache_write >= price.cache_write
        assert fallback.output >= price.output
    assert fallback.long_context_threshold_tokens == 200_000
    assert price_for("gpt-5", prices).priced_by_fallback is False


def test_zero_usage_costs_zero() -> None:
    assert cost_of("gpt-5", TokenUsage(), default_pricing()).total_usd == 0


def test_response_cost_round_trips_exactly_through_json() -> None:
    cost = cost_of("gpt-5.2", usage(input_tokens=123_457, cached_input_tokens=7, output_tokens=999), default_pricing())
    text = cost.model_dump_json()
    assert '"total_usd":"' in text  # amounts are exact strings, not floats
    assert ResponseCost.model_validate_json(text) == cost


token_counts = st.integers(min_value=0, max_value=400_000)
usages = st.builds(
    TokenUsage,
    input_tokens=token_counts,
    cached_input_tokens=token_counts,
    cache_write_tokens=token_counts,
    output_tokens=st.integers(min_value=0, max_value=64_000),
)


@given(st.lists(st.tuples(st.sampled_from([*sorted(default_pricing().models), "unlisted"]), usages), max_size=30))
def test_ledger_totals_are_exact_and_order_independent(responses: list[tuple[str, TokenUsage]]) -> None:
    prices = default_pricing()
    costs = [cost_of(model, u, prices) for model, u in responses]
    forward = CostLedger()
    for cost in costs:
        forward = forward.add(cost)
    shuffled = costs[:]
    random.Random(len(costs)).shuffle(shuffled)
    backward = CostLedger()
    for cost in reversed(shuffled):
        backward = backward.add(cost)
    assert forward.total_usd == backward.total_usd == sum((c.total_usd for c in costs), D(0))
    assert (
        forward.total_usd == forward.input_usd + forward.cached_input_usd + forward.cache_write_usd + forward.output_usd
    )
    assert forward.responses == len(costs)
    assert forward.fallback_priced_responses == sum(model == "unlisted" for model, _ in responses)
    assert CostLedger.model_validate_json(forward.model_dump_json()) == forward
    for cost in costs:  # reasoning never adds, cost never negative
        assert cost.total_usd >= 0


def test_ledger_merge_across_attempts() -> None:
    prices = default_pricing()
    first = CostLedger().add(cost_of("gpt-5", usage(input_tokens=1_000_000), prices))
    second = CostLedger().add(cost_of("mystery", usage(output_tokens=1_000), prices))
    merged = first.merge(second)
    assert merged.total_usd == D("1.25") + D("0.18")
    assert merged.usage == TokenUsage(input_tokens=1_000_000, output_tokens=1_000)
    assert merged.fallback_priced_models == ("mystery",)


# -- operator override file ------------------------------------------------------------------


def write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "pricing.json"
    path.write_text(content, encoding="utf-8")
    return path


def test_override_is_deep_merged_over_the_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        json.dumps(
            {
                "as_of": "2026-12-01",
                "models": {
                    "gpt-5": {"output": 12},
                    "my-local-model": {"input": 0, "cached_input": 0, "cache_write": 0, "output": 0.5},
                },
                "infrastructure_hourly_usd": {"c7i.2xlarge": 0.7},
            }
        ),
    )
    table = load_pricing({PRICING_ENV: str(path)})
    defaults = default_pricing()
    assert table.as_of == datetime.date(2026, 12, 1)
    assert table.models["gpt-5"].output == D(12)
    assert table.models["gpt-5"].input == defaults.models["gpt-5"].input  # untouched sibling field
    assert table.models["claude-opus-5"] == defaults.models["claude-opus-5"]  # untouched model
    assert table.models["my-local-model"].output == D("0.5")
    assert table.infrastructure_hourly_usd["c7i.2xlarge"] == 0.7
    assert table.infrastructure_hourly_usd["g5.2xlarge"] == defaults.infrastructure_hourly_usd["g5.2xlarge"]
    assert cost_of("gpt-5", usage(output_tokens=1_000_000), table).total_usd == D(12)


def test_empty_or_missing_env_uses_defaults() -> None:
    assert load_pricing({}) == default_pricing()
    assert load_pricing({PRICING_ENV: "  "}) == default_pricing()


def test_pinned_contract_wins_over_the_override_file(tmp_path: Path) -> None:
    pinned = PricingContract(
        as_of=datetime.date(2026, 6, 1),
        models={"gpt-5": ModelPrice(input=D(1), cached_input=D(1), cache_write=D(1), output=D(1))},
    )
    path = write(tmp_path, "not even json")
    assert load_pricing({PRICING_ENV: str(path)}, pinned=pinned) is pinned


@pytest.mark.parametrize(
    ("content", "where", "what"),
    [
        ('{"models": {"gpt-5": {"output": -1}}}', '$.models["gpt-5"].output', "greater than or equal to 0"),
        ('{"models": {"gpt-5": {"outptu": 1}}}', '$.models["gpt-5"].outptu', "Extra inputs are not permitted"),
        ('{"models": {"new-model": {"input": 1}}}', '$.models["new-model"].output', "Field required"),
        ('{"models": {"gpt-5": {"input": "cheap"}}}', '$.models["gpt-5"].input', "decimal"),
        ('{"infrastructure_hourly_usd": {"g5.xlarge": -2}}', '$.infrastructure_hourly_usd["g5.xlarge"]', "greater"),
        ('{"as_of": "yesterday"}', "$.as_of", "date"),
        ('{"modles": {}}', "$.modles", "Extra inputs"),
        ("[1, 2]", "$", "must be a JSON object, not an array"),
    ],
)
def test_invalid_override_names_file_and_json_path(tmp_path: Path, content: str, where: str, what: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(PricingError) as caught:
        load_pricing({PRICING_ENV: str(path)})
    message = str(caught.value)
    assert f"{path} {where}: " in message
    assert what in message
    assert isinstance(caught.value, ConfigError)  # the CLI prints it, no traceback


def test_broken_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "models": {"gpt-5": {"output": 12,}}\n}')
    with pytest.raises(PricingError) as caught:
        load_pricing({PRICING_ENV: str(path)})
    assert f"{path} line 2 column" in str(caught.value)
    assert "not valid JSON" in str(caught.value)


def test_nan_price_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, '{"models": {"gpt-5": {"output": NaN}}}')
    with pytest.raises(PricingError, match="NaN is not a valid price"):
        load_pricing({PRICING_ENV: str(path)})


def test_missing_override_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(PricingError) as caught:
        load_pricing({PRICING_ENV: str(missing)})
    assert str(missing) in str(caught.value)
    assert PRICING_ENV in str(caught.value)


# -- infrastructure --------------------------------------------------------------------------


def test_infrastructure_cost_is_per_second() -> None:
    assert infrastructure_cost(3600, 0.752) == D("0.752")
    assert infrastructure_cost(90, 1.58) == D("0.0395")
    assert infrastructure_cost(0, 5.0) == 0
    assert infrastructure_cost(1800.5, D("2")) == D("1.000277777778")  # quantized to a picodollar


@pytest.mark.parametrize(("seconds", "rate"), [(-1.0, 1.0), (1.0, -0.5), (float("nan"), 1.0), (1.0, float("inf"))])
def test_infrastructure_cost_rejects_nonsense(seconds: float, rate: float) -> None:
    with pytest.raises(ValueError):
        infrastructure_cost(seconds, rate)


def test_hourly_rate_lookup_and_conservative_fallback() -> None:
    prices = default_pricing()
    assert hourly_rate("m6i.2xlarge", prices).hourly_usd == D("0.752")
    assert hourly_rate("local-xvfb", prices).hourly_usd == 0
    unknown = hourly_rate("p5.48xlarge", prices)
    assert unknown.priced_by_fallback
    assert unknown.hourly_usd == max(D(str(v)) for v in prices.infrastructure_hourly_usd.values()) > 0

"""Pricing tables, per-response cost arithmetic, overrides and infrastructure cost."""

from __future__ import annotations

import datetime
import json
import random
from decimal import ROUND_UP, Context, Decimal, localcontext
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocad_bench.costs import (
    PRICING_ENV,
    USD_QUANTUM,
    CostLedger,
    ModelPrice,
    PricingContract,
    PricingError,
    ResolvedPrice,
    ResponseCost,
    cost_of,
    default_pricing,
    fallback_price,
    hourly_rate,
    infrastructure_cost,
    load_pricing,
    price_for,
    price_response,
    quantize_usd,
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


# -- the arithmetic of one response, category by category --------------------------------------

AS_OF = datetime.date(2026, 3, 4)


def custom(threshold: int | None = 1_000_000, **rates: str) -> ResolvedPrice:
    """A made-up model whose every rate differs, so a category priced at a wrong rate shows."""
    fields: dict[str, object] = {
        "input": D("1"),
        "cached_input": D("0.1"),
        "cache_write": D("1.25"),
        "output": D("5"),
        "server_hour": D("3.6"),
        "long_context_threshold_tokens": threshold,
    }
    if threshold is not None:
        fields |= {"long_context_input_multiplier": D("2"), "long_context_output_multiplier": D("3")}
    fields |= {name: D(value) for name, value in rates.items()}
    contract = PricingContract(as_of=AS_OF, models={"custom-model": ModelPrice.model_validate(fields)})
    return price_for("custom-model", contract)


def test_every_category_is_charged_at_its_own_rate_and_summed() -> None:
    spend = usage(input_tokens=100_000, cached_input_tokens=200_000, cache_write_tokens=300_000, output_tokens=40_000)
    spend = spend.model_copy(update={"server_seconds": 10.0})
    cost = price_response(custom(), spend)
    assert cost.model == "custom-model"
    assert cost.usage == spend
    assert cost.input_usd == D("0.1")  # 100K x $1/M
    assert cost.cached_input_usd == D("0.02")  # 200K x $0.1/M
    assert cost.cache_write_usd == D("0.375")  # 300K x $1.25/M
    assert cost.output_usd == D("0.2")  # 40K x $5/M
    assert cost.server_usd == D("0.01")  # 10 s x $3.6/h
    assert cost.total_usd == D("0.705")
    assert str(cost.total_usd) == "0.705000000000"  # quantized to a picodollar
    assert not cost.long_context and not cost.priced_by_fallback
    assert cost.pricing_as_of == AS_OF
    assert cost_of("custom-model", spend, PricingContract(as_of=AS_OF, models={"custom-model": custom().price})) == cost


def test_long_context_premium_starts_one_token_above_the_threshold() -> None:
    at = usage(input_tokens=400, cached_input_tokens=300, cache_write_tokens=300, output_tokens=1_000)
    at = at.model_copy(update={"server_seconds": 1000.0})
    base = price_response(custom(threshold=1_000), at)
    assert not base.long_context
    assert (base.input_usd, base.cached_input_usd, base.cache_write_usd, base.output_usd) == (
        D("0.0004"),
        D("0.00003"),
        D("0.000375"),
        D("0.005"),
    )
    assert base.server_usd == D(1)
    assert base.total_usd == D("1.005805")

    above = price_response(custom(threshold=1_000), at.model_copy(update={"input_tokens": 401}))
    assert above.long_context
    assert (above.input_usd, above.cached_input_usd, above.cache_write_usd, above.output_usd) == (
        D("0.000802"),  # 401 x $1/M x 2
        D("0.00006"),  # 300 x $0.1/M x 2
        D("0.00075"),  # 300 x $1.25/M x 2
        D("0.015"),  # 1,000 x $5/M x 3
    )
    assert above.server_usd == D(1)  # server time never pays the premium
    assert above.total_usd == D("1.016612")
    # Each input category counts towards the threshold.
    for field in ("cached_input_tokens", "cache_write_tokens"):
        assert price_response(custom(threshold=1_000), at.model_copy(update={field: 301})).long_context


def test_without_a_threshold_no_response_is_long_context() -> None:
    cost = price_response(custom(threshold=None), usage(input_tokens=5_000_000, output_tokens=1))
    assert not cost.long_context
    assert cost.input_usd == D(5) and cost.output_usd == D("0.000005")


def test_each_category_is_quantized_half_even_to_a_picodollar() -> None:
    resolved = custom(input="0.0000025", cached_input="0.0000035", cache_write="0.0000015", output="0.0000005")
    cost = price_response(resolved, usage(input_tokens=1, cached_input_tokens=1, cache_write_tokens=1, output_tokens=1))
    assert cost.input_usd == D("0.000000000002")  # 2.5e-12 rounds to even
    assert cost.cached_input_usd == D("0.000000000004")  # 3.5e-12 rounds to even
    assert cost.cache_write_usd == D("0.000000000002")  # 1.5e-12
    assert cost.output_usd == D("0")  # 0.5e-12
    assert cost.total_usd == D("0.000000000008")


def test_server_time_is_billed_per_hour_and_the_total_is_quantized() -> None:
    cost = price_response(custom(server_hour="1"), TokenUsage(server_seconds=1.0))
    with localcontext(Context(prec=60)):
        assert cost.server_usd == D(1) / D(3600)  # exact to sixty digits; only the total is quantized
    assert cost.total_usd == D("0.000277777778")
    assert price_response(custom(server_hour="7.2"), TokenUsage(server_seconds=0.5)).total_usd == D("0.001")


def test_response_cost_defaults() -> None:
    cost = ResponseCost(
        model="m",
        usage=TokenUsage(),
        input_usd=D(0),
        cached_input_usd=D(0),
        cache_write_usd=D(0),
        output_usd=D(0),
        total_usd=D(0),
        pricing_as_of=AS_OF,
    )
    assert cost.server_usd == 0
    assert cost.long_context is False
    assert cost.priced_by_fallback is False


# -- quantization -------------------------------------------------------------------------------


def test_quantize_usd_rounds_half_even_whatever_the_callers_context() -> None:
    assert str(USD_QUANTUM) == "1E-12"
    assert str(quantize_usd(D("0.0000000000025"))) == "2E-12"
    assert str(quantize_usd(D("0.0000000000035"))) == "4E-12"
    assert str(quantize_usd(D("0.00000000000250001"))) == "3E-12"
    assert str(quantize_usd(D("1.5"))) == "1.500000000000"
    assert str(quantize_usd(D(7))) == "7.000000000000"
    assert str(quantize_usd(D("-0"))) == "0E-12"  # never a negative zero
    assert str(quantize_usd(D("-0E-20"))) == "0E-12"
    assert str(quantize_usd(D("-2.5"))) == "-2.500000000000"
    with localcontext(Context(prec=3, rounding=ROUND_UP)):
        assert str(quantize_usd(D("123.4567890000004"))) == "123.456789000000"
        assert str(infrastructure_cost(1.0, D(1))) == "0.000277777778"


def test_ledger_sums_in_a_sixty_digit_context_whatever_the_callers_context() -> None:
    big = CostLedger(total_usd=D("1e29"))
    tiny = CostLedger(total_usd=D("1e-30"))
    with localcontext(Context(prec=200)):
        exact = big.merge(tiny).total_usd  # 60 significant digits: exact
        rounded = CostLedger(total_usd=D("1e30")).merge(tiny).total_usd  # 61 digits: rounded
    assert exact == D("100000000000000000000000000000.000000000000000000000000000001")
    assert rounded == D("1e30")
    with localcontext(Context(prec=3)):
        assert big.merge(tiny).total_usd == exact


# -- the ledger ---------------------------------------------------------------------------------


def test_an_empty_ledger_is_all_zero_and_counts_are_never_negative() -> None:
    empty = CostLedger()
    assert empty.responses == 0 and empty.usage == TokenUsage()
    assert (empty.input_usd, empty.cached_input_usd, empty.cache_write_usd, empty.output_usd) == (D(0),) * 4
    assert empty.total_usd == 0
    assert (empty.long_context_responses, empty.fallback_priced_responses, empty.fallback_priced_models) == (0, 0, ())
    for field in ("responses", "long_context_responses", "fallback_priced_responses"):
        assert getattr(CostLedger.model_validate({field: 0}), field) == 0
        with pytest.raises(ValueError, match="greater than or equal to 0"):
            CostLedger.model_validate({field: -1})


def test_ledger_add_counts_one_response_with_its_flags() -> None:
    prices = default_pricing()
    listed = cost_of("gpt-5.4", usage(input_tokens=272_001, cached_input_tokens=3, output_tokens=100), prices)
    unlisted = cost_of("zz-unlisted", usage(input_tokens=10, cache_write_tokens=20, output_tokens=5), prices)
    one = CostLedger().add(listed)
    assert one.responses == 1
    assert one.usage == listed.usage
    assert (one.input_usd, one.cached_input_usd, one.cache_write_usd, one.output_usd, one.total_usd) == (
        listed.input_usd,
        listed.cached_input_usd,
        listed.cache_write_usd,
        listed.output_usd,
        listed.total_usd,
    )
    assert (one.long_context_responses, one.fallback_priced_responses, one.fallback_priced_models) == (1, 0, ())
    two = one.add(unlisted)
    assert two.responses == 2
    assert (two.long_context_responses, two.fallback_priced_responses) == (1, 1)
    assert two.fallback_priced_models == ("zz-unlisted",)
    assert two.cache_write_usd == unlisted.cache_write_usd
    assert two.total_usd == listed.total_usd + unlisted.total_usd
    assert one.responses == 1  # add returns a new ledger


def test_ledger_merge_adds_every_field() -> None:
    first = CostLedger(
        responses=2,
        usage=TokenUsage(input_tokens=1, cached_input_tokens=2, cache_write_tokens=3, output_tokens=4),
        input_usd=D("0.5"),
        cached_input_usd=D("0.25"),
        cache_write_usd=D("0.125"),
        output_usd=D("4"),
        total_usd=D("0.5"),
        long_context_responses=2,
        fallback_priced_responses=2,
        fallback_priced_models=("m-model", "b-model"),
    )
    second = CostLedger(
        responses=3,
        usage=TokenUsage(input_tokens=10, cached_input_tokens=20, cache_write_tokens=30, output_tokens=40),
        input_usd=D("0.25"),
        cached_input_usd=D("0.5"),
        cache_write_usd=D("3"),
        output_usd=D("0.125"),
        total_usd=D("0.25"),
        long_context_responses=3,
        fallback_priced_responses=3,
        fallback_priced_models=("c-model", "b-model"),
    )
    merged = first.merge(second)
    assert merged == CostLedger(
        responses=5,
        usage=TokenUsage(input_tokens=11, cached_input_tokens=22, cache_write_tokens=33, output_tokens=44),
        input_usd=D("0.75"),
        cached_input_usd=D("0.75"),
        cache_write_usd=D("3.125"),
        output_usd=D("4.125"),
        total_usd=D("0.75"),
        long_context_responses=5,
        fallback_priced_responses=5,
        fallback_priced_models=("b-model", "c-model", "m-model"),
    )
    assert second.merge(first) == merged


# -- infrastructure: what is rejected and why --------------------------------------------------


def test_infrastructure_cost_accepts_zero_and_fractions() -> None:
    assert infrastructure_cost(0.5, 0.5) == D("0.000069444444")
    assert infrastructure_cost(0.5, D("7.2")) == D("0.001")
    assert infrastructure_cost(7200, 0) == 0
    assert infrastructure_cost(0.0, D(0)) == 0
    assert infrastructure_cost(-0.0, 1.0) == 0


@pytest.mark.parametrize(
    ("seconds", "rate", "message"),
    [
        (float("nan"), 1.0, "vm_seconds must be finite, got nan"),
        (float("-inf"), 1.0, "vm_seconds must be finite, got -inf"),
        (1.0, float("inf"), "hourly_usd must be finite, got inf"),
        (1.0, D("NaN"), "hourly_usd must be a finite amount >= 0, got Decimal('NaN')"),
        (1.0, D("Infinity"), "hourly_usd must be a finite amount >= 0, got Decimal('Infinity')"),
        (1.0, D("-Infinity"), "hourly_usd must be a finite amount >= 0, got Decimal('-Infinity')"),
        (1.0, D("-1"), "hourly_usd must be a finite amount >= 0, got Decimal('-1')"),
        (1.0, D("-0.5"), "hourly_usd must be a finite amount >= 0, got Decimal('-0.5')"),
        (-0.5, 1.0, "vm_seconds must be a finite amount >= 0, got -0.5"),
        (1.0, -1e-9, "hourly_usd must be a finite amount >= 0, got -1e-09"),
    ],
)
def test_infrastructure_cost_names_the_bad_input(seconds: float, rate: float | Decimal, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        infrastructure_cost(seconds, rate)
    assert str(caught.value) == message

"""Each admission check's exact outcome, called through :func:`autocad_bench.admission.admit`.

The plan report is what an operator reads before spending money: these tests pin every check's
step, verdict, reason and details for the situations that decide them (credentials missing or
passed on, a catalog that answers less, more or nothing, prices declared by a provider or taken
from the fallback, a pinned table, an unknown evaluator, preflight capacity), with stand-in
providers registered in a private registry and the example-pool backend against a loopback
health server.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from autocad_bench.admission import AdmissionCheck, AdmissionOptions, AssignmentReport, PlanReport, admit
from autocad_bench.admission.admit import describe_rates
from autocad_bench.admission.suites import resolve_task_suite
from autocad_bench.api import load
from autocad_bench.config import effective_budgets
from autocad_bench.costs.pricing import ModelPrice, default_pricing, fallback_price
from autocad_bench.errors import ConfigError
from autocad_bench.plugins.host import PluginHost
from autocad_bench.plugins.registry import PluginRegistry, register_model_provider
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec
from tests.core.batch_configs import SCRIPT, pool_config

FREE = " (free: a self-hosted model's GPU time is not counted unless you set a price)"


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    variant: str = "a"
    price: list[Decimal] | None = None


class Acme(ModelProvider):
    """A stand-in provider: needs ``ACME_KEY``, passes ``ACME_BASE_URL`` on when set, answers
    the catalog with whatever the test put in :attr:`answer`, and declares the price its
    options state (``price``: input, output, server hour)."""

    name = "acme"
    options_model = _Options
    credential_env = ("ACME_KEY",)
    optional_env = ("ACME_BASE_URL",)
    answer: ClassVar[Any] = None

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        if Acme.answer is None:
            return [CatalogEntry(provider="acme", model=m.model, available=True) for m in models]
        return list(Acme.answer(models))

    def declared_price(self, model: ModelSpec) -> ModelPrice | None:
        price = self.parse_options(model).price
        if price is None:
            return None
        rate_in, rate_out, hour = price
        return ModelPrice(input=rate_in, cached_input=rate_in, cache_write=rate_in, output=rate_out,
                          server_hour=hour)

    def open_session(self, request: Any, credentials: Credentials) -> Any:
        raise NotImplementedError


@pytest.fixture
def url(health_server: tuple[str, str]) -> str:
    return health_server[0]


@pytest.fixture(autouse=True)
def _default_answer() -> Any:
    Acme.answer = None
    yield
    Acme.answer = None


def acme(n: int, model: str = "m1", **options: Any) -> dict[str, Any]:
    return {"rollout_id": f"r{n}", "task_id": f"t{n}", "provider": "acme", "model": model,
            "provider_options": options}


def scripted(n: int) -> dict[str, Any]:
    return {"rollout_id": f"r{n}", "task_id": f"t{n}", "provider": "scripted", "model": "replay",
            "provider_options": {"script": str(SCRIPT)}}


def plan(tmp_path: Path, url: str, rollouts: list[dict[str, Any]], *, env: dict[str, str] | None = None,
         mode: str = "plan", skip_catalog: bool = False, **overrides: Any) -> PlanReport:
    config = pool_config([url, url], tmp_path / "leases", **overrides)
    config["rollouts"] = rollouts
    config["expected_rollouts"] = overrides.get("expected_rollouts", len(rollouts) * config.get("trials", 1))
    environ = {"EXAMPLE_POOL_TOKEN": "health-token-for-tests-31c9", **(env or {})}
    registry = PluginRegistry()
    register_model_provider(Acme(), registry=registry)
    loaded = load(config, base_dir=tmp_path)
    admission = admit(loaded, PluginHost(registry=registry, environ=environ), environ,
                      effective_budgets(loaded.config.budgets, environ=environ),
                      AdmissionOptions(mode=mode, skip_direct_model_check=skip_catalog))
    return admission.report


def check(report: PlanReport, name: str) -> AdmissionCheck:
    (found,) = [c for c in report.checks if c.name == name]
    return found


def where(n: int) -> str:
    return f"<configuration>: $.rollouts[{n}]"


# --- credentials (step 4) -------------------------------------------------------------


def test_a_missing_credential_names_every_assignment_and_its_trials(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [acme(1), acme(2, "m2")], trials=3)
    credentials = check(report, "credentials")
    assert (credentials.step, credentials.passed) == (4, False)
    assert credentials.reason == "missing environment variables: ACME_KEY (needed by r1 (3 trials), r2 (3 trials))"
    assert credentials.details == {"missing": ["ACME_KEY"]}


def test_two_trials_are_counted_as_two(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [acme(1)], trials=2)
    assert check(report, "credentials").reason == "missing environment variables: ACME_KEY (needed by r1 (2 trials))"


def test_present_credentials_and_the_optional_ones_passed_on(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [acme(1)], env={"ACME_KEY": "k", "ACME_BASE_URL": "http://127.0.0.1:1"})
    credentials = check(report, "credentials")
    assert (credentials.step, credentials.passed) == (4, True)
    assert credentials.reason == "present: ACME_KEY; also passed to the rollouts: ACME_BASE_URL"
    assert credentials.details == {"present": ["ACME_KEY"], "passed_on": ["ACME_BASE_URL"]}


def test_nothing_is_passed_on_when_no_optional_variable_is_set(tmp_path: Path, url: str) -> None:
    credentials = check(plan(tmp_path, url, [acme(1)], env={"ACME_KEY": "k"}), "credentials")
    assert credentials.reason == "present: ACME_KEY"
    assert credentials.details == {"present": ["ACME_KEY"]}


def test_evaluation_without_a_judge_needs_no_judge_credential(tmp_path: Path, url: str) -> None:
    import ezdxf
    from autocad_bench_evaluator.gold_cache import build_entry
    from autocad_bench_evaluator.spec import ScoringSpec

    gold = tmp_path / "gold.dxf"
    doc = ezdxf.new()
    doc.modelspace().add_line((0, 0), (10, 0))
    doc.saveas(gold)
    build_entry(tmp_path / "gold-cache", "e1", gold, ScoringSpec(task_id="t1"))
    report = plan(tmp_path, url, [scripted(1)],
                  evaluation={"enabled": True, "gold_cache": str(tmp_path / "gold-cache"), "evaluator_version": "e1"})
    assert check(report, "credentials").reason == "no credentials needed"
    gold_cache = check(report, "gold_cache")
    assert (gold_cache.step, gold_cache.passed) == (5, True)


def test_a_judge_of_a_disabled_evaluation_needs_no_credential(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [scripted(1)], evaluation={"enabled": False, "judge": {"model": "gpt-5.1"}})
    assert check(report, "credentials").reason == "no credentials needed"


def test_an_unknown_evaluator_fails_the_gold_cache_check(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [scripted(1)],
                  evaluation={"enabled": True, "evaluator": "nonesuch", "gold_cache": str(tmp_path),
                              "evaluator_version": "e1"})
    gold_cache = check(report, "gold_cache")
    assert (gold_cache.step, gold_cache.passed) == (5, False)
    assert gold_cache.reason.startswith("evaluation is enabled but ")
    assert "nonesuch" in gold_cache.reason
    assert not report.passed


# --- preflight (steps 6 and 7) ----------------------------------------------------------


def test_preflight_capacity_is_step_seven_and_the_rest_step_six(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [scripted(1)])
    steps = {c.name: c.step for c in report.checks if c.name.startswith("preflight.")}
    assert steps == {"preflight.token": 6, f"preflight.worker {url}": 6, "preflight.capacity": 7}
    assert check(report, "broker_version").step == 6


def test_the_backend_checks_its_settings_once_the_rest_is_valid(tmp_path: Path, url: str) -> None:
    # the backend's own validation runs on a configuration core found valid, so a duplicate
    # id is reported alone; fixed, the wrong setting is reported next
    bad_settings = {"backend": "example-pool", "broker_version": "windows-autocad-2019-v11",
                    "settings": {"workers": "not-a-list", "token_env": "EXAMPLE_POOL_TOKEN",
                                 "lease_dir": str(tmp_path / "leases")}}
    with pytest.raises(ConfigError) as raised:
        plan(tmp_path, url, [scripted(1), {**scripted(2), "rollout_id": "r1"}], infrastructure=bad_settings)
    assert [p.location for p in raised.value.problems] == ["<configuration>: $.rollouts[1].rollout_id"]
    with pytest.raises(ConfigError) as raised:
        plan(tmp_path, url, [scripted(1), scripted(2)], infrastructure=bad_settings)
    assert raised.value.problems and all(".infrastructure.settings.workers" in p.location
                                         for p in raised.value.problems)


# --- model catalog (step 8) -----------------------------------------------------------------


def test_a_provider_without_credentials_is_not_asked_and_the_others_still_are(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [acme(1), scripted(2)])
    missing = check(report, "model_catalog.acme")
    assert (missing.step, missing.passed, missing.reason) == (8, False, "not checked: credentials missing")
    listed = check(report, "model_catalog.scripted")
    assert (listed.step, listed.passed) == (8, True)
    assert listed.reason == "replay: provider 'scripted' has no live catalog; the id was not checked"


def test_an_available_model_without_a_reason_reads_available(tmp_path: Path, url: str) -> None:
    catalog = check(plan(tmp_path, url, [acme(1)], env={"ACME_KEY": "k"}), "model_catalog.acme")
    assert (catalog.step, catalog.passed, catalog.reason) == (8, True, "m1: available")
    assert catalog.details == {"models": [{"provider": "acme", "model": "m1", "available": True, "image_input": None,
                                           "reason": "", "locations": [where(0)]}]}


def test_an_unavailable_model_names_every_assignment_that_uses_it(tmp_path: Path, url: str) -> None:
    Acme.answer = lambda models: [CatalogEntry(provider="acme", model=m.model, available=False) for m in models]
    catalog = check(plan(tmp_path, url, [acme(1), acme(2)], env={"ACME_KEY": "k"}), "model_catalog.acme")
    assert catalog.passed is False
    assert catalog.reason == f"m1 ({where(0)}, {where(1)}): unavailable"


def test_entries_answered_in_order_keep_their_own_assignments(tmp_path: Path, url: str) -> None:
    # one model id with two option sets: two specs, answered one entry each, in order
    Acme.answer = lambda models: [CatalogEntry(provider="acme", model=m.model, available=False,
                                               reason=f"variant {m.options['variant']} gone") for m in models]
    catalog = check(plan(tmp_path, url, [acme(1, variant="a"), acme(2, variant="b")], env={"ACME_KEY": "k"}),
                    "model_catalog.acme")
    assert catalog.reason == f"m1 ({where(0)}): variant a gone; m1 ({where(1)}): variant b gone"


def test_fewer_entries_than_specs_are_placed_by_model_id(tmp_path: Path, url: str) -> None:
    Acme.answer = lambda models: [CatalogEntry(provider="acme", model="m2", available=False, reason="gone")]
    catalog = check(plan(tmp_path, url, [acme(1), acme(2, "m2")], env={"ACME_KEY": "k"}), "model_catalog.acme")
    assert catalog.reason == f"m2 ({where(1)}): gone"


def test_more_entries_than_specs_name_the_one_not_asked_for(tmp_path: Path, url: str) -> None:
    Acme.answer = lambda models: [CatalogEntry(provider="acme", model="m1", available=True, reason="ok"),
                                  CatalogEntry(provider="acme", model="m1-alias", available=False, reason="retired")]
    catalog = check(plan(tmp_path, url, [acme(1)], env={"ACME_KEY": "k"}), "model_catalog.acme")
    assert catalog.passed is False
    assert catalog.reason == "m1: ok; m1-alias (not in the configuration): retired"


def test_a_catalog_that_answers_nothing_fails(tmp_path: Path, url: str) -> None:
    Acme.answer = lambda models: []
    catalog = check(plan(tmp_path, url, [acme(1)], env={"ACME_KEY": "k"}), "model_catalog.acme")
    assert (catalog.step, catalog.passed, catalog.reason) == (8, False, "provider returned no catalog entries")


def test_skipping_the_catalog_check_passes_a_plan_but_never_an_execution(tmp_path: Path, url: str) -> None:
    planned = check(plan(tmp_path, url, [scripted(1)], skip_catalog=True), "model_catalog")
    assert (planned.step, planned.passed) == (8, True)
    task = {**scripted(1), "task_id": "line-and-circle"}
    executed = check(plan(tmp_path, url, [task], skip_catalog=True, mode="execute",
                          tasks_dir=str(SCRIPT.parents[1] / "tasks")), "model_catalog")
    assert (executed.step, executed.passed) == (8, False)
    assert executed.reason == "skipped (--skip-direct-model-check); execute mode never skips it"


# --- pricing (step 8) ---------------------------------------------------------------------


@pytest.mark.parametrize(("price", "free"), [
    ([0, 0, 0], True), ([0, 2, 0], False), ([1, 1, 0], False), ([0, 0, 2], False), ([2, 0, 0], False)])
def test_a_declared_price_is_a_warning_and_free_only_when_nothing_is_billed(
        tmp_path: Path, url: str, price: list[float], free: bool) -> None:
    report = plan(tmp_path, url, [acme(1, price=price)], env={"ACME_KEY": "k"})
    rate_in, rate_out, hour = (Decimal(str(v)) for v in price)
    rates = describe_rates(ModelPrice(input=rate_in, cached_input=rate_in, cache_write=rate_in, output=rate_out,
                                      server_hour=hour))
    assert report.warnings == [f"acme/m1 is billed at the rates its provider_options declare: {rates}"
                               + (FREE if free else "")]
    pricing = check(report, "pricing")
    assert (pricing.step, pricing.passed) == (8, True)
    assert pricing.reason == (f"every model is listed in the price table (as of {default_pricing().as_of}) "
                              "or priced by its provider's options (1)")
    assert pricing.details == {"as_of": default_pricing().as_of.isoformat(), "fallback_priced": []}


def test_a_model_without_a_declared_price_is_priced_by_the_fallback(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [acme(1, price=[1, 2, 0]), acme(2, "m2")], env={"ACME_KEY": "k"})
    rates = describe_rates(fallback_price(default_pricing()))
    as_of = default_pricing().as_of
    declared = describe_rates(ModelPrice(input=Decimal(1), cached_input=Decimal(1), cache_write=Decimal(1),
                                         output=Decimal(2)))
    assert report.warnings == [
        f"acme/m1 is billed at the rates its provider_options declare: {declared}",
        f"acme/m2 is not in the price table (as of {as_of}): it will be billed at the fallback rate, the highest "
        f"listed: {rates}; cost caps and the summary use that rate (add the model to AUTOCAD_BENCH_PRICING_JSON "
        "to price it exactly)",
    ]
    pricing = check(report, "pricing")
    assert (pricing.step, pricing.passed) == (8, True)
    assert pricing.reason == f"1 model(s) priced by fallback at {rates}: acme/m2"
    assert pricing.details["fallback_priced"] == ["acme/m2"]


def test_a_model_missing_from_a_pinned_table_points_at_the_pinned_table(tmp_path: Path, url: str) -> None:
    listed = {"input": 1, "cached_input": 0.1, "cache_write": 1, "output": 2}
    report = plan(tmp_path, url, [scripted(1)], pricing={"as_of": "2026-01-01", "models": {"other": listed}})
    (warning,) = report.warnings
    assert warning.startswith("scripted/replay is not in the pinned $.pricing (as of 2026-01-01): ")
    assert warning.endswith("(add the model to $.pricing to price it exactly)")


def test_a_table_listing_every_model_says_where_it_came_from(tmp_path: Path, url: str) -> None:
    listed = {"input": 1, "cached_input": 0.1, "cache_write": 1, "output": 2}
    report = plan(tmp_path, url, [scripted(1)], pricing={"as_of": "2026-01-01", "models": {"replay": listed}})
    pricing = check(report, "pricing")
    assert (pricing.step, pricing.passed) == (8, True)
    assert pricing.reason == "every model is listed in the pinned $.pricing (as of 2026-01-01)"
    assert report.warnings == []


def test_an_unreadable_price_file_fails_the_pricing_check(tmp_path: Path, url: str) -> None:
    missing = tmp_path / "no-such-prices.json"
    report = plan(tmp_path, url, [scripted(1)], env={"AUTOCAD_BENCH_PRICING_JSON": str(missing)})
    pricing = check(report, "pricing")
    assert (pricing.step, pricing.passed) == (8, False)
    assert str(missing) in pricing.reason
    assert not report.passed


def test_rates_are_described_with_their_premium_and_server_time() -> None:
    base = {"input": Decimal("1.5"), "cached_input": Decimal("0.15"), "cache_write": Decimal("1.875"),
            "output": Decimal(6)}
    assert describe_rates(ModelPrice(**base)) == \
        "input $1.5, cached input $0.15, cache write $1.875, output $6 per million tokens"
    assert describe_rates(ModelPrice(**base, long_context_threshold_tokens=200000,
                                     long_context_input_multiplier=Decimal(2),
                                     long_context_output_multiplier=Decimal("1.5"))) == (
        "input $1.5, cached input $0.15, cache write $1.875, output $6 per million tokens "
        "(x2 input, x1.5 output above 200000 input tokens)")
    assert describe_rates(ModelPrice(**base, server_hour=Decimal(3))) == (
        "input $1.5, cached input $0.15, cache write $1.875, output $6 per million tokens, "
        "plus $3 per hour of server time")


# --- the report and the task suite ----------------------------------------------------------


def test_an_assignment_recorded_without_a_trial_is_its_first_trial() -> None:
    recorded = {"rollout_id": "r1", "assignment_id": "r1", "task_id": "t1", "provider": "p", "model": "m",
                "enabled": True, "infrastructure_backend": "b"}
    assert AssignmentReport.model_validate(recorded).trial == 1


def test_a_suite_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "suite.json").write_text("{not json")
    with pytest.raises(ConfigError) as raised:
        resolve_task_suite("suite.json", tmp_path, "batch.json: $.task_suite")
    (problem,) = raised.value.problems
    assert str(problem).startswith(f"{tmp_path / 'suite.json'}: invalid JSON: ")


def test_a_suite_file_of_the_wrong_shape_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": []}))
    with pytest.raises(ConfigError) as raised:
        resolve_task_suite("suite.json", tmp_path, "batch.json: $.task_suite")
    (problem,) = raised.value.problems
    assert str(problem).startswith(f"{tmp_path / 'suite.json'}: $.tasks: ")


def test_a_suite_lists_each_task_once(tmp_path: Path) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["a", "b", "a"]}))
    with pytest.raises(ConfigError) as raised:
        resolve_task_suite("suite.json", tmp_path, "batch.json: $.task_suite")
    assert [str(p) for p in raised.value.problems] == [f"{tmp_path / 'suite.json'}: $.tasks: task ids must be unique"]
    (tmp_path / "ok.json").write_text(json.dumps({"name": "s", "tasks": ["b", "a"]}))
    assert resolve_task_suite(str(tmp_path / "ok.json"), Path("/nonexistent"), "x") == ["b", "a"]
    many = [f"task-{k:03d}" for k in range(300)]  # past the integers Python keeps one object of
    (tmp_path / "many.json").write_text(json.dumps({"name": "many", "tasks": many}))
    assert resolve_task_suite("many.json", tmp_path, "x") == many


def test_a_plan_report_recorded_without_trials_ran_one() -> None:
    report = PlanReport.model_validate({
        "mode": "plan", "config": "c", "name": None, "passed": True, "infrastructure_backend": "b",
        "broker_version": "v", "execution_mode": "shared", "expected_rollouts": 1, "enabled_rollouts": 1,
        "allow_partial": False, "max_concurrency": 1, "admitted_wave": 1, "budgets": {}, "checks": [],
        "assignments": []})
    assert report.trials == 1


def test_a_suite_needs_a_name_and_may_hold_one_task(tmp_path: Path) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "", "tasks": ["a"]}))
    with pytest.raises(ConfigError) as raised:
        resolve_task_suite("suite.json", tmp_path, "batch.json: $.task_suite")
    assert [p.location for p in raised.value.problems] == [f"{tmp_path / 'suite.json'}: $.name"]
    (tmp_path / "one.json").write_text(json.dumps({"name": "one", "tasks": ["a"]}))
    assert resolve_task_suite("one.json", tmp_path, "x") == ["a"]


def test_tasks_in_another_order_than_the_suite_are_refused_either_way(tmp_path: Path, url: str) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["t1", "t2"]}))
    with pytest.raises(ConfigError) as raised:
        plan(tmp_path, url, [scripted(2), scripted(1)], task_suite="suite.json")
    assert [p.message for p in raised.value.problems] == [
        "scripted/replay runs tasks ['t2', 't1'] but task suite 'suite.json' is ['t1', 't2'] (same tasks, same order)"]


def test_an_unknown_provider_after_a_known_one_is_reported(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as raised:
        plan(tmp_path, url, [scripted(1), {**scripted(2), "provider": "nonesuch"}])
    assert [p.location for p in raised.value.problems] == ["<configuration>: $.rollouts[1].provider"]
    assert raised.value.problems[0].message.startswith("unknown provider 'nonesuch' (installed: ")


def test_options_are_checked_after_a_provider_that_failed(tmp_path: Path, url: str) -> None:
    bad_options = {**scripted(2), "provider_options": {"script": str(SCRIPT), "nonsense": 1}}
    with pytest.raises(ConfigError) as raised:
        plan(tmp_path, url, [{**scripted(1), "provider": "nonesuch"}, bad_options])
    locations = [p.location for p in raised.value.problems]
    assert locations[0] == "<configuration>: $.rollouts[0].provider"
    assert "<configuration>: $.rollouts[1].provider_options.nonsense" in locations


def test_a_provider_that_fails_to_load_is_a_located_problem(tmp_path: Path, url: str) -> None:
    class Impostor(Acme):
        name = "scripted"  # also installed under that name: a duplicate, refused by the host

    registry = PluginRegistry()
    register_model_provider(Impostor(), registry=registry)
    config = pool_config([url, url], tmp_path / "leases", expected_rollouts=1)
    config["rollouts"] = [scripted(1)]
    environ = {"EXAMPLE_POOL_TOKEN": "health-token-for-tests-31c9"}
    loaded = load(config, base_dir=tmp_path)
    with pytest.raises(ConfigError) as raised:
        admit(loaded, PluginHost(registry=registry, environ=environ), environ,
              effective_budgets(loaded.config.budgets, environ=environ), AdmissionOptions())
    assert [p.location for p in raised.value.problems] == ["<configuration>: $.rollouts[0].provider"]


def test_a_tool_mode_the_provider_cannot_speak_is_one_problem(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as raised:
        plan(tmp_path, url, [{**scripted(1), "tool_mode": "native"}])
    assert [p.location for p in raised.value.problems] == ["<configuration>: $.rollouts[0].tool_mode"]


def test_without_evaluation_the_gold_cache_step_passes_and_says_why(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [scripted(1)])
    gold_cache = check(report, "gold_cache")
    assert (gold_cache.step, gold_cache.passed) == (5, True)
    assert gold_cache.reason == "evaluation disabled: no gold cache needed"
    assert report.mode == "plan"


def test_the_default_options_are_the_strict_ones() -> None:
    assert AdmissionOptions() == AdmissionOptions(allow_partial=False, skip_direct_model_check=False, mode="plan",
                                                  batch_id="plan")


def test_the_first_two_steps_are_parsing_and_unique_assignments(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [scripted(1), scripted(2)])
    assert (check(report, "config_parsed").step, check(report, "unique_assignments").step) == (1, 2)
    assert check(report, "unique_assignments").reason == "2 unique rollout ids and assignments"


def test_a_failed_provider_does_not_hide_the_next_ones_problems(tmp_path: Path, url: str) -> None:
    class Impostor(Acme):
        name = "scripted"

    registry = PluginRegistry()
    register_model_provider(Impostor(), registry=registry)
    register_model_provider(Acme(), registry=registry)
    config = pool_config([url, url], tmp_path / "leases", expected_rollouts=2)
    config["rollouts"] = [scripted(1), acme(2, nonsense=1)]
    environ = {"EXAMPLE_POOL_TOKEN": "health-token-for-tests-31c9"}
    loaded = load(config, base_dir=tmp_path)
    with pytest.raises(ConfigError) as raised:
        admit(loaded, PluginHost(registry=registry, environ=environ), environ,
              effective_budgets(loaded.config.budgets, environ=environ), AdmissionOptions())
    locations = [p.location for p in raised.value.problems]
    assert locations[0] == "<configuration>: $.rollouts[0].provider"
    assert "<configuration>: $.rollouts[1].provider_options.nonsense" in locations


def test_each_assignment_is_named_once_however_many_trials_it_runs(tmp_path: Path, url: str) -> None:
    Acme.answer = lambda models: [CatalogEntry(provider="acme", model=m.model, available=False) for m in models]
    catalog = check(plan(tmp_path, url, [acme(1)], env={"ACME_KEY": "k"}, trials=2), "model_catalog.acme")
    assert catalog.reason == f"m1 ({where(0)}): unavailable"


def test_three_hundred_option_sets_of_one_model_keep_their_own_assignments(tmp_path: Path, url: str) -> None:
    Acme.answer = lambda models: [CatalogEntry(provider="acme", model=m.model, available=m.options["variant"] != "v0",
                                               reason=m.options["variant"]) for m in models]
    rollouts = [acme(n, variant=f"v{n}") for n in range(300)]
    catalog = check(plan(tmp_path, url, rollouts, env={"ACME_KEY": "k"}), "model_catalog.acme")
    assert catalog.reason.startswith(f"m1 ({where(0)}): v0; m1: v1; m1: v2; ")
    assert catalog.reason.endswith("; m1: v299")


def test_the_first_declared_price_of_a_model_is_its_price(tmp_path: Path, url: str) -> None:
    report = plan(tmp_path, url, [acme(1, price=[1, 2, 0]), acme(2, price=[3, 4, 0]), acme(3, "m2", price=[5, 6, 0])],
                  env={"ACME_KEY": "k"})
    assert [w.split(": ", 1)[1] for w in report.warnings] == [
        describe_rates(ModelPrice(input=Decimal(n), cached_input=Decimal(n), cache_write=Decimal(n),
                                  output=Decimal(n + 1)))
        for n in (1, 5)]
    assert [w.split(" ", 1)[0] for w in report.warnings] == ["acme/m1", "acme/m2"]

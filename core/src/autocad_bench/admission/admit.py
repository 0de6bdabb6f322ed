"""The admission sequence: every check that must pass before the first sandbox starts.

Configuration problems (steps 1-3 and the offline parts of 4 and 6) are collected and
raised together as one :class:`ConfigError`; environment checks (credentials, backend
preflight, model catalogs) become report entries so plan mode shows all of them at once.
Nothing here creates or changes external state.

Checks that concern what the user wrote (unique ids and assignments, the task suite, tasks,
provider options) look at assignments; checks that concern what will run (the expected
count, credentials, preflight capacity, the report) look at every planned rollout, one per
(assignment, trial) (see :mod:`autocad_bench.config.trials`).

Besides pass/fail checks the report carries ``warnings``: things that do not stop a batch
but change what it means, such as a model the price table does not list (billed at the
fallback rate, named with that rate by the ``pricing`` check).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from autocad_bench.admission.report import AdmissionCheck, AssignmentReport, PlanReport
from autocad_bench.admission.suites import resolve_task_suite
from autocad_bench.config.loading import LoadedConfig
from autocad_bench.config.models import BudgetConfig, RolloutEntry
from autocad_bench.config.secrets import literal_credentials
from autocad_bench.config.trials import PlannedRollout, active_entries
from autocad_bench.costs.pricing import ModelPrice, PricingError, load_pricing, price_for, with_declared_prices
from autocad_bench.errors import ConfigError, PluginError, Problem, missing_extra_message
from autocad_bench.evaluators import GoldCacheCheckRequest, select_evaluator
from autocad_bench.infrastructure.models import (
    REJECTED_BROKER_VERSIONS,
    SUPPORTED_BROKER_VERSIONS,
    AssignmentView,
    PreflightReport,
    PreflightRequest,
)
from autocad_bench.plugins.host import PluginHandle, PluginHost
from autocad_bench.plugins.kinds import KINDS
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec
from autocad_bench.providers.options import tool_mode_message, tool_modes_of, validate_options
from autocad_bench.tasks import load_task


@dataclass(slots=True)
class AdmissionOptions:
    """Operator choices that change admission (CLI flags)."""

    allow_partial: bool = False
    skip_direct_model_check: bool = False
    mode: str = "plan"
    batch_id: str = "plan"


@dataclass(slots=True)
class Admission:
    """The outcome: the report, plus the loaded plugins execute mode goes on to use."""

    report: PlanReport
    backend: PluginHandle
    providers: dict[str, PluginHandle] = field(default_factory=dict)
    credential_names: dict[str, list[str]] = field(default_factory=dict)
    declared_prices: dict[str, ModelPrice] = field(default_factory=dict)
    """Rates providers declared for their models (:meth:`ModelProvider.declared_price`)."""


def model_spec(entry: RolloutEntry, base_dir: Path | None = None, tasks_dir: Path | None = None) -> ModelSpec:
    """The provider-facing view of a rollout entry; relative option paths resolve against
    ``base_dir``, and ``task_dir`` is the entry's folder under ``tasks_dir`` when there is one."""
    return ModelSpec(provider=entry.provider, model=entry.model, options=entry.provider_options,
                     tool_mode=entry.tool_mode, base_dir=base_dir,
                     task_dir=tasks_dir / entry.task_id if tasks_dir is not None else None)


def admit(
    loaded: LoadedConfig,
    host: PluginHost,
    environ: Mapping[str, str],
    budgets: BudgetConfig,
    options: AdmissionOptions,
) -> Admission:
    """Run the admission sequence; raise :class:`ConfigError` for configuration problems."""
    config = loaded.config
    planned = loaded.planned_rollouts()
    enabled = [r for r in planned if r.enabled]
    entries = active_entries(planned)
    problems: list[Problem] = []
    problems += _unique_ids(loaded)
    problems += _unique_assignments(loaded, entries)
    problems += _expected_count(loaded, enabled, options.allow_partial)
    unknown, unknown_problems = _unknown_providers(loaded, entries, host)
    problems += unknown_problems  # before the task suite: a misspelt provider explains a suite mismatch
    problems += _task_suite(loaded)
    problems += _tasks(loaded, entries, options)
    problems += _evaluation_settings(loaded)
    providers, provider_problems = _load_providers(loaded, entries, host, skip=unknown)
    problems += provider_problems
    problems += _broker_version(loaded)
    problems += literal_credentials(config.infrastructure.settings, loaded.at("$.infrastructure.settings"))
    backend: PluginHandle | None = None
    try:
        backend = host.infrastructure(config.infrastructure.backend)
    except PluginError as error:
        problems += [Problem(loaded.at("$.infrastructure.backend"), str(p)) for p in error.problems]
    if backend is not None and not problems:
        problems += backend.call(
            "validate_spec", spec=config.infrastructure, location=loaded.at("$.infrastructure")
        ) or []
    if problems:
        raise ConfigError(problems)
    assert backend is not None

    checks: list[AdmissionCheck] = [
        AdmissionCheck(step=1, name="config_parsed", passed=True,
                       reason="valid JSON; no unknown fields"),
        AdmissionCheck(step=2, name="unique_assignments", passed=True,
                       reason=f"{len(config.rollouts)} unique rollout ids and assignments"),
        _count_check(loaded, enabled, options.allow_partial),
    ]
    names, credentials_check = _credentials(loaded, enabled, providers, environ)
    checks.append(credentials_check)
    checks.extend(_gold_cache(loaded, enabled, host))
    checks.append(AdmissionCheck(step=6, name="broker_version", passed=True,
                                 reason=f"{config.infrastructure.broker_version} is supported"))
    preflight = _preflight(loaded, enabled, backend, options)
    checks.extend(
        AdmissionCheck(step=7 if ("quota" in c.name or "capacity" in c.name) else 6,
                       name=f"preflight.{c.name}", passed=c.passed, reason=c.reason,
                       details=c.details)
        for c in preflight.checks
    )
    checks.extend(_catalog(loaded, enabled, providers, environ, names, options))
    declared = _declared_prices(entries, providers, loaded.path.parent)
    pricing_check, warnings = _pricing(loaded, enabled, environ, declared)
    checks.append(pricing_check)
    passed = all(c.passed for c in checks)
    report = PlanReport(
        mode="execute" if options.mode == "execute" else "plan",
        config=loaded.label,
        name=config.name,
        passed=passed,
        infrastructure_backend=backend.name,
        broker_version=config.infrastructure.broker_version,
        execution_mode=config.execution_mode,
        expected_rollouts=config.expected_rollouts,
        trials=config.trials,
        enabled_rollouts=len(enabled),
        allow_partial=options.allow_partial,
        max_concurrency=config.max_concurrency,
        admitted_wave=min(preflight.admitted_wave, len(enabled), config.max_concurrency),
        budgets=budgets,
        checks=checks,
        warnings=warnings,
        assignments=[
            AssignmentReport(rollout_id=r.rollout_id, assignment_id=r.assignment_id, trial=r.trial,
                             task_id=r.task_id, provider=r.provider, model=r.model, enabled=r.enabled,
                             infrastructure_backend=backend.name)
            for r in planned
        ],
    )
    return Admission(report=report, backend=backend, providers=providers, credential_names=names,
                     declared_prices={model: price for model, (_, price) in declared.items()})


# --- step 2 ------------------------------------------------------------------------------


def _unique_ids(loaded: LoadedConfig) -> list[Problem]:
    first: dict[str, int] = {}
    problems = []
    for index, entry in enumerate(loaded.config.rollouts):
        if entry.rollout_id in first:
            problems.append(Problem(
                loaded.at(f"$.rollouts[{index}].rollout_id"),
                f"duplicate rollout id {entry.rollout_id!r} (first at $.rollouts[{first[entry.rollout_id]}])",
            ))
        else:
            first[entry.rollout_id] = index
    return problems


def _unique_assignments(loaded: LoadedConfig, entries: list[tuple[int, RolloutEntry]]) -> list[Problem]:
    # The tool mode is part of an assignment: one model in both modes is two measurements.
    first: dict[tuple[str, str, str, str], int] = {}
    problems = []
    for index, entry in entries:
        key = (entry.task_id, entry.provider, entry.model, entry.tool_mode)
        if key in first:
            problems.append(Problem(
                loaded.at(f"$.rollouts[{index}]"),
                f"duplicate assignment task {key[0]!r} / provider {key[1]!r} / model {key[2]!r} / "
                f"tool mode {key[3]!r} (first at $.rollouts[{first[key]}])",
            ))
        else:
            first[key] = index
    return problems


# --- step 3 ------------------------------------------------------------------------------


def _enabled_count(loaded: LoadedConfig, enabled: list[PlannedRollout]) -> str:
    """How the enabled rollouts come about: ``"2"``, or ``"2 assignments × 3 trials = 6"``."""  # noqa: RUF002
    trials = loaded.config.trials
    if trials == 1:
        return str(len(enabled))
    if loaded.only_rollouts is not None:
        return f"{len(enabled)} selected trial rollouts"
    assignments = len({r.index for r in enabled})
    return f"{assignments} assignments × {trials} trials = {len(enabled)}"  # noqa: RUF001


def _expected_count(loaded: LoadedConfig, enabled: list[PlannedRollout], allow_partial: bool) -> list[Problem]:
    config = loaded.config
    if not enabled:
        return [Problem(loaded.at("$.rollouts"), "no rollout is enabled")]
    if len(enabled) > config.expected_rollouts:
        # --allow-partial is for a deliberately smaller experiment; a larger one is a
        # configuration mistake (it would spend more than the operator planned for).
        return [Problem(
            loaded.at("$.expected_rollouts"),
            f"expects {config.expected_rollouts} enabled rollouts but the config enables "
            f"{_enabled_count(loaded, enabled)}: more than expected is never allowed (raise expected_rollouts)",
        )]
    if allow_partial or len(enabled) == config.expected_rollouts:
        return []
    return [Problem(
        loaded.at("$.expected_rollouts"),
        f"expects {config.expected_rollouts} enabled rollouts but the config enables "
        f"{_enabled_count(loaded, enabled)} (pass --allow-partial only for a deliberately smaller experiment)",
    )]


def _count_check(loaded: LoadedConfig, enabled: list[PlannedRollout], allow_partial: bool) -> AdmissionCheck:
    config = loaded.config
    count = len(enabled)
    described = _enabled_count(loaded, enabled)
    detail = "" if described == str(count) else f" ({described})"
    if count == config.expected_rollouts:
        reason = f"{count} enabled rollouts{detail}, as expected"
    else:
        reason = f"{count} of {config.expected_rollouts} expected rollouts enabled{detail} (--allow-partial)"
    if config.task_suite:
        reason += f"; every model runs task suite {config.task_suite!r} in order"
        if config.trials > 1:
            reason += f" in each of {config.trials} trials"
    return AdmissionCheck(step=3, name="expected_rollouts", passed=True, reason=reason,
                          details={"enabled": count, "expected": config.expected_rollouts,
                                   "trials": config.trials, "allow_partial": allow_partial})


def _task_suite(loaded: LoadedConfig) -> list[Problem]:
    """Every model runs the suite's tasks in order. This is a property of the assignments as
    written (every trial repeats them all), so a rerun selection of a few failed trials
    does not break it."""
    config = loaded.config
    if not config.task_suite:
        return []
    try:
        suite = resolve_task_suite(config.task_suite, loaded.path.parent, loaded.at("$.task_suite"))
    except ConfigError as error:
        return list(error.problems)
    by_model: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in config.enabled_rollouts:
        by_model[(entry.provider, entry.model)].append(entry.task_id)
    problems = []
    for (provider, model), tasks in by_model.items():
        if tasks != suite:
            problems.append(Problem(
                loaded.at("$.rollouts"),
                f"{provider}/{model} runs tasks {tasks} but task suite {config.task_suite!r} "
                f"is {suite} (same tasks, same order)",
            ))
    return problems


def _tasks(loaded: LoadedConfig, entries: list[tuple[int, RolloutEntry]], options: AdmissionOptions) -> list[Problem]:
    tasks_dir = loaded.tasks_dir
    if tasks_dir is None:
        if options.mode == "execute":
            return [Problem(loaded.at("$.tasks_dir"), "execute mode needs a task directory")]
        return []
    if not tasks_dir.is_dir():
        return [Problem(loaded.at("$.tasks_dir"), f"not a directory: {tasks_dir}")]
    problems: list[Problem] = []
    for index, entry in entries:
        try:
            load_task(tasks_dir, entry.task_id, loaded.at(f"$.rollouts[{index}].task_id"))
        except ConfigError as error:
            problems += error.problems
    return problems


def _evaluation_settings(loaded: LoadedConfig) -> list[Problem]:
    evaluation = loaded.config.evaluation
    if not evaluation.enabled:
        return []
    return [Problem(loaded.at(f"$.evaluation.{field}"), "required when evaluation is enabled (set "
                    '"evaluation": {"enabled": false} only for deliberately unevaluated runs)')
            for field in ("gold_cache", "evaluator_version") if not getattr(evaluation, field)]


# --- step 4 ------------------------------------------------------------------------------


def _unknown_providers(loaded: LoadedConfig, entries: list[tuple[int, RolloutEntry]],
                       host: PluginHost) -> tuple[set[str], list[Problem]]:
    """``unknown provider 'x' (installed: a, b)`` once per name not installed, at its first assignment."""
    installed = host.installed_names("providers")
    unknown: set[str] = set()
    problems: list[Problem] = []
    for index, entry in entries:
        if entry.provider in installed or entry.provider in unknown:
            continue
        unknown.add(entry.provider)
        extra = KINDS["providers"].extras.get(entry.provider)
        message = (missing_extra_message(f"provider {entry.provider!r}", extra, installed) if extra else
                   f"unknown provider {entry.provider!r} (installed: {', '.join(installed) or 'none'})")
        problems.append(Problem(loaded.at(f"$.rollouts[{index}].provider"), message))
    return unknown, problems


def _load_providers(loaded: LoadedConfig, entries: list[tuple[int, RolloutEntry]],
                    host: PluginHost, skip: set[str]) -> tuple[dict[str, PluginHandle], list[Problem]]:
    providers: dict[str, PluginHandle] = {}
    failed: set[str] = set(skip)
    problems: list[Problem] = []
    for index, entry in entries:
        where = loaded.at(f"$.rollouts[{index}]")
        if entry.provider in failed:
            continue
        if entry.provider not in providers:
            try:
                providers[entry.provider] = host.provider(entry.provider)
            except PluginError as error:
                failed.add(entry.provider)
                problems += [Problem(f"{where}.provider", str(p)) for p in error.problems]
                continue
        handle = providers[entry.provider]
        found = list(handle.call("validate_model_spec", model=model_spec(entry, loaded.path.parent, loaded.tasks_dir),
                                 location=where) or [])
        # The options contract holds even for a provider whose own validate_model_spec skips
        # it (an override that does not call super()): core validates through options_model.
        options_model = getattr(handle.plugin, "options_model", None)
        if options_model is not None:
            option_problems, _ = validate_options(options_model, entry.provider_options,
                                                  f"{where}.provider_options")
            found += [p for p in option_problems if p not in found]
        # Likewise the tool mode: a provider that cannot speak it would silently run the
        # other mode and its results would be filed under the wrong conditions.
        modes = tool_modes_of(handle.plugin)
        if entry.tool_mode not in modes:
            mode_problem = Problem(f"{where}.tool_mode", tool_mode_message(entry.provider, entry.tool_mode, modes))
            if mode_problem not in found:
                found.append(mode_problem)
        problems += found
    return providers, problems


def optional_environment(provider: PluginHandle, environ: Mapping[str, str]) -> list[str]:
    """The provider's ``optional_env`` names that are set in ``environ``.

    A provider may declare, as a class attribute ``optional_env``, variables it reads when
    they are set (``OPENAI_BASE_URL``, the AWS chain's variables). A child harness sees only the base
    environment and the names admission hands it, so these are handed on together with the
    credential names (to the catalog check and to every rollout), but only when set: a
    missing one is never an error.
    """
    declared = getattr(provider.plugin, "optional_env", ())
    if not isinstance(declared, (tuple, list)):
        return []
    return [name for name in declared if isinstance(name, str) and environ.get(name)]


def _credentials(
    loaded: LoadedConfig, enabled: list[PlannedRollout], providers: Mapping[str, PluginHandle],
    environ: Mapping[str, str],
) -> tuple[dict[str, list[str]], AdmissionCheck]:
    """Environment names per planned rollout (every trial): the credentials the provider
    names (asked once per assignment), then its :func:`optional_environment` names that are set."""
    config = loaded.config
    # Name -> assignment id -> how many of its trials need it (named once per assignment).
    needed: dict[str, dict[str, int]] = defaultdict(dict)
    names_by_rollout: dict[str, list[str]] = {}
    by_assignment: dict[int, list[str]] = {}
    required_by_assignment: dict[int, list[str]] = {}
    passed_on: set[str] = set()
    for rollout in enabled:
        if rollout.index not in by_assignment:
            spec = model_spec(rollout.entry, loaded.path.parent, loaded.tasks_dir)
            required = list(providers[rollout.provider].call("credential_names", model=spec) or [])
            optional = [n for n in optional_environment(providers[rollout.provider], environ) if n not in required]
            required_by_assignment[rollout.index] = required
            by_assignment[rollout.index] = required + optional
            passed_on.update(optional)
        names_by_rollout[rollout.rollout_id] = by_assignment[rollout.index]
        for name in required_by_assignment[rollout.index]:
            users = needed[name]
            users[rollout.assignment_id] = users.get(rollout.assignment_id, 0) + 1
    judge = config.evaluation.judge
    if config.evaluation.enabled and judge is not None and judge.enabled:
        needed[judge.credential_env]["vision judge"] = 1
    missing = sorted(name for name in needed if not environ.get(name))
    if missing:
        reason = "missing environment variables: " + "; ".join(
            f"{name} (needed by {_users(needed[name])})" for name in missing
        )
        check = AdmissionCheck(step=4, name="credentials", passed=False, reason=reason,
                               details={"missing": list(missing)})
    else:
        present = sorted(needed)
        reason = f"present: {', '.join(present)}" if present else "no credentials needed"
        details: dict[str, JsonValue] = {"present": list(present)}
        if passed_on:
            reason += f"; also passed to the rollouts: {', '.join(sorted(passed_on))}"
            details["passed_on"] = [name for name in sorted(passed_on)]
        check = AdmissionCheck(step=4, name="credentials", passed=True, reason=reason, details=details)
    return names_by_rollout, check


def _users(users: Mapping[str, int]) -> str:
    """``"r1, r2"``, or ``"r1 (3 trials), r2 (3 trials)"`` when assignments run several trials."""
    return ", ".join(user if count == 1 else f"{user} ({count} trials)" for user, count in users.items())


# --- step 5 ------------------------------------------------------------------------------


def _gold_cache(loaded: LoadedConfig, enabled: list[PlannedRollout], host: PluginHost) -> list[AdmissionCheck]:
    evaluation = loaded.config.evaluation
    if not evaluation.enabled:
        return [AdmissionCheck(step=5, name="gold_cache", passed=True,
                               reason="evaluation disabled: no gold cache needed")]
    try:
        evaluator = select_evaluator(evaluation.evaluator, host)
    except PluginError as error:
        return [AdmissionCheck(step=5, name="gold_cache", passed=False,
                               reason=f"evaluation is enabled but {error}")]
    root = loaded.gold_cache
    tasks = tuple(dict.fromkeys(r.task_id for r in enabled))
    problems: list[str] = evaluator.call("check_gold_cache", request=GoldCacheCheckRequest(
        root=root, evaluator_version=str(evaluation.evaluator_version), task_ids=tasks)) if root else []
    return [AdmissionCheck(
        step=5, name="gold_cache", passed=not problems,
        reason="; ".join(problems) if problems else
        f"{len(set(tasks))} entries verified for evaluator {evaluation.evaluator_version} in {root}",
    )]


# --- step 6/7 ----------------------------------------------------------------------------


def _broker_version(loaded: LoadedConfig) -> list[Problem]:
    version = loaded.config.infrastructure.broker_version
    if version in SUPPORTED_BROKER_VERSIONS:
        return []
    where = loaded.at("$.infrastructure.broker_version")
    if version in REJECTED_BROKER_VERSIONS:
        return [Problem(where, f"{version!r} is not supported: {REJECTED_BROKER_VERSIONS[version]}")]
    return [Problem(where, f"{version!r} is not a supported broker version "
                           f"(supported: {', '.join(SUPPORTED_BROKER_VERSIONS)})")]


def _preflight(loaded: LoadedConfig, enabled: list[PlannedRollout], backend: PluginHandle,
               options: AdmissionOptions) -> PreflightReport:
    config = loaded.config
    request = PreflightRequest(
        batch_id=options.batch_id,
        spec=config.infrastructure,
        assignments=tuple(
            AssignmentView(rollout_id=r.rollout_id, task_id=r.task_id, provider=r.provider, model=r.model)
            for r in enabled
        ),
        max_concurrency=config.max_concurrency,
        evaluation_enabled=config.evaluation.enabled,
        evaluation_bucket=config.evaluation.bucket,
    )
    report = backend.call("preflight", request=request)
    if not isinstance(report, PreflightReport):
        raise PluginError(f"backend {backend.name!r} preflight returned {type(report).__name__}, "
                          "not a PreflightReport")
    return report


# --- step 8 ------------------------------------------------------------------------------


def _catalog(
    loaded: LoadedConfig,
    enabled: list[PlannedRollout],
    providers: Mapping[str, PluginHandle],
    environ: Mapping[str, str],
    names_by_rollout: Mapping[str, list[str]],
    options: AdmissionOptions,
) -> list[AdmissionCheck]:
    if options.skip_direct_model_check:
        return [AdmissionCheck(step=8, name="model_catalog", passed=options.mode != "execute",
                               reason="skipped (--skip-direct-model-check); execute mode never skips it")]
    by_provider: dict[str, list[PlannedRollout]] = defaultdict(list)
    for rollout in enabled:
        by_provider[rollout.provider].append(rollout)
    checks = []
    for provider, rollouts in sorted(by_provider.items()):
        names = sorted({n for r in rollouts for n in names_by_rollout[r.rollout_id]})
        if any(not environ.get(n) for n in names):
            checks.append(AdmissionCheck(step=8, name=f"model_catalog.{provider}", passed=False,
                                         reason="not checked: credentials missing"))
            continue
        # One spec per distinct (model, options); each remembers the assignments that use it.
        by_key: dict[tuple[str, str], tuple[ModelSpec, list[str]]] = {}
        for rollout in rollouts:
            entry = rollout.entry
            key = (entry.model, str(entry.provider_options))
            if key not in by_key:
                by_key[key] = (model_spec(entry, loaded.path.parent), [])
            where = loaded.at(f"$.rollouts[{rollout.index}]")
            if where not in by_key[key][1]:
                by_key[key][1].append(where)
        specs = [spec for spec, _ in by_key.values()]
        entries_out: list[CatalogEntry] = providers[provider].call(
            "check_model_catalog", models=specs, credentials=Credentials.from_environ(names, environ)
        ) or []
        # Providers answer one entry per spec, in order; fall back to the model id otherwise.
        if len(entries_out) == len(specs):
            wheres = [where for _, where in by_key.values()]
        else:
            by_model = {spec.model: where for spec, where in by_key.values()}
            wheres = [by_model.get(e.model, []) for e in entries_out]
        unavailable = [e for e in entries_out if not e.available]
        reason = "; ".join(
            f"{e.model}: {e.reason or 'available'}" if e.available
            else f"{e.model} ({', '.join(where) or 'not in the configuration'}): {e.reason or 'unavailable'}"
            for e, where in zip(entries_out, wheres, strict=True))
        checks.append(AdmissionCheck(
            step=8, name=f"model_catalog.{provider}", passed=not unavailable and len(entries_out) > 0,
            reason=reason or "provider returned no catalog entries",
            details={"models": [{**e.model_dump(mode="json"), "locations": list(where)}
                                for e, where in zip(entries_out, wheres, strict=True)]},
        ))
    return checks


# --- pricing -----------------------------------------------------------------------------


def describe_rates(price: ModelPrice) -> str:
    """``input $x, cached input $y, cache write $z, output $w per million tokens`` (+ long-context premium)."""
    text = (f"input ${price.input}, cached input ${price.cached_input}, cache write ${price.cache_write}, "
            f"output ${price.output} per million tokens")
    if price.long_context_threshold_tokens is not None:
        text += (f" (x{price.long_context_input_multiplier} input, x{price.long_context_output_multiplier} "
                 f"output above {price.long_context_threshold_tokens} input tokens)")
    if price.server_hour:
        text += f", plus ${price.server_hour} per hour of server time"
    return text


def _declared_prices(entries: list[tuple[int, RolloutEntry]], providers: Mapping[str, PluginHandle],
                     base_dir: Path) -> dict[str, tuple[str, ModelPrice]]:
    """Model id -> (provider, rates) for every model whose provider declares its price."""
    declared: dict[str, tuple[str, ModelPrice]] = {}
    for _, entry in entries:
        handle = providers.get(entry.provider)
        declare = getattr(handle.plugin, "declared_price", None) if handle is not None else None
        if declare is None or entry.model in declared:
            continue
        price = declare(model_spec(entry, base_dir))
        if isinstance(price, ModelPrice):
            declared[entry.model] = (entry.provider, price)
    return declared


def _pricing(loaded: LoadedConfig, enabled: list[PlannedRollout], environ: Mapping[str, str],
             declared: Mapping[str, tuple[str, ModelPrice]] | None = None) -> tuple[AdmissionCheck, list[str]]:
    """Which price every enabled model is billed at; a warning per model that is not in the
    price table and so is billed at the conservative fallback (the highest listed rates), and
    one per model billed at the rates its provider declared from the rollout's options."""
    declared = declared or {}
    try:
        prices = with_declared_prices(load_pricing(environ, pinned=loaded.config.pricing),
                                      {model: price for model, (_, price) in declared.items()})
    except PricingError as error:
        return AdmissionCheck(step=8, name="pricing", passed=False,
                              reason="; ".join(str(p) for p in error.problems)), []
    declared_warnings = [f"{provider}/{model} is billed at the rates its provider_options declare: "
                         f"{describe_rates(price)}"
                         + (" (free: a self-hosted model's GPU time is not counted unless you set a price)"
                            if price.input == 0 and price.output == 0 and price.server_hour == 0 else "")
                         for model, (provider, price) in declared.items()
                         if any(r.model == model for r in enabled)]
    models = list(dict.fromkeys((r.provider, r.model) for r in enabled))
    fallback: list[tuple[str, str]] = []
    for provider, model in models:
        if price_for(model, prices).priced_by_fallback:
            fallback.append((provider, model))
    source = "the pinned $.pricing" if loaded.config.pricing is not None else "the price table"
    if not fallback:
        return AdmissionCheck(step=8, name="pricing", passed=True,
                              reason=f"every model is listed in {source} (as of {prices.as_of})"
                                     + (f" or priced by its provider's options ({len(declared_warnings)})"
                                        if declared_warnings else ""),
                              details={"as_of": prices.as_of.isoformat(), "fallback_priced": []}), declared_warnings
    rates = price_for(fallback[0][1], prices).price
    described = describe_rates(rates)
    where = "$.pricing" if loaded.config.pricing is not None else "AUTOCAD_BENCH_PRICING_JSON"
    warnings = [f"{provider}/{model} is not in {source} (as of {prices.as_of}): it will be billed at the "
                f"fallback rate, the highest listed: {described}; cost caps and the summary use that rate "
                f"(add the model to {where} to price it exactly)"
                for provider, model in fallback]
    reason = (f"{len(fallback)} model(s) priced by fallback at {described}: "
              + ", ".join(f"{p}/{m}" for p, m in fallback))
    details: dict[str, JsonValue] = {
        "as_of": prices.as_of.isoformat(),
        "fallback_priced": [f"{p}/{m}" for p, m in fallback],
        "fallback_rate": rates.model_dump(mode="json"),
    }
    return AdmissionCheck(step=8, name="pricing", passed=True, reason=reason, details=details), \
        declared_warnings + warnings

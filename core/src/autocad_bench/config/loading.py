"""Reading a batch configuration file into a :class:`BatchConfig` with located errors."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autocad_bench.config.models import BatchConfig, BudgetConfig
from autocad_bench.config.packs import TaskPack, find_suite, is_suite_name
from autocad_bench.config.trials import PlannedRollout, expand_trials
from autocad_bench.errors import ConfigError, Problem
from autocad_bench.validation import problems_from_validation_error

MAX_COST_ENV = "AUTOCAD_BENCH_MAX_COST_USD"
MAX_DURATION_ENV = "AUTOCAD_BENCH_MAX_DURATION_S"


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A validated configuration and where it came from (``label`` prefixes every location).

    ``only_rollouts`` restricts the batch to exactly these planned rollout ids (a rerun of
    failed trials, or a resume); ``None`` runs every enabled assignment ``trials`` times.
    """

    config: BatchConfig
    path: Path
    label: str
    only_rollouts: frozenset[str] | None = None
    rerun_of: str | None = None
    """The batch id whose failed rollouts this batch reruns (``--rerun-failed-from``)."""
    pack: TaskPack | None = None
    """The task pack a suite name resolved in (``None`` when ``task_suite`` is a file path)."""

    def planned_rollouts(self) -> tuple[PlannedRollout, ...]:
        """Every rollout of the batch, one per (assignment, trial); see :mod:`.trials`."""
        return expand_trials(self.config, self.only_rollouts)

    def enabled_trials(self) -> list[PlannedRollout]:
        """The rollouts this batch runs, in launch order."""
        return [r for r in self.planned_rollouts() if r.enabled]

    def select(self, rollout_ids: Iterable[str], *, source: str) -> LoadedConfig:
        """This configuration restricted to exactly ``rollout_ids`` (planned trial ids).

        Raises :class:`ConfigError` naming the ids this configuration does not plan;
        ``source`` says where they came from (``"the earlier batch"``).
        """
        wanted = frozenset(rollout_ids)
        unknown = wanted - {r.rollout_id for r in expand_trials(self.config)}
        if unknown:
            hint = ("" if self.config.trials == 1 and not any(".t" in u for u in unknown) else
                    f" (this configuration has trials = {self.config.trials}; trial rollouts are named "
                    "<rollout_id>.t<n> only when trials > 1)")
            raise ConfigError([Problem(self.at("$.rollouts"), f"rollouts of {source} are missing here: "
                                                             f"{', '.join(sorted(unknown))}{hint}")])
        return replace(self, only_rollouts=wanted)

    @property
    def task_suite_path(self) -> Path | None:
        """The configured task suite file, resolved against the configuration file's directory."""
        if not self.config.task_suite:
            return None
        return self.path.parent / self.config.task_suite

    @property
    def tasks_dir(self) -> Path | None:
        """The configured task directory, resolved against the configuration file's directory."""
        if self.config.tasks_dir is None:
            return None
        return (self.path.parent / self.config.tasks_dir).resolve()

    @property
    def gold_cache(self) -> Path | None:
        """The evaluation gold cache root, resolved against the configuration file's directory."""
        if self.config.evaluation.gold_cache is None:
            return None
        return (self.path.parent / self.config.evaluation.gold_cache).resolve()

    def at(self, json_path: str) -> str:
        """``"file: $.rollouts[0].model"`` for a path like ``"$.rollouts[0].model"``."""
        return f"{self.label}: {json_path}"


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def parse_config_text(text: str, label: str) -> BatchConfig:
    """Parse and validate configuration text, a suite name completed from its task pack;
    raise :class:`ConfigError` naming every problem."""
    return parse_with_pack(text, label)[0]


def parse_with_pack(text: str, label: str) -> tuple[BatchConfig, TaskPack | None]:
    """:func:`parse_config_text`, plus the task pack a suite name resolved in (``None`` for a path)."""
    try:
        data = json.loads(
            text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_constant
        )
    except _DuplicateKey as dup:
        raise ConfigError([Problem(label, f"duplicate key {dup.key!r} in a JSON object")]) from None
    except json.JSONDecodeError as error:
        raise ConfigError(
            [Problem(f"{label}:{error.lineno}:{error.colno}", f"invalid JSON: {error.msg}")]
        ) from None
    except (ValueError, RecursionError) as error:
        raise ConfigError([Problem(label, f"invalid JSON: {error}")]) from None
    if not isinstance(data, dict):
        raise ConfigError([Problem(f"{label}: $", "the configuration must be a JSON object")])
    try:
        config = BatchConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(problems_from_validation_error(error, f"{label}: $")) from None
    return complete_from_pack(config, label)


def complete_from_pack(config: BatchConfig, label: str) -> tuple[BatchConfig, TaskPack | None]:
    """``config`` with a suite *name* replaced by the packaged suite's absolute file, and its
    unset ``tasks_dir``, ``evaluation.gold_cache`` and ``evaluation.evaluator_version`` taken
    from the same pack (see :mod:`autocad_bench.config.packs`); unchanged for a suite path.

    Raises :class:`ConfigError` at ``$.task_suite`` when no installed pack ships the name.
    """
    if not config.task_suite or not is_suite_name(config.task_suite):
        return config, None
    pack, suite_file = find_suite(config.task_suite, f"{label}: $.task_suite")
    evaluation = config.evaluation
    filled: dict[str, object] = {}
    if evaluation.gold_cache is None and pack.gold_cache is not None:
        filled["gold_cache"] = str(pack.gold_cache)
        # The pack's version belongs to the pack's gold cache: a configuration that names
        # its own gold cache names its own version too (admission checks the pair).
        if evaluation.evaluator_version is None and pack.evaluator_version is not None:
            filled["evaluator_version"] = pack.evaluator_version
    completed = config.model_copy(update={
        "task_suite": str(suite_file),
        "tasks_dir": config.tasks_dir if config.tasks_dir is not None else str(pack.tasks_dir),
        "evaluation": evaluation.model_copy(update=filled),
    })
    return completed, pack


def load_config(path: Path | str) -> LoadedConfig:
    """Read ``path``; raise :class:`ConfigError` if it is unreadable or invalid."""
    path = Path(path)
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(label, "file not found")]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([Problem(label, f"cannot read: {error}")]) from None
    config, pack = parse_with_pack(text, label)
    return LoadedConfig(config, path, label, pack=pack)


def effective_budgets(
    budgets: BudgetConfig,
    *,
    environ: Mapping[str, str],
    max_cost_usd: float | None = None,
    max_duration_s: float | None = None,
    max_turns: int | None = None,
) -> BudgetConfig:
    """Apply per-rollout caps: CLI flags win over environment, environment over the file."""
    updates: dict[str, float | int] = {}
    problems: list[Problem] = []
    for field, env_name in (("max_cost_usd", MAX_COST_ENV), ("max_duration_s", MAX_DURATION_ENV)):
        raw = environ.get(env_name)
        if raw is None or raw.strip() == "":
            continue
        try:
            value = float(raw)
        except ValueError:
            problems.append(Problem(f"environment {env_name}", "must be a positive number"))
            continue
        if not value > 0 or value == float("inf"):
            problems.append(Problem(f"environment {env_name}", "must be a positive number"))
            continue
        updates[field] = value
    if problems:
        raise ConfigError(problems)
    sources = {field: f"environment {env_name}" for field, env_name in
               (("max_cost_usd", MAX_COST_ENV), ("max_duration_s", MAX_DURATION_ENV)) if field in updates}
    for field, flag_value in (
        ("max_cost_usd", max_cost_usd),
        ("max_duration_s", max_duration_s),
        ("max_turns", max_turns),
    ):
        if flag_value is not None:
            updates[field] = flag_value
            sources[field] = "--" + field.replace("_", "-")
    try:
        return BudgetConfig.model_validate({**budgets.model_dump(), **updates})
    except ValidationError as error:  # a cap beyond the field's bound
        raise ConfigError([Problem(sources.get(str(item["loc"][0]), "budgets"), item["msg"])
                           for item in error.errors(include_url=False, include_input=False)]) from None

"""Model rows over one or more runs: the leaderboard document and the batch summary.

A row is one (provider, model, tool mode) under one set of conditions (suite, evaluator
version, step budget, action budget). Runs with the same identity are pooled: their trials
add up per task. The same model under different conditions becomes separate rows, each
flagged, and is never merged. ``leaderboard.json`` follows the versioned JSON Schema in
``docs/schemas/`` (:data:`SCHEMA_VERSION`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from autocad_bench.metrics.aggregate import DEFAULT_MAX_WIDTH, MIN_CLUSTERS, GroupMetrics, group_metrics
from autocad_bench.metrics.conditions import RunConditions
from autocad_bench.metrics.samples import RunSamples, Sample
from autocad_bench.metrics.stats import CONFIDENCE, RESAMPLES
from autocad_bench.models import StrictModel

SCHEMA_VERSION: Final = "autocad-bench.leaderboard/1"
SCHEMA_FILE = "leaderboard-1.schema.json"


class RowConditions(StrictModel):
    """The part of a run's conditions that is part of a row's identity (trials are not:
    more trials of the same thing pool)."""

    suite: str | None
    suite_sha256: str | None
    evaluator_version: str | None
    step_budget: int | None
    max_actions: int | None
    tool_mode: str

    def differences(self, other: RowConditions) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) != getattr(other, name)]


class RunInfo(StrictModel):
    """One run that contributed to the leaderboard."""

    run_id: str
    name: str | None
    directory: str
    conditions: RunConditions
    rollouts: int


class ModelRow(StrictModel):
    """One model under one set of conditions."""

    row_id: str = Field(description="provider/model, with the differing conditions appended when split")
    provider: str
    model: str
    conditions: RowConditions
    runs: list[str]
    trials: list[int] = Field(description="the trials setting of each contributing run")
    metrics: GroupMetrics
    by_skill: dict[str, GroupMetrics]
    by_family: dict[str, GroupMetrics]
    by_difficulty: dict[str, GroupMetrics]
    pareto: bool = Field(description="on the mean-score versus cost-per-task frontier among rows with the "
                                     "same suite, evaluator version and step budget")
    flags: list[str]


class Leaderboard(StrictModel):
    """``leaderboard.json``: every row with its intervals and the conditions behind it."""

    schema_version: Literal["autocad-bench.leaderboard/1"] = SCHEMA_VERSION
    generated_at: datetime
    tool_version: str
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    max_interval_width: float
    interval_method: str = ("bootstrap over tasks resampling whole families (BCa; exact binomial when every "
                            "family is at 0 or 1)")
    capability_metric: Literal["mean_score"] = "mean_score"
    cost_metric: Literal["cost_per_task_usd"] = "cost_per_task_usd"
    runs: list[RunInfo]
    rows: list[ModelRow]
    notes: list[str]


def row_conditions(run: RunConditions, tool_mode: str) -> RowConditions:
    return RowConditions(suite=run.suite, suite_sha256=run.suite_sha256, evaluator_version=run.evaluator_version,
                         step_budget=run.step_budget, max_actions=run.max_actions, tool_mode=tool_mode)


def _grouped(samples: Iterable[Sample], key: str) -> dict[str, list[Sample]]:
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        value = getattr(sample, key)
        if value is not None:
            groups[value].append(sample)
    return dict(sorted(groups.items()))


def model_rows(runs: Sequence[RunSamples], *, max_width: float = DEFAULT_MAX_WIDTH,
               breakdowns: bool = True) -> tuple[list[ModelRow], list[str]]:
    """Rows (best mean score first) and notes about what was kept apart and why. A run given
    twice (the same batch id, e.g. through a symlink) counts once."""
    notes: list[str] = []
    unique: dict[str, RunSamples] = {}
    for run in runs:
        if run.run_id in unique:
            notes.append(f"batch {run.run_id} was given more than once ({unique[run.run_id].directory}, "
                         f"{run.directory}); it is counted once")
            continue
        unique[run.run_id] = run
    runs = list(unique.values())
    pooled: dict[tuple[str, str, RowConditions], list[tuple[RunSamples, Sample]]] = defaultdict(list)
    for run in runs:
        for sample in run.samples:
            conditions = row_conditions(run.conditions, sample.tool_mode)
            pooled[(sample.provider, sample.model, conditions)].append((run, sample))
    by_model: dict[tuple[str, str], list[RowConditions]] = defaultdict(list)
    for provider, model, conditions in pooled:
        by_model[(provider, model)].append(conditions)
    rows: list[ModelRow] = []
    for (provider, model, conditions), members in pooled.items():
        samples = [s for _, s in members]
        run_ids = list(dict.fromkeys(r.run_id for r, _ in members))
        trials = [next(r for r, _ in members if r.run_id == rid).conditions.trials for rid in run_ids]
        metrics = group_metrics(samples, step_budget=conditions.step_budget, max_width=max_width)
        siblings = [c for c in by_model[(provider, model)] if c != conditions]
        row_id = f"{provider}/{model}"
        flags: list[str] = []
        if siblings:
            differing = sorted({d for c in siblings for d in conditions.differences(c)})
            row_id += " [" + ", ".join(f"{d}={getattr(conditions, d)}" for d in differing) + "]"
            flags.append("split: this model also ran under other conditions (" + ", ".join(differing) + ")")
        if metrics.wide:
            flags.append(f"wide: an interval is missing, wider than {max_width:g}, or rests on fewer than "
                         f"{MIN_CLUSTERS} families")
        if metrics.unscored:
            flags.append(f"unscored: {metrics.unscored} of {metrics.rollouts} rollouts have no score "
                         "(evaluation off or failed, an infrastructure failure, or still running)")
        if len(set(trials)) > 1:
            flags.append("pooled runs with different trial counts: pass@k uses the fewest trials any task has")
        rows.append(ModelRow(
            row_id=row_id, provider=provider, model=model, conditions=conditions, runs=run_ids, trials=trials,
            metrics=metrics,
            by_skill={k: group_metrics(v, step_budget=conditions.step_budget, max_width=max_width)
                      for k, v in _grouped(samples, "skill").items()} if breakdowns else {},
            by_family={k: group_metrics(v, step_budget=conditions.step_budget, max_width=max_width)
                       for k, v in _grouped(samples, "family").items()} if breakdowns else {},
            by_difficulty={k: group_metrics(v, step_budget=conditions.step_budget, max_width=max_width)
                           for k, v in _grouped(samples, "difficulty").items()} if breakdowns else {},
            pareto=False, flags=flags))
    for (provider, model), variants in sorted(by_model.items()):
        if len(variants) > 1:
            notes.append(f"{provider}/{model} ran under {len(variants)} different conditions; "
                         "each is its own row and none is merged")
    rows = _mark_pareto(rows)
    rows.sort(key=lambda r: (-(r.metrics.mean_score.value if r.metrics.mean_score.value is not None else -1.0),
                             r.row_id))
    return rows, notes


def _frontier_key(row: ModelRow) -> tuple[str | None, str | None, int | None]:
    c = row.conditions
    return (c.suite_sha256 or c.suite, c.evaluator_version, c.step_budget)


def _mark_pareto(rows: list[ModelRow]) -> list[ModelRow]:
    """A row is on the frontier when no comparable row is at least as good on both score and
    cost and strictly better on one."""
    out = []
    for row in rows:
        score, cost = row.metrics.mean_score.value, row.metrics.cost_per_task_usd
        on = score is not None and cost is not None
        if on:
            for other in rows:
                if other is row or _frontier_key(other) != _frontier_key(row):
                    continue
                s2, c2 = other.metrics.mean_score.value, other.metrics.cost_per_task_usd
                if s2 is None or c2 is None:
                    continue
                if s2 >= score and c2 <= cost and (s2 > score or c2 < cost):  # type: ignore[operator]
                    on = False
                    break
        out.append(row.model_copy(update={"pareto": on}))
    return out


def build_leaderboard(runs: Sequence[RunSamples], *, max_width: float = DEFAULT_MAX_WIDTH) -> Leaderboard:
    """The leaderboard of ``runs`` (see the module docstring)."""
    from autocad_bench import __version__

    rows, notes = model_rows(runs, max_width=max_width)
    unique: dict[str, RunSamples] = {}
    for run in runs:
        unique.setdefault(run.run_id, run)
    return Leaderboard(
        generated_at=datetime.now(UTC), tool_version=__version__, max_interval_width=max_width,
        runs=[RunInfo(run_id=r.run_id, name=r.name, directory=str(r.directory), conditions=r.conditions,
                      rollouts=len(r.samples)) for r in unique.values()],
        rows=rows, notes=notes)


def schema_path(repository_root: Path) -> Path:
    """Where the published schema lives in a checkout."""
    return repository_root / "docs" / "schemas" / SCHEMA_FILE


def leaderboard_schema() -> dict[str, object]:
    """The JSON Schema of :class:`Leaderboard` (what ``docs/schemas/`` publishes)."""
    schema = Leaderboard.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"autocad-bench leaderboard ({SCHEMA_VERSION})"
    return schema

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
    recorded: bool = True

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
    """The conditions a leaderboard row is keyed by: the run's conditions plus the tool mode
    its samples used (samples pool into one row only when these are equal).
    """
    return RowConditions(suite=run.suite, suite_sha256=run.suite_sha256, evaluator_version=run.evaluator_version,
                         step_budget=run.step_budget, max_actions=run.max_actions, tool_mode=tool_mode,
                         recorded=run.recorded)


def _grouped(samples: Iterable[Sample], key: str) -> dict[str, list[Sample]]:
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        value = getattr(sample, key)
        if value is not None:
            groups[value].append(sample)
    return dict(sorted(groups.items()))


def _without_superseded(runs: Sequence[RunSamples]) -> tuple[list[tuple[RunSamples, Sample]], int, int]:
    """Every (run, sample), with rerun trials reconciled against the batch they reran.

    A rerun (``--rerun-failed-from``) runs the same trial ids again. When both batches are
    pooled, a trial counts once: the rerun replaces an original that has no verdict (an
    infrastructure failure), and is ignored when the original already counts (a model's own
    failure stands; rerunning it until it passes must not raise the pass rate).
    Returns the members and how many originals were replaced and reruns ignored.
    """
    by_id = {run.run_id: run for run in runs}
    dropped: set[tuple[str, str]] = set()  # (run id, rollout id)
    replaced = ignored = 0
    for run in runs:
        original = by_id.get(run.rerun_of or "")
        if original is None:
            continue
        earlier = {(s.provider, s.model, s.assignment_id, s.trial): s for s in original.samples}
        for sample in run.samples:
            before = earlier.get((sample.provider, sample.model, sample.assignment_id, sample.trial))
            if before is None:
                continue
            if before.counted:
                dropped.add((run.run_id, sample.rollout_id))
                ignored += 1
            else:
                dropped.add((original.run_id, before.rollout_id))
                replaced += 1
    members = [(run, s) for run in runs for s in run.samples if (run.run_id, s.rollout_id) not in dropped]
    return members, replaced, ignored


def model_rows(runs: Sequence[RunSamples], *, max_width: float = DEFAULT_MAX_WIDTH,
               breakdowns: bool = True) -> tuple[list[ModelRow], list[str]]:
    """Rows (best mean score first) and notes about what was kept apart and why.

    A run given twice (the same batch id, e.g. through a symlink) counts once; a rerun's
    trials are reconciled with the batch they reran (:func:`_without_superseded`); a run
    whose conditions were not recorded is never pooled with another.
    """
    notes: list[str] = []
    unique: dict[str, RunSamples] = {}
    for run in runs:
        if run.run_id in unique:
            notes.append(f"batch {run.run_id} was given more than once ({unique[run.run_id].directory}, "
                         f"{run.directory}); it is counted once")
            continue
        unique[run.run_id] = run
    runs = list(unique.values())
    members, replaced, ignored = _without_superseded(runs)
    if replaced:
        notes.append(f"{replaced} rollout(s) without a verdict were replaced by their rerun")
    if ignored:
        notes.append(f"{ignored} rerun rollout(s) were ignored: the original attempt already counts (a model "
                     "failure stands; rerunning it until it passes would inflate the pass rate)")
    PoolKey = tuple[str, str, RowConditions, str]
    pooled: dict[PoolKey, list[tuple[RunSamples, Sample]]] = defaultdict(list)
    for run, sample in members:
        conditions = row_conditions(run.conditions, sample.tool_mode)
        # Unknown conditions cannot be shown to match anything: such a run stands alone.
        alone = "" if conditions.recorded else run.run_id
        pooled[(sample.provider, sample.model, conditions, alone)].append((run, sample))
    by_model: dict[tuple[str, str], list[RowConditions]] = defaultdict(list)
    for provider, model, conditions, _ in pooled:
        by_model[(provider, model)].append(conditions)
    rows: list[ModelRow] = []
    task_sets: list[frozenset[str]] = []  # the tasks each row scored, in row order
    for (provider, model, conditions, alone), items in pooled.items():
        samples = [s for _, s in items]
        run_ids = list(dict.fromkeys(r.run_id for r, _ in items))
        trials = [unique[rid].conditions.trials for rid in run_ids]
        k = min(trials)

        def metrics_of(group: list[Sample], k: int = k, budget: int | None = conditions.step_budget) -> GroupMetrics:
            return group_metrics(group, step_budget=budget, k=k, max_width=max_width)

        metrics = metrics_of(samples)
        siblings = [c for c in by_model[(provider, model)] if c != conditions]
        row_id = f"{provider}/{model}"
        flags: list[str] = []
        if siblings:
            differing = sorted({d for c in siblings for d in conditions.differences(c)})
            row_id += " [" + ", ".join(f"{d}={getattr(conditions, d)}" for d in differing) + "]"
            flags.append("split: this model also ran under other conditions (" + ", ".join(differing) + ")")
        if alone and len(runs) > 1:
            row_id += f" [run {alone}]"
            flags.append("conditions not recorded (an older batch): suite, evaluator and budgets cannot be "
                         "checked, so this run is not pooled or compared with any other")
        if metrics.wide:
            flags.append(f"wide: an interval is missing, wider than {max_width:g}, or rests on fewer than "
                         f"{MIN_CLUSTERS} families")
        if metrics.pending:
            flags.append(f"in progress: {metrics.pending} of {metrics.rollouts} rollouts have not finished; "
                         "not placed on the cost frontier")
        if metrics.unscored:
            flags.append(f"unscored: {metrics.unscored} of {metrics.rollouts} rollouts have no score "
                         "(evaluation off or failed, an infrastructure failure, or still running)")
        if metrics.invalid_scores:
            flags.append(f"invalid scores: {metrics.invalid_scores} score.json file(s) held no valid score "
                         "(NaN, outside [0, 1], or no verdict) and were left out")
        if metrics.fallback_priced:
            flags.append(f"priced by fallback: {metrics.fallback_priced} rollout(s) were billed at the most "
                         "expensive listed rates because the model is not in the price table; pin its price "
                         "(pricing in the configuration) for a true cost")
        if metrics.k_excluded:
            flags.append(f"pass@{k} and pass^{k} leave out {metrics.k_excluded} task(s) with fewer than {k} "
                         "scored trials")
        if len(set(trials)) > 1:
            flags.append(f"pooled runs with different trial counts ({', '.join(map(str, trials))}): "
                         f"pass@k and pass^k use k = {k}")
        rows.append(ModelRow(
            row_id=row_id, provider=provider, model=model, conditions=conditions, runs=run_ids, trials=trials,
            metrics=metrics,
            by_skill={n: metrics_of(v) for n, v in _grouped(samples, "skill").items()} if breakdowns else {},
            by_family={n: metrics_of(v) for n, v in _grouped(samples, "family").items()} if breakdowns else {},
            by_difficulty={n: metrics_of(v) for n, v in _grouped(samples, "difficulty").items()}
            if breakdowns else {},
            pareto=False, flags=flags))
        task_sets.append(frozenset(s.task_id for s in samples if s.counted))
    for (provider, model), variants in sorted(by_model.items()):
        if len(variants) > 1:
            notes.append(f"{provider}/{model} ran under {len(variants)} different conditions; "
                         "each is its own row and none is merged")
    rows, coverage_notes = _mark_coverage_and_pareto(rows, task_sets)
    notes.extend(coverage_notes)
    rows.sort(key=lambda r: (-(r.metrics.mean_score.value if r.metrics.mean_score.value is not None else -1.0),
                             r.row_id))
    return rows, notes


def _frontier_key(row: ModelRow) -> tuple[str | None, str | None, int | None]:
    c = row.conditions
    return (c.suite_sha256 or c.suite, c.evaluator_version, c.step_budget)


def _mark_coverage_and_pareto(rows: list[ModelRow], task_sets: list[frozenset[str]]) -> tuple[list[ModelRow],
                                                                                               list[str]]:
    """Flag rows that scored fewer tasks than comparable rows did, then mark the frontier.

    Means over different task sets are not comparable: only rows that scored every task any
    comparable row scored, and that have finished, can be on the frontier. A row is on it when
    no such row is at least as good on both mean score and cost per task and strictly better
    on one.
    """
    tasks = {id(row): scored for row, scored in zip(rows, task_sets, strict=True)}
    groups: dict[tuple[str | None, str | None, int | None], list[ModelRow]] = defaultdict(list)
    for row in rows:
        groups[_frontier_key(row)].append(row)
    out: list[ModelRow] = []
    notes: list[str] = []
    for group in groups.values():
        union = frozenset().union(*(tasks[id(r)] for r in group))
        partial = {id(r) for r in group if tasks[id(r)] != union}
        if partial and len(group) > 1:
            notes.append(f"rows on suite {group[0].conditions.suite} cover different task sets ({len(union)} tasks "
                         "in all): compare their numbers with care; only complete rows are on the frontier")
        eligible = [r for r in group if id(r) not in partial and not r.metrics.pending
                    and r.metrics.mean_score.value is not None and r.metrics.cost_per_task_usd is not None]
        for row in group:
            flags = list(row.flags)
            if id(row) in partial and len(group) > 1:
                flags.append(f"covers {len(tasks[id(row)])} of the {len(union)} tasks comparable rows scored: "
                             "its means are over a different task set")
            on = row in eligible and not any(_dominates(other, row) for other in eligible if other is not row)
            out.append(row.model_copy(update={"pareto": on, "flags": flags}))
    return out, notes


def _dominates(a: ModelRow, b: ModelRow) -> bool:
    sa, ca = a.metrics.mean_score.value, a.metrics.cost_per_task_usd
    sb, cb = b.metrics.mean_score.value, b.metrics.cost_per_task_usd
    assert sa is not None and ca is not None and sb is not None and cb is not None
    return sa >= sb and ca <= cb and (sa > sb or ca < cb)


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

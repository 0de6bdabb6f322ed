"""Paired comparison of two models (or one model in two runs) over the tasks both ran.

Each side's trials are reduced to a per-task pass rate and mean score; the difference
(B minus A) gets a clustered bootstrap interval and a paired permutation p-value (see
:mod:`autocad_bench.metrics.stats`). Runs measured on different suites or with different
evaluator versions are refused: their scores are not on one scale.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal, NamedTuple

from pydantic import Field

from autocad_bench.metrics.aggregate import DEFAULT_MAX_WIDTH, MIN_CLUSTERS, Estimate
from autocad_bench.metrics.leaderboard import RowConditions, row_conditions
from autocad_bench.metrics.samples import RunSamples, Sample
from autocad_bench.metrics.stats import CONFIDENCE, paired_difference
from autocad_bench.models import StrictModel

ALPHA = 1.0 - CONFIDENCE


class ComparisonRefused(Exception):
    """The two sides cannot be compared (the message says why and what to do)."""


class Side(StrictModel):
    """One side (A or B) of a comparison: the run, its model and the conditions it ran under."""

    run_id: str
    directory: str
    provider: str
    model: str
    conditions: RowConditions
    tasks: int = Field(description="tasks with at least one scored rollout on this side")
    rollouts: int


class Difference(StrictModel):
    """B minus A over the shared tasks."""

    a: float
    b: float
    difference: Estimate
    p_value: float | None
    significant: bool = Field(description=f"p < {ALPHA:g} and the interval excludes 0")
    borderline: bool = Field(description="the permutation test and the bootstrap interval disagree: one says "
                                         "significant, the other does not")


class TaskChange(StrictModel):
    """A shared task whose pass rate differs between A and B."""

    task_id: str
    family: str | None
    a_pass_rate: float
    b_pass_rate: float
    a_mean_score: float
    b_mean_score: float
    direction: Literal["gained", "lost"] = Field(description="B passes more often (gained) or less often (lost)")
    flipped: bool = Field(description="the majority verdict changed (pass rate on either side of 0.5)")


class Comparison(StrictModel):
    """Two runs paired over their shared tasks: the paired differences in pass rate and mean
    score, the tasks that changed, and what was left out or differs.
    """

    a: Side
    b: Side
    shared_tasks: int
    shared_clusters: int
    only_a: list[str]
    only_b: list[str]
    pass_rate: Difference
    mean_score: Difference
    changed: list[TaskChange]
    condition_differences: list[str] = Field(description="conditions that differ but do not prevent pairing")


def _select(run: RunSamples, selector: str | None, label: str) -> tuple[str, str, list[Sample]]:
    models = sorted({(s.provider, s.model) for s in run.samples})
    if not models:
        raise ComparisonRefused(f"{label}: the batch in {run.directory} has no rollouts")
    if selector is not None:
        chosen = [m for m in models if selector in (f"{m[0]}/{m[1]}", m[1])]
        if len(chosen) != 1:
            raise ComparisonRefused(
                f"{label}: {'no' if not chosen else 'more than one'} model matches {selector!r} in {run.directory}; "
                f"it has {', '.join(f'{p}/{m}' for p, m in models) or 'no rollouts'}")
    elif len(models) == 1:
        chosen = models
    else:
        raise ComparisonRefused(
            f"{label}: {run.directory} holds {len(models)} models ({', '.join(f'{p}/{m}' for p, m in models)}); "
            f"name one with --model-{label[-1].lower()}")
    provider, model = chosen[0]
    return provider, model, [s for s in run.samples if (s.provider, s.model) == (provider, model)]


class _Task(NamedTuple):
    pass_rate: float
    mean_score: float
    cluster: str
    family: str | None


def _per_task(samples: Sequence[Sample]) -> dict[str, _Task]:
    """task -> its pass rate and mean score over the counted trials."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        if sample.counted:
            groups[sample.task_id].append(sample)
    return {task: _Task(sum(s.success for s in g) / len(g), sum(s.value for s in g) / len(g), g[0].cluster,
                        g[0].family) for task, g in groups.items()}


def compare_runs(run_a: RunSamples, run_b: RunSamples, *, model_a: str | None = None, model_b: str | None = None,
                 max_width: float = DEFAULT_MAX_WIDTH) -> Comparison:
    """Compare side B against side A. Raises :class:`ComparisonRefused` when a side names no
    single model, the suites or evaluator versions differ, or no task was scored on both."""
    provider_a, name_a, samples_a = _select(run_a, model_a, "side A")
    provider_b, name_b, samples_b = _select(run_b, model_b, "side B")
    if run_a.run_id == run_b.run_id and (provider_a, name_a) == (provider_b, name_b):
        raise ComparisonRefused(f"both sides are {provider_a}/{name_a} in the same batch: name two different "
                                "models with --model-a and --model-b, or give two batches")
    if run_a.run_id != run_b.run_id and not (run_a.conditions.recorded and run_b.conditions.recorded):
        older = run_a if not run_a.conditions.recorded else run_b
        raise ComparisonRefused(f"{older.directory} did not record its conditions (an older batch): whether the "
                                "two runs used the same suite and evaluator cannot be checked")
    tool_a = samples_a[0].tool_mode if samples_a else "function"
    tool_b = samples_b[0].tool_mode if samples_b else "function"
    cond_a, cond_b = row_conditions(run_a.conditions, tool_a), row_conditions(run_b.conditions, tool_b)
    if (cond_a.suite_sha256 or cond_a.suite) != (cond_b.suite_sha256 or cond_b.suite):
        raise ComparisonRefused(
            f"the runs used different task suites (A: {cond_a.suite} {(cond_a.suite_sha256 or '')[:12]}, "
            f"B: {cond_b.suite} {(cond_b.suite_sha256 or '')[:12]}): compare runs of one suite")
    if cond_a.evaluator_version != cond_b.evaluator_version:
        raise ComparisonRefused(
            f"the runs were scored by different evaluator versions (A: {cond_a.evaluator_version}, "
            f"B: {cond_b.evaluator_version}): their scores are not on one scale; "
            "compare runs scored by one evaluator version")
    tasks_a, tasks_b = _per_task(samples_a), _per_task(samples_b)
    shared = sorted(set(tasks_a) & set(tasks_b))
    if not shared:
        raise ComparisonRefused(
            f"no task was scored on both sides (A scored {len(tasks_a)} tasks, B scored {len(tasks_b)})")
    clusters = [tasks_a[t].cluster for t in shared]

    def difference(field: Literal["pass_rate", "mean_score"]) -> Difference:
        a = [getattr(tasks_a[t], field) for t in shared]
        b = [getattr(tasks_b[t], field) for t in shared]
        result = paired_difference(a, b, clusters)
        interval = result.difference
        width = interval.width
        estimate = Estimate(value=round(interval.value, 6),
                            low=None if interval.low is None else round(interval.low, 6),
                            high=None if interval.high is None else round(interval.high, 6),
                            tasks=interval.n, clusters=interval.clusters,
                            wide=width is None or width > 2 * max_width or interval.clusters < MIN_CLUSTERS)
        p = None if result.p_value is None else round(result.p_value, 6)
        test_says = p is not None and p < ALPHA
        # The interval (bootstrap) and the p-value (permutation test) are two procedures; at the
        # margin they can disagree. Call a difference significant only when both agree.
        interval_says = interval.low is not None and interval.high is not None and (
            interval.low > 0 or interval.high < 0)
        return Difference(a=round(sum(a) / len(a), 6), b=round(sum(b) / len(b), 6), difference=estimate,
                          p_value=p, significant=test_says and interval_says,
                          borderline=test_says != interval_says)

    changed = []
    for task in shared:
        pa, sa, _, family = tasks_a[task]
        pb, sb, _, _ = tasks_b[task]
        if pa != pb:
            changed.append(TaskChange(task_id=task, family=family, a_pass_rate=round(pa, 6), b_pass_rate=round(pb, 6),
                                      a_mean_score=round(sa, 6), b_mean_score=round(sb, 6),
                                      direction="gained" if pb > pa else "lost", flipped=(pa >= 0.5) != (pb >= 0.5)))
    changed.sort(key=lambda c: (-abs(c.b_pass_rate - c.a_pass_rate), c.task_id))
    return Comparison(
        a=Side(run_id=run_a.run_id, directory=str(run_a.directory), provider=provider_a, model=name_a,
               conditions=cond_a, tasks=len(tasks_a), rollouts=len(samples_a)),
        b=Side(run_id=run_b.run_id, directory=str(run_b.directory), provider=provider_b, model=name_b,
               conditions=cond_b, tasks=len(tasks_b), rollouts=len(samples_b)),
        shared_tasks=len(shared), shared_clusters=len(set(clusters)),
        only_a=sorted(set(tasks_a) - set(tasks_b)), only_b=sorted(set(tasks_b) - set(tasks_a)),
        pass_rate=difference("pass_rate"), mean_score=difference("mean_score"), changed=changed,
        condition_differences=cond_a.differences(cond_b))

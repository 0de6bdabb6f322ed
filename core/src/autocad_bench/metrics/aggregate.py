"""Metrics of a group of samples: capability with intervals, step budgets, cost, failures.

A *task* is the unit of every estimate: its trials are first reduced to per-task values
(mean score, pass rate, unbiased pass@k and pass^k), then the mean over tasks gets a 95%
bootstrap interval that resamples families (see :mod:`autocad_bench.metrics.stats`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import Field

from autocad_bench.costs.budget import StopReason
from autocad_bench.metrics.samples import Sample
from autocad_bench.metrics.stats import bootstrap_mean, pass_at_k, pass_hat_k
from autocad_bench.models import StrictModel

TURN_BUDGETS: tuple[int, ...] = (15, 50, 100)
CAP_STOPS = frozenset(reason.value for reason in StopReason)
"""Stop reasons that mean a budget cap, not the model, ended the rollout."""
DEFAULT_MAX_WIDTH = 0.2
"""Intervals wider than this (in score units: 0.2 is +-10 points) are marked ``wide``."""

MIN_CLUSTERS = 5
"""Fewer independent families than this and an estimate is always marked ``wide``."""

BudgetMode = Literal["measured", "lower_bound", "unavailable"]


class Estimate(StrictModel):
    """A mean over tasks with its 95% interval (``low``/``high`` None: fewer than two clusters)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    tasks: int = 0
    clusters: int = 0
    wide: bool = Field(default=True, description="no interval, or one wider than the stated threshold")

    def text(self, percent: bool = False) -> str:
        """``0.62 [0.48, 0.75]`` (or ``62% [48, 75]``); ``-`` without a value."""
        if self.value is None:
            return "-"
        if percent:
            head = f"{self.value:.0%}"
            tail = "" if self.low is None or self.high is None else f" [{self.low * 100:.0f}, {self.high * 100:.0f}]"
        else:
            head = f"{self.value:.3f}"
            tail = "" if self.low is None or self.high is None else f" [{self.low:.3f}, {self.high:.3f}]"
        return head + (tail or " [no interval]")


class BudgetSuccess(StrictModel):
    """Success within ``budget`` turns and how it was obtained.

    ``measured``: the run's step budget is this budget. ``lower_bound``: from a run with a
    larger (or no) budget, counting rollouts that passed and ended on their own within
    ``budget`` turns; the drawing is not snapshotted mid-run (saving it changes what the
    model sees), so a rollout that was correct at that turn and went on is not credited.
    ``unavailable``: the run's budget is smaller.
    """

    budget: int
    mode: BudgetMode
    estimate: Estimate


class GroupMetrics(StrictModel):
    """Every metric of one group of samples (a model, or a model's skill/family/difficulty)."""

    rollouts: int
    scored: int
    unscored: int = Field(description="rollouts left out of capability: infrastructure or evaluation "
                                      "failures and rollouts still running")
    tasks: int
    clusters: int
    pending: int = Field(description="rollouts not finished yet (queued or running)")
    invalid_scores: int = Field(description="rollouts whose score.json held no valid score (NaN, outside [0, 1] "
                                            "or no verdict): left out as unscored")
    fallback_priced: int = Field(default=0, description="rollouts whose tokens were billed at the fallback "
                                                       "(most expensive listed) rates: the model is not in the "
                                                       "price table")
    k: int = Field(description="trials per task pass@k and pass^k are for (the configured trials)")
    k_excluded: int = Field(description="tasks left out of pass@k and pass^k for having fewer than k scored trials")
    mean_score: Estimate
    pass_at_1: Estimate
    pass_at_k: Estimate
    pass_hat_k: Estimate
    success_within: list[BudgetSuccess]
    tokens: int
    token_cost_usd: float
    infrastructure_cost_usd: float
    cost_per_task_usd: float | None = Field(description="mean total cost of one finished rollout")
    cost_per_solved_usd: float | None = Field(description="total cost divided by passed rollouts")
    wall_seconds_per_task: float | None
    failure_classes: dict[str, int]
    wide: bool = Field(description="the mean score or pass@1 interval is missing or wider than the threshold")


def _estimate(per_task: Sequence[tuple[float, str]], max_width: float, *, binary: bool = False) -> Estimate:
    if not per_task:
        return Estimate(value=None)
    interval = bootstrap_mean([v for v, _ in per_task], [c for _, c in per_task], binary=binary)
    # Below MIN_CLUSTERS the bootstrap's own interval is not to be trusted, whatever its width.
    wide = interval.width is None or interval.width > max_width or interval.clusters < MIN_CLUSTERS
    return Estimate(value=round(interval.value, 6),
                    low=None if interval.low is None else round(interval.low, 6),
                    high=None if interval.high is None else round(interval.high, 6),
                    tasks=interval.n, clusters=interval.clusters, wide=wide)


def budget_mode(step_budget: int | None, budget: int) -> BudgetMode:
    """How success within ``budget`` turns can be obtained from a run whose step budget is
    ``step_budget`` (``None`` = uncapped); see :class:`BudgetSuccess`.
    """
    if step_budget == budget:
        return "measured"
    if step_budget is None or step_budget > budget:
        return "lower_bound"
    return "unavailable"


def success_within(sample: Sample, budget: int, mode: BudgetMode) -> bool:
    """Whether one counted sample succeeded within ``budget`` turns (see :class:`BudgetSuccess`)."""
    if mode == "measured":
        return sample.success
    # A rollout a cap cut short might have behaved differently without that cap: only
    # rollouts the model ended itself are credited to a smaller budget.
    return (sample.success and sample.turns is not None and sample.turns <= budget
            and sample.stop_reason not in CAP_STOPS)


def group_metrics(samples: Iterable[Sample], *, step_budget: int | None, k: int | None = None,
                  max_width: float = DEFAULT_MAX_WIDTH) -> GroupMetrics:
    """All metrics of ``samples`` measured under ``step_budget`` (the run's turn cap).

    ``k`` is the trial count pass@k and pass^k are for (the configured trials; the fewest
    scored trials any task has when None). Tasks with fewer than k scored trials are left
    out of those two and counted in ``k_excluded``, so one task's infrastructure failure
    never turns a row's pass@3 into pass@1.
    """
    samples = list(samples)
    counted = [s for s in samples if s.counted]
    by_task: dict[str, list[Sample]] = defaultdict(list)
    for sample in counted:
        by_task[sample.task_id].append(sample)
    tasks = sorted(by_task)
    cluster = {t: by_task[t][0].cluster for t in tasks}
    if k is None:
        k = min((len(by_task[t]) for t in tasks), default=0)
    full = [t for t in tasks if len(by_task[t]) >= k] if k else []

    def per_task(value: Callable[[list[Sample]], float], among: Sequence[str] = tasks) -> list[tuple[float, str]]:
        return [(value(by_task[t]), cluster[t]) for t in among]

    def passes(group: list[Sample]) -> int:
        return sum(s.success for s in group)

    budgets = []
    for budget in TURN_BUDGETS:
        mode = budget_mode(step_budget, budget)
        estimate = Estimate(value=None) if mode == "unavailable" else _estimate(per_task(
            lambda g, b=budget, m=mode: sum(success_within(s, b, m) for s in g) / len(g)),  # type: ignore[misc]
            max_width, binary=True)
        budgets.append(BudgetSuccess(budget=budget, mode=mode, estimate=estimate))
    mean_score = _estimate(per_task(lambda g: sum(s.value for s in g) / len(g)), max_width)
    pass1 = _estimate(per_task(lambda g: passes(g) / len(g)), max_width, binary=True)
    tokens = sum(s.tokens for s in samples)
    token_cost = sum(s.token_cost_usd for s in samples)
    infra_cost = sum(s.infrastructure_cost_usd for s in samples)
    solved = sum(s.success for s in counted)
    # Spend is final only for finished rollouts: dividing by queued ones would make a live
    # batch look cheap.
    finished = sum(s.finished for s in samples)
    walls = [s.wall_seconds for s in samples if s.wall_seconds is not None and s.finished]
    failures = Counter(s.failure_class for s in samples if s.failure_class)
    kk = k
    return GroupMetrics(
        rollouts=len(samples), scored=len(counted), unscored=len(samples) - len(counted),
        pending=len(samples) - finished, invalid_scores=sum(s.invalid_score for s in samples),
        fallback_priced=sum(s.fallback_priced for s in samples),
        tasks=len(tasks), clusters=len(set(cluster.values())), k=k, k_excluded=len(tasks) - len(full),
        mean_score=mean_score, pass_at_1=pass1,
        pass_at_k=_estimate(per_task(lambda g: pass_at_k(len(g), passes(g), kk), full), max_width, binary=True)
        if full else Estimate(value=None),
        pass_hat_k=_estimate(per_task(lambda g: pass_hat_k(len(g), passes(g), kk), full), max_width, binary=True)
        if full else Estimate(value=None),
        success_within=budgets, tokens=tokens, token_cost_usd=round(token_cost, 6),
        infrastructure_cost_usd=round(infra_cost, 6),
        cost_per_task_usd=round((token_cost + infra_cost) / finished, 6) if finished else None,
        cost_per_solved_usd=round((token_cost + infra_cost) / solved, 6) if solved else None,
        wall_seconds_per_task=round(sum(walls) / len(walls), 3) if walls else None,
        failure_classes=dict(sorted(failures.items())),
        wide=mean_score.wide or pass1.wide,
    )

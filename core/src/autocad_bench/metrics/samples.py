"""One rollout as a metric sample, read from a batch output directory.

Reading is tolerant: a batch may still be running, a file may be missing or torn. What
counts toward capability is decided here, once, for every consumer:

- a rollout with a deterministic score counts with that score;
- a rollout that failed because of the model (it kept breaking the action contract, or
  its batches kept being refused) counts as a failure with score 0 even without a drawing;
- anything else (infrastructure or evaluation failure, still running) is *unscored*: it is
  left out of the capability estimates, reported as a count, and its spend still counts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autocad_bench.harness.layout import BatchPaths
from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, RunConditions
from autocad_bench.storage.fields import as_bool as _bool
from autocad_bench.storage.fields import as_dict as _dict
from autocad_bench.storage.fields import as_float as _float
from autocad_bench.storage.fields import as_int as _int
from autocad_bench.storage.fields import as_time as _time


def _str(value: Any) -> str | None:
    """A non-empty string (an empty id or name reads as absent)."""
    return value if isinstance(value, str) and value else None

MODEL_FAILURES = frozenset({"model_contract_error", "action_rejected"})
"""Failure classes that are the model's doing: they count as a failed task, not as noise."""
NEVER_SCORED = frozenset({"interrupted"})
"""Failure classes whose drawing measures nothing even if a backend scored it anyway: the
operator cut the rollout short (it is rerun by its class, and the rerun is the sample)."""
TERMINAL = frozenset({"done", "failed"})

JsonLoader = Callable[[Path], Any]


def _earlier(entry: Mapping[str, Any], field: str) -> float:
    """Spend of the rollout's interrupted earlier attempts (resume ran it again): it counts."""
    attempts = entry.get("earlier_attempts")
    if not isinstance(attempts, list):
        return 0.0
    return sum(_float(_dict(a).get(field)) or 0.0 for a in attempts)


def load_json_file(path: Path) -> Any:
    """The parsed JSON at ``path``, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Sample:
    """One rollout: what it was (task, model, trial, family), how it ended, what it cost."""

    run_id: str
    rollout_id: str
    assignment_id: str
    trial: int
    task_id: str
    provider: str
    model: str
    tool_mode: str
    skill: str | None
    family: str | None
    difficulty: str | None
    state: str
    failure_class: str | None
    stop_reason: str | None
    score: float | None
    passed: bool | None
    invalid_score: bool
    judge_score: float | None
    turns: int | None
    tokens: int
    token_cost_usd: float
    infrastructure_cost_usd: float
    wall_seconds: float | None
    fallback_priced: bool = False
    """Some of its billed tokens were priced at the fallback (the model is not in the price table)."""

    @property
    def counted(self) -> bool:
        """Whether this rollout is a capability sample (see the module docstring)."""
        if self.state not in TERMINAL or self.failure_class in NEVER_SCORED:
            return False
        return self.score is not None or self.failure_class in MODEL_FAILURES

    @property
    def finished(self) -> bool:
        """The rollout has ended (done or failed): its spend is final."""
        return self.state in TERMINAL

    @property
    def value(self) -> float:
        """The score this sample contributes (0 for a model failure without a drawing)."""
        return self.score if self.score is not None else 0.0

    @property
    def success(self) -> bool:
        """Passed (a model failure without a score never passes)."""
        return bool(self.passed) if self.score is not None else False

    @property
    def cluster(self) -> str:
        """What the bootstrap resamples as one unit: the family, or the task when it has none."""
        return self.family or f"task:{self.task_id}"

    @property
    def cost_usd(self) -> float:
        return self.token_cost_usd + self.infrastructure_cost_usd

    @property
    def model_label(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass(frozen=True, slots=True)
class RunSamples:
    """Every rollout of one batch and the conditions it ran under. ``rerun_of`` is the batch
    id whose failed rollouts this batch reran (``--rerun-failed-from``), if any."""

    run_id: str
    name: str | None
    directory: Path
    conditions: RunConditions
    samples: tuple[Sample, ...]
    rerun_of: str | None = None


class RunUnreadable(Exception):
    """The directory holds no readable ``batch-state.json``."""


def conditions_of(state: Mapping[str, Any]) -> RunConditions:
    """The recorded conditions, or what an older batch state still tells about them."""
    raw = state.get("conditions")
    if isinstance(raw, dict):
        # Fields a newer version may add are ignored; the ones that decide comparability must
        # read, or the run's conditions count as unknown (never pooled, never compared).
        known = {k: v for k, v in raw.items() if k in RunConditions.model_fields}
        try:
            return RunConditions.model_validate(known)
        except ValidationError:
            pass
    budgets = _dict(state.get("budgets"))
    evaluation = _dict(state.get("evaluation"))
    return RunConditions(
        evaluator_version=_str(evaluation.get("evaluator_version")) if evaluation.get("enabled", True) else None,
        step_budget=_int(budgets.get("max_turns")), max_actions=_int(budgets.get("max_actions")), recorded=False)


def read_run(directory: Path, *, load: JsonLoader = load_json_file) -> RunSamples:
    """Every rollout of the batch in ``directory``. Raises :class:`RunUnreadable` when the
    batch state is missing or not a batch state. ``load`` reads one JSON file (the
    dashboard passes its cache)."""
    directory = Path(directory)
    state = load(BatchPaths(directory).state)
    if not isinstance(state, dict) or not isinstance(state.get("rollouts"), list):
        raise RunUnreadable(f"{directory}: no readable batch-state.json (is this a batch output directory?)")
    run_id = _str(state.get("batch_id")) or directory.name
    samples = tuple(_sample(run_id, directory, entry, load) for entry in state["rollouts"] if isinstance(entry, dict))
    return RunSamples(run_id=run_id, name=_str(state.get("name")), directory=directory,
                      conditions=conditions_of(state), samples=samples, rerun_of=_str(state.get("rerun_of")))


def _sample(run_id: str, batch_dir: Path, entry: Mapping[str, Any], load: JsonLoader) -> Sample:
    rollout_id = str(entry.get("rollout_id", ""))
    root = batch_dir / "rollouts" / rollout_id
    result = _dict(load(root / "result.json")) if rollout_id else {}
    provenance = _dict(result.get("task_provenance")) or _dict(_dict(load(root / "assignment.json")).get(
        "task_provenance")) if rollout_id else {}
    score_doc = _dict(load(root / "evaluation" / "score.json")) if rollout_id else {}
    score = _float(score_doc.get("score"))
    passed = _bool(score_doc.get("passed")) if score is not None else None
    invalid = score_doc != {} and (score is None or passed is None or not math.isfinite(score)
                                   or not 0.0 <= score <= 1.0)
    if invalid:
        # A score outside [0, 1], NaN, or without a verdict is not a score: never average it.
        score = passed = None
    judge = _float(_dict(load(root / "evaluation" / "vision-judge" / "score.json")).get("score")) \
        if rollout_id else None
    ledger = _dict(_dict(_dict(load(root / "resume-checkpoint.json")).get("budget")).get("ledger")) \
        if rollout_id else {}
    usage = _dict(result.get("usage"))
    tokens = sum(v for k, v in usage.items() if k != "reasoning_tokens" and isinstance(v, int))
    started, finished = _time(entry.get("started_at")), _time(entry.get("finished_at"))
    # The sandbox's lifetime as the controller measured it: the summary's definition too.
    wall = _float(entry.get("infrastructure_seconds"))
    if wall is None and started and finished:
        wall = (finished - started).total_seconds()
    turns = _int(entry.get("turns"))
    if turns is None:
        turns = _int(result.get("turns"))
    return Sample(
        run_id=run_id, rollout_id=rollout_id,
        assignment_id=_str(entry.get("assignment_id")) or rollout_id,
        trial=_int(entry.get("trial")) or 1,
        task_id=str(entry.get("task_id", "")), provider=str(entry.get("provider", "")),
        model=str(entry.get("model", "")), tool_mode=_str(entry.get("tool_mode")) or DEFAULT_TOOL_MODE,
        skill=_str(provenance.get("skill")), family=_str(provenance.get("family")),
        difficulty=_str(provenance.get("difficulty")),
        state=str(entry.get("state", "queued")), failure_class=_str(entry.get("failure_class")),
        stop_reason=_str(entry.get("stop_reason")), score=score, passed=passed, invalid_score=invalid,
        judge_score=judge,
        turns=turns, tokens=tokens,
        token_cost_usd=(_float(entry.get("token_cost_usd")) or _float(result.get("token_cost_usd")) or 0.0)
        + _earlier(entry, "token_cost_usd"),
        infrastructure_cost_usd=(_float(entry.get("infrastructure_cost_usd")) or 0.0)
        + _earlier(entry, "infrastructure_cost_usd"),
        fallback_priced=bool(_int(ledger.get("fallback_priced_responses"))) and tokens > 0,
        wall_seconds=round(wall, 3) if wall is not None else None,
    )

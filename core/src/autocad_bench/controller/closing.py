"""Closing a rollout that will never write its own result: from what its checkpoint recorded.

Two callers: resume, for a rollout whose desktop died with its controller
(``infrastructure_lost``) or was caught in flight by an immediate stop (``interrupted``),
and the batch runner, for a rollout a graceful stop caught past its child's stop bound (the
child was killed before it wrote ``result.json``). Either way the rollout gets a
``result.json``, a terminal state, and the spend its last checkpoint recorded; nothing the
pilot had already spent is dropped.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from autocad_bench.costs import hourly_rate, infrastructure_cost
from autocad_bench.costs.budget import BudgetState
from autocad_bench.harness.checkpoints import load_checkpoint
from autocad_bench.harness.layout import BatchPaths, RolloutPaths
from autocad_bench.harness.records import FailureClass, RolloutResult
from autocad_bench.harness.trace import utcnow
from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, TOOL_MODES
from autocad_bench.storage import atomic_write_json

if TYPE_CHECKING:
    from autocad_bench.controller.batch import BatchRunner


def crash_seconds(paths: RolloutPaths, started: datetime | None) -> float:
    """How long the sandbox ran, as far as the files tell: from its start to the last thing
    its pilot wrote (used when no live process timed it)."""
    if started is None:
        return 0.0
    last = max((p.stat().st_mtime for p in (paths.run_state, paths.checkpoint, paths.checkpoint_journal)
                if p.exists()), default=started.timestamp())
    return max(0.0, last - started.timestamp())


def close_from_checkpoint(runner: BatchRunner, rollout_id: str, failure: FailureClass, detail: str,
                          *, seconds: float | None = None) -> None:
    """Write the rollout's ``result.json`` as failed with ``failure`` and mark it failed.

    ``seconds`` is its infrastructure time when a live process measured it; otherwise the
    time its files show.
    """
    from autocad_bench.controller.batch import assigned_provenance

    rollout = runner.store.entry(rollout_id)
    paths = BatchPaths(runner.output_dir).rollout(rollout_id)
    checkpoint = load_checkpoint(paths)
    budget = checkpoint.budget if checkpoint is not None else BudgetState()
    if seconds is None:
        seconds = crash_seconds(paths, rollout.started_at)
    rate = hourly_rate(runner.hourly_key(), runner.prices)
    infra_cost = float(infrastructure_cost(seconds, rate.hourly_usd))
    now = utcnow()
    result = RolloutResult(
        rollout_id=rollout_id, attempt_id=rollout.attempt_id, task_id=rollout.task_id,
        task_provenance=assigned_provenance(paths), provider=rollout.provider, model=rollout.model,
        tool_mode=rollout.tool_mode if rollout.tool_mode in TOOL_MODES else DEFAULT_TOOL_MODE,
        infrastructure_backend=rollout.infrastructure_backend, status="failed",
        failure_class=failure, failure_detail=detail,
        stop_reason=None, turns=budget.turns, actions=budget.actions, invalid_turns=budget.lifetime_invalid_turns,
        model_responses=budget.ledger.responses, usage=budget.ledger.usage.model_dump(mode="json"),
        token_cost_usd=float(budget.ledger.total_usd), wall_seconds=round(budget.elapsed_s, 3),
        infrastructure_seconds=round(seconds, 3), infrastructure_cost_usd=infra_cost, drawing=None,
        attempts=max(1, budget.attempts), started_at=rollout.started_at or now, finished_at=now, exit_code=1)
    paths.root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(paths.result, result.model_dump(mode="json"))
    runner.store.update_rollout(
        rollout_id, state="failed", finished_at=now, exit_code=1,
        failure_class=failure.value, turns=budget.turns, actions=budget.actions,
        token_cost_usd=result.token_cost_usd, infrastructure_seconds=result.infrastructure_seconds,
        infrastructure_cost_usd=infra_cost)


__all__ = ["close_from_checkpoint", "crash_seconds"]

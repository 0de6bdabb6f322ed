"""``batch-state.json``: every assignment and its state, rewritten atomically on each change."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from autocad_bench.config.models import BudgetConfig
from autocad_bench.events import RolloutState
from autocad_bench.infrastructure.models import InfrastructureSpec
from autocad_bench.interrupt import Interruption
from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, RunConditions
from autocad_bench.models import JsonObject, StrictModel
from autocad_bench.storage import atomic_write_json

STATES: tuple[RolloutState, ...] = ("queued", "starting", "running", "evaluating", "done", "failed")


class EarlierAttempt(StrictModel):
    """An attempt of a rollout that an operator's stop cut short; resume ran it again.

    Its files moved to ``archived_to`` (relative to the batch directory, outside
    ``rollouts/``); its spend stays part of the rollout's and the batch's totals.
    """

    attempt_id: str
    failure_class: str | None = None
    turns: int | None = None
    actions: int | None = None
    token_cost_usd: float = 0.0
    infrastructure_seconds: float | None = None
    infrastructure_cost_usd: float = 0.0
    finished_at: datetime | None = None
    archived_to: str


class RolloutEntryState(StrictModel):
    """One planned rollout. ``assignment_id`` is the rollout id as written in the configuration
    and ``trial`` which repeat of it this is (``None``/1 in states written before trials)."""

    rollout_id: str
    assignment_id: str | None = None
    trial: int = Field(default=1, ge=1)
    task_id: str
    provider: str
    model: str
    tool_mode: str = DEFAULT_TOOL_MODE
    attempt_id: str
    infrastructure_backend: str
    state: RolloutState = "queued"
    worker_id: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    failure_class: str | None = None
    stop_reason: str | None = None
    turns: int | None = None
    actions: int | None = None
    token_cost_usd: float | None = None
    infrastructure_seconds: float | None = None
    infrastructure_cost_usd: float | None = None
    score: float | None = None
    passed: bool | None = None
    earlier_attempts: list[EarlierAttempt] = Field(default_factory=list)
    """Interrupted attempts before the current one (their spend counts, their drawings do not)."""

    @property
    def total_token_cost_usd(self) -> float:
        """Token spend of every attempt of this rollout."""
        return (self.token_cost_usd or 0.0) + sum(a.token_cost_usd for a in self.earlier_attempts)

    @property
    def total_infrastructure_cost_usd(self) -> float:
        """Infrastructure spend of every attempt of this rollout."""
        return (self.infrastructure_cost_usd or 0.0) + sum(a.infrastructure_cost_usd for a in self.earlier_attempts)


class BatchState(StrictModel):
    """The whole batch as one JSON document (the dashboard and resume read it)."""

    version: int = 1
    batch_id: str
    name: str | None
    config_path: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    status: str = "running"
    execution_mode: str
    max_concurrency: int
    admitted_wave: int
    infrastructure_backend: str
    infrastructure: JsonObject
    evaluation: JsonObject
    budgets: BudgetConfig
    pricing: JsonObject | None = None
    conditions: RunConditions | None = Field(
        default=None, description="what the batch is measured under, written when it starts")
    counts: dict[str, int] = Field(default_factory=dict)
    rollouts: list[RolloutEntryState]
    disabled_rollouts: list[str] = Field(default_factory=list)
    rerun_of: str | None = Field(default=None, description="the batch whose failed rollouts this one reruns")
    interruption: Interruption | None = Field(
        default=None, description="the signal that stopped the batch (status 'interrupted'); cleared by resume")

    @staticmethod
    def spec_json(spec: InfrastructureSpec) -> JsonObject:
        return spec.model_dump(mode="json")


class BatchStateStore:
    """Thread-safe owner of batch-state.json: every update rewrites the file atomically."""

    def __init__(self, path: Path, state: BatchState) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._state = state
        self._write()

    @property
    def state(self) -> BatchState:
        with self._lock:
            return self._state

    def entry(self, rollout_id: str) -> RolloutEntryState:
        with self._lock:
            return next(r for r in self._state.rollouts if r.rollout_id == rollout_id)

    def update_rollout(self, rollout_id: str, *, only_from: tuple[str, ...] | None = None,
                       **changes: Any) -> tuple[RolloutEntryState, RolloutEntryState]:
        """Apply ``changes`` to one rollout; return (before, after).

        With ``only_from`` the change applies only if the rollout is still in one of those
        states (checked under the lock, so a monitor never overwrites a final state).
        """
        with self._lock:
            rollouts = list(self._state.rollouts)
            index = next(i for i, r in enumerate(rollouts) if r.rollout_id == rollout_id)
            before = rollouts[index]
            if only_from is not None and before.state not in only_from:
                return before, before
            after = before.model_copy(update=changes)
            rollouts[index] = after
            self._state = self._state.model_copy(update={"rollouts": rollouts})
            self._write()
            return before, after

    def update(self, **changes: Any) -> None:
        with self._lock:
            self._state = self._state.model_copy(update=changes)
            self._write()

    def _write(self) -> None:
        from autocad_bench.harness.trace import utcnow

        counts = Counter(r.state for r in self._state.rollouts)
        self._state = self._state.model_copy(update={
            "counts": {s: counts.get(s, 0) for s in STATES}, "updated_at": utcnow()})
        atomic_write_json(self.path, self._state.model_dump(mode="json"))

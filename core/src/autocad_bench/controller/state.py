"""``batch-state.json``: every assignment and its state, written atomically in coalesced snapshots."""

from __future__ import annotations

import logging
import threading
import time
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
from autocad_bench.storage import atomic_write_model

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


DEFERRED_STATES: frozenset[str] = frozenset({"running", "evaluating"})
"""States whose write may wait for the next coalesced snapshot: the monitor derives them
from the pilot's own files (run state, result), and resume reads those files, not these
states. Every other change (queued, starting with its start time, done, failed, spend,
attempts) is durable on disk before :meth:`BatchStateStore.update_rollout` returns."""


class BatchStateStore:
    """Thread-safe owner of batch-state.json: one in-memory state, coalesced durable snapshots.

    The file is the whole batch, so rewriting it on every rollout change made each change
    cost O(rollouts) and a batch O(rollouts^2). Instead a writer thread rewrites it
    (atomically, fsynced) at most once every ``min_interval_s``; every change is in the
    next write, so one write commits all the changes made while the previous one ran
    (group commit). A change that resume or the spend depends on waits until a write that
    contains it is durable (see :data:`DEFERRED_STATES` for the ones that need not), so after
    ``kill -9`` the file is never older than the last such change that returned. Batch-level
    updates (start, finish, interruption) are written synchronously.
    """

    def __init__(self, path: Path, state: BatchState, *, min_interval_s: float = 0.05,
                 deferred_s: float = 1.0) -> None:
        self.path = path
        self.min_interval_s = min_interval_s
        self.deferred_s = deferred_s
        # Re-entrant: abort() writes from a signal handler that may interrupt a holder.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._state = state
        self._index = {r.rollout_id: i for i, r in enumerate(state.rollouts)}
        self._counts: Counter[str] = Counter(r.state for r in state.rollouts)
        self._generation = 0  # bumped by every change
        self._written = 0  # the generation the file on disk holds
        self._durable_wanted = 0  # the newest generation someone waits to see durable
        self._dirty_since: float | None = None
        self._last_write = 0.0
        self._writer: threading.Thread | None = None
        self._closed = False
        # One file write at a time, outside the state lock; re-entrant because abort() writes from a
        # signal handler that may interrupt a write on the main thread (it then exits at once).
        self._write_lock = threading.RLock()
        self.writes = 0
        self.flush()

    @property
    def state(self) -> BatchState:
        """The current state (counts up to date; ``updated_at`` is the last write's)."""
        with self._lock:
            return self._state.model_copy(update={"counts": self._count_dict()})

    def entry(self, rollout_id: str) -> RolloutEntryState:
        with self._lock:
            return self._state.rollouts[self._index[rollout_id]]

    def update_rollout(self, rollout_id: str, *, only_from: tuple[str, ...] | None = None,
                       **changes: Any) -> tuple[RolloutEntryState, RolloutEntryState]:
        """Apply ``changes`` to one rollout; return (before, after).

        With ``only_from`` the change applies only if the rollout is still in one of those
        states (checked under the lock, so a monitor never overwrites a final state).
        Returns once the change is durable, unless it only moves the rollout to a
        :data:`DEFERRED_STATES` state (then the next coalesced write carries it).
        """
        with self._lock:
            index = self._index[rollout_id]
            before = self._state.rollouts[index]
            if only_from is not None and before.state not in only_from:
                return before, before
            after = before.model_copy(update=changes)
            rollouts = list(self._state.rollouts)
            rollouts[index] = after
            self._state = self._state.model_copy(update={"rollouts": rollouts})
            if after.state != before.state:
                self._counts[before.state] -= 1
                self._counts[after.state] += 1
            self._generation += 1
            generation = self._generation
            deferred = set(changes) == {"state"} and after.state in DEFERRED_STATES
            if self._dirty_since is None:
                self._dirty_since = time.monotonic()
            if not deferred:
                self._durable_wanted = max(self._durable_wanted, generation)
            self._start_writer()
            self._changed.notify_all()
            if not deferred:
                while self._written < generation and not self._closed:
                    self._changed.wait()
            if self._closed and self._written < generation:
                # The writer is gone (closed): write it here rather than lose it.
                self._lock.release()
                try:
                    self.flush()
                finally:
                    self._lock.acquire()
            return before, after

    def update(self, **changes: Any) -> None:
        """Apply batch-level ``changes`` and write the file now (durably)."""
        with self._lock:
            self._state = self._state.model_copy(update=changes)
            self._generation += 1
        self.flush()

    def flush(self) -> None:
        """Write every change made so far, durably, before returning."""
        with self._lock:
            target = self._generation
        self._write_until(target)

    def close(self) -> None:
        """Write what is pending and stop the writer thread (idempotent)."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()
            writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout=30)
        self.flush()

    # --- writing ------------------------------------------------------------------------

    def _count_dict(self) -> dict[str, int]:
        return {s: self._counts.get(s, 0) for s in STATES}

    def _start_writer(self) -> None:
        if self._writer is None and not self._closed:
            self._writer = threading.Thread(target=self._write_loop, name="batch-state-writer", daemon=True)
            self._writer.start()

    def _write_loop(self) -> None:
        with self._lock:
            while True:
                while not self._closed and self._written >= self._generation:
                    self._changed.wait()
                if self._closed:
                    return
                now = time.monotonic()
                # Durable waiters: the next write as soon as the minimum interval allows, so a
                # burst of changes shares one write. Deferred-only changes: within deferred_s.
                due = self._last_write + self.min_interval_s
                if self._durable_wanted <= self._written:
                    due = max(due, (self._dirty_since or now) + self.deferred_s)
                if now < due:
                    self._changed.wait(due - now)
                    continue
                target = self._generation
                self._lock.release()
                try:
                    self._write_until(target)
                except Exception:  # a full disk must not kill the writer: waiters retry it
                    logging.getLogger(__name__).exception("writing %s failed", self.path)
                    time.sleep(self.min_interval_s)
                finally:
                    self._lock.acquire()

    def _write_until(self, target: int) -> None:
        """Make the file hold at least generation ``target`` (writes at most once)."""
        from autocad_bench.harness.trace import utcnow

        with self._write_lock:
            with self._lock:
                if self._written >= target and self.writes:
                    return
                generation = self._generation
                self._state = self._state.model_copy(update={"counts": self._count_dict(), "updated_at": utcnow()})
                snapshot = self._state
                self._dirty_since = None
            # Serialised and fsynced outside the state lock: changes keep arriving meanwhile
            # and go into the next write. fsync stays: a change that returned must survive
            # a power loss, since resume trusts this file for the rollout list and spend.
            atomic_write_model(self.path, snapshot)
            with self._lock:
                self.writes += 1
                self._last_write = time.monotonic()
                self._written = max(self._written, generation)
                self._changed.notify_all()

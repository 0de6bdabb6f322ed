"""Repeated trials: the rollouts a batch plans, one per (assignment, trial).

``config.rollouts`` stays what the user wrote: one :class:`RolloutEntry` per (task, model)
assignment. :func:`expand_trials` is the one place that turns it into the rollouts a batch
runs: every entry becomes ``trials`` :class:`PlannedRollout` values, ordered trial by trial
(trial 1 of every assignment, then trial 2, ...), so an interrupted or capped batch has a
complete first pass before any repeat. Admission, the controller and resume all iterate
these planned rollouts; each one is an ordinary rollout with its own directory, attempt id,
desktop, trace and score.

Rollout ids: the written ``rollout_id`` when ``trials`` is 1 (so batches without trials keep
their ids), ``<rollout_id>.t<n>`` (n = 1..trials) otherwise. The suffix is split off at the
last ``.t``, so distinct written ids always give distinct trial ids.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autocad_bench.metrics.conditions import ToolMode

if TYPE_CHECKING:
    from autocad_bench.config.models import BatchConfig, RolloutEntry
    from autocad_bench.models import JsonObject

MAX_ROLLOUT_ID_LENGTH = 128
"""The length limit of :data:`autocad_bench.models.Identifier`, which trial ids must also meet."""


def trial_rollout_id(assignment_id: str, trial: int, trials: int) -> str:
    """The rollout id of ``trial`` (1-based) of the assignment written as ``assignment_id``."""
    return assignment_id if trials == 1 else f"{assignment_id}.t{trial}"


def longest_trial_id(assignment_id: str, trials: int) -> str:
    """The longest rollout id ``assignment_id`` expands to (the one of the last trial)."""
    return trial_rollout_id(assignment_id, trials, trials)


@dataclass(frozen=True, slots=True)
class PlannedRollout:
    """One rollout of the batch: which written assignment it repeats, and which trial it is.

    ``index`` is the assignment's position in ``$.rollouts``; ``enabled`` says whether this
    batch runs it (the entry is enabled, or a rerun selection names this very trial).
    """

    rollout_id: str
    trial: int
    trials: int
    index: int
    entry: RolloutEntry
    enabled: bool

    @property
    def assignment_id(self) -> str:
        """The ``rollout_id`` the user wrote for the assignment."""
        return self.entry.rollout_id

    @property
    def task_id(self) -> str:
        return self.entry.task_id

    @property
    def provider(self) -> str:
        return self.entry.provider

    @property
    def model(self) -> str:
        return self.entry.model

    @property
    def provider_options(self) -> JsonObject:
        return self.entry.provider_options

    @property
    def tool_mode(self) -> ToolMode:
        """The entry's ``tool_mode`` (``function`` unless it names ``native``)."""
        return self.entry.tool_mode


def expand_trials(config: BatchConfig, only: Collection[str] | None = None) -> tuple[PlannedRollout, ...]:
    """Every rollout ``config`` plans, disabled ones included (``enabled`` False).

    Without ``only`` a rollout is enabled when its entry is. With ``only`` (a rerun or a
    resume selection of rollout ids) exactly the named rollouts are enabled, whatever
    their entries say; callers check beforehand that every name is planned.
    """
    selected = None if only is None else frozenset(only)
    trials = config.trials
    return tuple(
        PlannedRollout(
            rollout_id=(rollout_id := trial_rollout_id(entry.rollout_id, trial, trials)),
            trial=trial, trials=trials, index=index, entry=entry,
            enabled=entry.enabled if selected is None else rollout_id in selected,
        )
        for trial in range(1, trials + 1)
        for index, entry in enumerate(config.rollouts)
    )


def active_entries(planned: Collection[PlannedRollout]) -> list[tuple[int, RolloutEntry]]:
    """(index, entry) of every assignment with at least one enabled trial, in config order."""
    seen: dict[int, RolloutEntry] = {}
    for rollout in planned:
        if rollout.enabled:
            seen.setdefault(rollout.index, rollout.entry)
    return sorted(seen.items(), key=lambda item: item[0])


__all__ = [
    "MAX_ROLLOUT_ID_LENGTH",
    "PlannedRollout",
    "active_entries",
    "expand_trials",
    "longest_trial_id",
    "trial_rollout_id",
]

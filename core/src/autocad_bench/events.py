"""Events delivered to observer hooks."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from autocad_bench.models import JsonObject, StrictModel

RolloutState = Literal["queued", "starting", "running", "evaluating", "done", "failed"]


class BatchEvent(StrictModel):
    """Sent to ``batch_started`` and ``batch_finished`` observers; ``summary`` holds the rollout state counts."""

    batch_id: str
    output_dir: str
    infrastructure_backend: str
    rollouts: int
    at: datetime
    summary: JsonObject = Field(default_factory=dict)


class RolloutStateEvent(StrictModel):
    """Sent to ``rollout_state_changed`` observers each time a rollout moves to another state
    (``previous`` is ``None`` for its first).
    """

    batch_id: str
    rollout_id: str
    previous: RolloutState | None
    state: RolloutState
    at: datetime
    detail: str = ""


class ModelTurnEvent(StrictModel):
    """Sent to ``model_turn_recorded`` observers once a model turn is written to the trace.

    Read by the controller from the rollout's ``model_turn_summaries.jsonl``, so it arrives
    in shared and in subprocess mode alike, within a fraction of a second of the turn.
    """

    batch_id: str
    rollout_id: str
    turn_index: int
    valid: bool
    """Whether the turn's action batch passed validation."""
    actions: int
    """Actions the turn executed (0 for an invalid turn)."""
    cost_usd: float
    """The rollout's token spend so far, this turn included."""
    at: datetime

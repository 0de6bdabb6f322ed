"""Events delivered to observer hooks."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from autocad_bench.models import JsonObject, StrictModel

RolloutState = Literal["queued", "starting", "running", "evaluating", "done", "failed"]


class BatchEvent(StrictModel):
    batch_id: str
    output_dir: str
    infrastructure_backend: str
    rollouts: int
    at: datetime
    summary: JsonObject = Field(default_factory=dict)


class RolloutStateEvent(StrictModel):
    batch_id: str
    rollout_id: str
    previous: RolloutState | None
    state: RolloutState
    at: datetime
    detail: str = ""


class ModelTurnEvent(StrictModel):
    batch_id: str
    rollout_id: str
    turn_index: int
    valid: bool
    actions: int
    cost_usd: float
    at: datetime

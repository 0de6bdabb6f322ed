"""The pilot's durable records: run state, resume checkpoint and result."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Literal

from pydantic import Field

from autocad_bench.costs import BudgetState
from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, ToolMode
from autocad_bench.models import ArtifactRef, JsonObject, StrictModel
from autocad_bench.retry.accounting import RetryCounters


class FailureClass(enum.StrEnum):
    """Every failed rollout is exactly one of these (the sandbox contract's classification)."""

    ADMISSION_FAILED = "admission_failed"
    """No model request was made: lease, reset or handoff evidence failed."""
    TRANSPORT_EXHAUSTED = "transport_exhausted"
    """Bounded broker retries could not restore communication with the desktop."""
    MODEL_CONTRACT_ERROR = "model_contract_error"
    """The provider kept omitting or malforming ``computer_action``, or failed permanently."""
    ACTION_REJECTED = "action_rejected"
    """Too many consecutive invalid batches, or the desktop side refused a batch."""
    ARTIFACT_UNAVAILABLE = "artifact_unavailable"
    """The drawing could not be checkpointed and retrieved."""
    CLEANUP_ERROR = "cleanup_error"
    """Evidence retrieval, release or worker cleanup failed within its bound."""
    INFRASTRUCTURE_LOST = "infrastructure_lost"
    """The controller died and the rollout's desktop could not be reconnected: the rollout is
    closed on resume with the spend its checkpoint recorded (rerun it by this class)."""
    MODEL_REFUSED = "model_refused"
    """The model refused the task (a refusal stop reason): it is failed at once, never asked again."""
    SAFETY_CHECK_STOPPED = "safety_check_stopped"
    """The model's computer-use tool raised a safety check and the provider's policy is to stop
    (OpenAI's ``pending_safety_checks`` with ``safety_checks: "stop"``)."""
    INTERRUPTED = "interrupted"
    """The operator stopped the batch (SIGINT or SIGTERM) after the rollout had reached the
    model: it stopped at a turn boundary, its drawing and spend were kept, and it is never
    scored (a half-finished drawing measures nothing). Rerun it by this class."""


PilotPhase = Literal["starting", "running", "checkpointing", "finished"]


class PendingBatch(StrictModel):
    """A validated batch written down *before* it is sent, so a resumed pilot resends it
    with the same request id instead of asking the model again (exactly-once)."""

    tool_use_id: str
    request_id: str
    expected_index: int = Field(ge=0)
    actions: list[JsonObject]
    turn_index: int = Field(ge=0)


class ResumeCheckpoint(StrictModel):
    """The exact model-visible state after the last completed step of the loop."""

    version: Literal[1] = 1
    revision: int = Field(default=0, ge=0)
    """Counts every write of the checkpoint; the newest of the file and its journal wins."""
    rollout_id: str
    attempt_id: str
    session_id: str | None = None
    next_index: int = Field(default=0, ge=0)
    turn_index: int = Field(default=0, ge=0)
    frame: ArtifactRef | None = None
    frame_sequence: int = Field(default=0, ge=0)
    pointer: tuple[int, int] | None = None
    """The broker-reported pointer position of ``frame`` (``FrameInfo.pointer``), so a resumed
    pilot shows the model the same pointer with the same frame; ``None`` when the broker did
    not report one, and for checkpoints written before the field existed."""
    feedback: str = ""
    tool_use_id: str | None = None
    post_action_visual_stable: bool | None = None
    provider_state: JsonObject | None = None
    pending: PendingBatch | None = None
    budget: BudgetState = Field(default_factory=BudgetState)
    counters: RetryCounters = Field(default_factory=RetryCounters)
    done: bool = False
    stop_reason: str | None = None
    drawing: ArtifactRef | None = None
    released: bool = False
    failure: FailureClass | None = None
    failure_detail: str = ""


class RunState(StrictModel):
    """``run-state.json``: the live status of the pilot, rewritten atomically."""

    rollout_id: str
    attempt_id: str
    phase: PilotPhase
    pid: int
    attempts: int = Field(ge=1)
    session_id: str | None = None
    turns: int = 0
    actions: int = 0
    next_index: int = 0
    invalid_streak: int = 0
    invalid_total: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    counters: RetryCounters = Field(default_factory=RetryCounters)
    stop_reason: str | None = None
    updated_at: datetime


class RolloutResult(StrictModel):
    """``result.json``: how the rollout ended, written exactly once per finished attempt."""

    rollout_id: str
    attempt_id: str
    task_id: str
    task_provenance: dict[str, str | int | None] = Field(
        default_factory=dict, description="the task's family, family version, seed, skill, difficulty, split")
    provider: str
    model: str
    tool_mode: ToolMode = Field(default=DEFAULT_TOOL_MODE,
                                description="how the model drove the desktop: function or native")
    infrastructure_backend: str
    status: Literal["completed", "failed"]
    failure_class: FailureClass | None
    failure_detail: str = ""
    stop_reason: str | None
    turns: int
    actions: int
    invalid_turns: int
    model_responses: int
    usage: JsonObject
    token_cost_usd: float
    wall_seconds: float = Field(description="the pilot's own wall time across attempts, counted from the "
                                            "handoff of the desktop (the wall-clock budget's clock)")
    handoff_seconds: float | None = Field(
        default=None, description="lease, reset and first frame of the last attempt: infrastructure warm-up, "
                                  "not counted against the wall-clock budget")
    infrastructure_seconds: float | None = Field(
        default=None, description="sandbox lifetime measured by the controller (VM-seconds)")
    infrastructure_cost_usd: float | None = None
    drawing: ArtifactRef | None
    attempts: int
    started_at: datetime
    finished_at: datetime
    exit_code: int

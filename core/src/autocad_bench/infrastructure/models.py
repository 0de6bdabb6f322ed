"""Request and response models of the infrastructure plugin protocol.

These are the only types that cross the boundary between the controller and a backend:
every hook receives and returns one of them, so a backend never depends on controller
internals and the controller never depends on a cloud SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.models import EnvName, Identifier, JsonObject, StrictModel

SUPPORTED_BROKER_VERSIONS: tuple[str, ...] = ("windows-autocad-2019-v10", "windows-autocad-2019-v11")
"""Broker/image contract labels this harness can hand a model to (v10 reproduces, v11 is new)."""

REJECTED_BROKER_VERSIONS: Mapping[str, str] = {
    "windows-autocad-2019-v9": (
        "broker v9 images are rejected before agent handoff: they lack the replay-safe "
        "lease/reset and exactly-once action contract (v9 is a rollback image only)"
    ),
}


class InfrastructureSpec(BaseModel):
    """The ``infrastructure`` object of a batch configuration.

    ``backend``, ``broker_version`` and ``settings`` are core fields. Backends that keep
    flat legacy fields (the AWS plugin's ``image_id``, ``subnet_ids``...) receive them as
    extra fields; the selected backend's ``validate_spec`` rejects any it does not own, so
    unknown fields are still errors, just reported by the owner of the namespace.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    backend: str = Field(default="aws", min_length=1)
    broker_version: str = Field(min_length=1)
    settings: JsonObject = Field(default_factory=dict)

    def backend_fields(self) -> JsonObject:
        """The flat fields beyond ``backend``/``broker_version``/``settings``."""
        return dict(self.model_extra or {})


class AssignmentView(StrictModel):
    """One enabled (task, provider, model) assignment as a backend sees it."""

    rollout_id: Identifier
    task_id: str
    provider: str
    model: str


class CheckResult(StrictModel):
    """One admission or preflight check. ``reason`` says why it passed or failed."""

    name: str
    passed: bool
    reason: str
    details: JsonObject = Field(default_factory=dict)


class PreflightRequest(StrictModel):
    """Input of ``preflight``: what the batch wants, so the backend can check capacity."""

    batch_id: str
    spec: InfrastructureSpec
    assignments: tuple[AssignmentView, ...]
    max_concurrency: int = Field(ge=1)
    evaluation_enabled: bool = False
    evaluation_bucket: str | None = Field(
        default=None, description="the operator's bucket for evaluation transfer, for backends that need one")


class PreflightReport(StrictModel):
    """Output of ``preflight``: the checks run and how many sandboxes may start at once."""

    checks: tuple[CheckResult, ...]
    admitted_wave: int = Field(ge=0)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


class EvaluationArguments(StrictModel):
    """What the lifecycle wrapper needs to run the trusted evaluator after the child exits.

    Kept apart from the child command: the model-side harness never sees evaluator inputs.
    """

    enabled: bool = True
    task_id: str
    evaluator: Identifier = "standard"
    evaluator_version: str | None = None
    gold_cache: str | None = None
    bucket: str | None = None
    judge_model: str | None = None
    environment_names: tuple[EnvName, ...] = ()


class RolloutLaunchRequest(StrictModel):
    """Everything a backend needs to run one assignment in one fresh, isolated desktop.

    ``child_command`` is the infrastructure-neutral harness command; the backend must run
    it exactly, with the broker made reachable through the environment it adds (see
    ``BROKER_URL_ENV``/``BROKER_TOKEN_ENV``), and preserve ``output_dir`` and the exit code.
    ``child_environment_names`` lists the parent's variables the child may inherit (provider
    credentials); ``evaluation.environment_names`` are for the evaluation stage only.
    """

    batch_id: str
    rollout_id: Identifier
    attempt_id: str
    task_id: str
    spec: InfrastructureSpec
    child_command: tuple[str, ...] = Field(min_length=1)
    output_dir: Path
    log_path: Path
    evaluation: EvaluationArguments
    child_environment_names: tuple[EnvName, ...] = ()
    task_template: Path | None = Field(
        default=None, description="the task's template drawing, for backends that start the "
        "application on a copy of it (images with baked-in templates ignore it)",
    )


class RolloutCommand(StrictModel):
    """A command the controller runs in subprocess mode.

    ``environment_names`` are variables copied from the controller's environment by name;
    ``environment`` holds non-secret values the backend adds. Secrets never go in ``argv``
    or ``environment``: they travel by name only.
    """

    argv: tuple[str, ...] = Field(min_length=1)
    environment: dict[str, str] = Field(default_factory=dict)
    environment_names: tuple[EnvName, ...] = ()
    cwd: Path | None = None


class SharedChild(Protocol):
    """The in-process child harness handed to ``run_shared``."""

    async def run(self, environ: Mapping[str, str]) -> int:
        """Run the rollout harness with ``environ`` added (broker URL and token); return its exit code."""
        ...


class TracePublisherRequest(StrictModel):
    """Where live artifacts should be mirrored.

    ``destination``/``prefix`` come from ``AUTOCAD_BENCH_TRACE_DESTINATION`` and
    ``AUTOCAD_BENCH_TRACE_PREFIX``; ``destination`` is None when that is unset, so a backend
    may honour its own legacy variables (the AWS backend's ``AUTOCAD_BENCH_TRACE_S3_*``).
    """

    batch_id: str
    output_dir: Path
    destination: str | None = None
    prefix: str = ""


class ReapRequest(StrictModel):
    """Input of ``reap_batch``: clean up everything the batch may have left behind."""

    batch_id: str
    spec: InfrastructureSpec
    output_dir: Path | None = None


class ReapReport(StrictModel):
    """What ``reap_batch`` cleaned and what it could not (best effort, idempotent)."""

    cleaned: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


WorkerState = Literal["pending", "running", "stopped", "terminated", "unknown"]


class WorkerStatus(StrictModel):
    """Whether a backend worker found by recovery can be reconnected."""

    worker_id: str
    state: WorkerState
    reconnectable: bool
    detail: str = ""


class RecoveryLaunchRequest(StrictModel):
    """Input of ``build_recovery_command``: reconnect ``worker_id`` and resume the rollout."""

    launch: RolloutLaunchRequest
    worker_id: str
    resume_command: tuple[str, ...] = Field(min_length=1)


class ActiveWorkersRequest(StrictModel):
    """Input of ``list_active_workers``."""

    batch_id: str
    spec: InfrastructureSpec
    output_dir: Path


BROKER_URL_ENV = "AUTOCAD_BENCH_BROKER_URL"
"""Variable through which a backend tells the child harness where its broker listens."""

BROKER_TOKEN_ENV = "AUTOCAD_BENCH_BROKER_TOKEN"
"""Variable holding the per-rollout broker bearer token (only in the child's environment)."""


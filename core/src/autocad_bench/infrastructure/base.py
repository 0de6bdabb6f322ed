"""Base classes for infrastructure backend authors."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from autocad_bench.errors import Problem
from autocad_bench.hookspecs import INFRASTRUCTURE_HOOKS, RECOVERY_HOOKS, hookimpl
from autocad_bench.infrastructure.models import (
    ActiveWorkersRequest,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RecoveryLaunchRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    SharedChild,
    TracePublisherRequest,
    WorkerStatus,
)
from autocad_bench.infrastructure.publisher import TracePublisher
from autocad_bench.plugins.base import PluginBase
from autocad_bench.validation import problems_from_validation_error


class InfrastructurePlugin(PluginBase, abc.ABC):
    """Subclass this to add a backend; publish it in ``autocad_bench.infrastructure``.

    Set :attr:`name` (equal to the entry-point name), optionally :attr:`settings_model`
    (a pydantic model, ``extra="forbid"``, validating ``infrastructure.settings``) and
    :attr:`backend_fields` (flat ``infrastructure`` keys the backend owns). Implement
    :meth:`preflight`, :meth:`build_rollout_command`, :meth:`run_shared` and
    :meth:`reap_batch`; the controller calls the hooks in the order of
    :data:`autocad_bench.hookspecs.INFRASTRUCTURE_HOOKS`.

    A backend must isolate simultaneous rollouts, make the broker reachable to the child,
    run the exact child command, keep the output directory and exit code, never expose
    evaluator inputs or credentials to the desktop, and clean up idempotently.
    """

    hook_names: ClassVar[tuple[str, ...]] = INFRASTRUCTURE_HOOKS
    settings_model: ClassVar[type[BaseModel] | None] = None
    backend_fields: ClassVar[frozenset[str]] = frozenset()

    @hookimpl
    def validate_spec(self, spec: InfrastructureSpec, location: str) -> list[Problem]:
        """Reject flat fields the backend does not own and validate ``settings``."""
        problems = [
            Problem(f"{location}.{key}", "unknown field for backend " + repr(self.name))
            for key in sorted(spec.backend_fields())
            if key not in self.backend_fields
        ]
        if self.settings_model is not None:
            problems.extend(
                validate_model(self.settings_model, spec.settings, f"{location}.settings")
            )
        elif spec.settings:
            problems.append(
                Problem(f"{location}.settings", f"backend {self.name!r} takes no settings")
            )
        return problems

    def parse_settings(self, spec: InfrastructureSpec) -> Any:
        """The validated :attr:`settings_model` instance for ``spec`` (call after validation)."""
        if self.settings_model is None:
            return None
        return self.settings_model.model_validate(spec.settings)

    @hookimpl
    @abc.abstractmethod
    def preflight(self, request: PreflightRequest) -> PreflightReport:
        """Read-only capacity and image checks."""

    @hookimpl
    @abc.abstractmethod
    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        """The subprocess-mode lifecycle command around ``request.child_command``."""

    @hookimpl
    @abc.abstractmethod
    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        """The shared-mode lifecycle; returns the rollout's exit code."""

    @hookimpl
    def create_trace_publisher(self, request: TracePublisherRequest) -> TracePublisher | None:
        """No live trace mirroring unless a backend overrides this."""
        return None

    @hookimpl
    @abc.abstractmethod
    def reap_batch(self, request: ReapRequest) -> ReapReport:
        """Idempotent best-effort cleanup of the batch."""


class InfrastructureRecoveryPlugin(InfrastructurePlugin, abc.ABC):
    """Subclass this instead of :class:`InfrastructurePlugin` to support ``autocad-bench-resume``.

    Adds the recovery protocol (order of :data:`autocad_bench.hookspecs.RECOVERY_HOOKS`).
    A backend that does not implement it still cleans up normally, but resume fails
    explicitly instead of borrowing another backend's semantics.
    """

    hook_names: ClassVar[tuple[str, ...]] = INFRASTRUCTURE_HOOKS + RECOVERY_HOOKS

    @hookimpl
    def validate_recovery_spec(self, spec: InfrastructureSpec, location: str) -> list[Problem]:
        """By default reconnecting needs exactly what launching needs."""
        return self.validate_spec(spec, location)

    @hookimpl
    @abc.abstractmethod
    def create_recovery_session(self, spec: InfrastructureSpec) -> Any:
        """A control-plane client for the hooks below."""

    @hookimpl
    @abc.abstractmethod
    def list_active_workers(self, session: Any, request: ActiveWorkersRequest) -> dict[str, str]:
        """Rollout id to worker id for the batch's live workers."""

    @hookimpl
    def worker_id_from_log(self, log_text: str) -> str | None:
        """Legacy runs: no worker id can be found in logs unless a backend overrides this."""
        return None

    @hookimpl
    @abc.abstractmethod
    def worker_status(self, session: Any, worker_id: str) -> WorkerStatus:
        """Whether a worker can be reconnected."""

    @hookimpl
    @abc.abstractmethod
    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        """The command that reconnects to a worker and resumes the rollout."""

    @hookimpl
    @abc.abstractmethod
    def terminate_worker(self, session: Any, worker_id: str) -> bool:
        """Idempotently release a worker."""


def validate_model(model: type[BaseModel], data: Any, location: str) -> list[Problem]:
    """Validate ``data`` against ``model``; return problems located by JSON path under ``location``."""
    try:
        model.model_validate(data)
    except ValidationError as error:
        return problems_from_validation_error(error, location)
    return []

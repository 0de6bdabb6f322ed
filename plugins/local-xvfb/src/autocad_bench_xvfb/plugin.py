"""``local-xvfb``: one private Xvfb display, CAD application and broker per rollout on this machine.

The lifecycle lives in :mod:`autocad_bench_xvfb.lifecycle` and is the same code in both
execution modes: ``run_shared`` runs it on the controller's worker thread, the command of
``build_rollout_command`` runs it in ``python -m autocad_bench_xvfb.wrapper``. Worker
records (:mod:`autocad_bench_xvfb.registry`) make ``reap_batch`` and the recovery hooks
work from any process, also after the controller was killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from autocad_bench.infrastructure import (
    ActiveWorkersRequest,
    InfrastructureRecoveryPlugin,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RecoveryLaunchRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    SharedChild,
    WorkerStatus,
)
from autocad_bench_xvfb import recovery
from autocad_bench_xvfb.lifecycle import run_lifecycle
from autocad_bench_xvfb.preflight import run_preflight
from autocad_bench_xvfb.recovery import RecoverySession
from autocad_bench_xvfb.registry import WorkerRegistry
from autocad_bench_xvfb.sandbox import DEFAULT_BROKER_COMMAND
from autocad_bench_xvfb.settings import LocalXvfbSettings
from autocad_bench_xvfb.wrapper import WrapperSpec

WRAPPER_MODULE = "autocad_bench_xvfb.wrapper"


class LocalXvfbPlugin(InfrastructureRecoveryPlugin):
    """The ``local-xvfb`` backend (entry point ``autocad_bench.infrastructure``).

    ``broker_command`` replaces ``python -m autocad_bench_broker`` (the program that gets
    ``serve --host ... --ready-file ...``); only embedding applications and tests need it.
    ``environ`` is where the state directory default is looked up (default ``os.environ``).
    """

    name = "local-xvfb"
    settings_model = LocalXvfbSettings

    def __init__(self, broker_command: Sequence[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.broker_command = tuple(broker_command) if broker_command else DEFAULT_BROKER_COMMAND
        self._environ = environ

    # --- helpers -------------------------------------------------------------------------------

    def settings(self, spec: InfrastructureSpec) -> LocalXvfbSettings:
        settings: LocalXvfbSettings = self.parse_settings(spec)
        return settings

    def state_dir(self, settings: LocalXvfbSettings) -> Path:
        return settings.resolved_state_dir(self._environ)

    # --- lifecycle -----------------------------------------------------------------------------

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        settings = self.settings(request.spec)
        return run_preflight(request, settings, self.state_dir(settings), self.broker_command,
                             default_broker=self.broker_command == DEFAULT_BROKER_COMMAND)

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        settings = self.settings(request.spec)
        spec = WrapperSpec(request=request, settings=settings, state_dir=str(self.state_dir(settings)),
                           broker_command=self.broker_command)
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "launch", spec.model_dump_json(), "--",
                  *request.child_command),
            environment_names=tuple(dict.fromkeys(
                (*request.child_environment_names, *request.evaluation.environment_names))),
        )

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings = self.settings(request.spec)
        return run_lifecycle(
            request, settings, lambda broker: asyncio.run(child.run(broker)),
            state_dir=self.state_dir(settings), mode="shared", broker_command=self.broker_command,
            environ=os.environ if self._environ is None else self._environ,
        )

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        settings = self.settings(request.spec)
        cleaned, errors = recovery.reap(settings, WorkerRegistry(self.state_dir(settings)), request.batch_id)
        return ReapReport(cleaned=tuple(cleaned), errors=tuple(errors))

    # --- recovery ------------------------------------------------------------------------------

    def create_recovery_session(self, spec: InfrastructureSpec) -> RecoverySession:
        settings = self.settings(spec)
        return RecoverySession(settings, self.state_dir(settings), spec.broker_version)

    def list_active_workers(self, session: RecoverySession, request: ActiveWorkersRequest) -> dict[str, str]:
        return {record.rollout_id: record.worker_id
                for _, record in session.registry.batch(request.batch_id) if record is not None}

    def worker_id_from_log(self, log_text: str) -> str | None:
        return recovery.worker_id_from_log(log_text)

    def worker_status(self, session: RecoverySession, worker_id: str) -> WorkerStatus:
        return recovery.worker_status(session, worker_id)

    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        settings = self.settings(request.launch.spec)
        spec = WrapperSpec(request=request.launch, settings=settings, state_dir=str(self.state_dir(settings)),
                           broker_command=self.broker_command, worker_id=request.worker_id)
        launch = request.launch
        # The same variables as a launch: the re-attached child calls the model, the
        # evaluation may need the judge's key.
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "recover", spec.model_dump_json()),
            environment_names=tuple(dict.fromkeys(
                (*launch.child_environment_names, *launch.evaluation.environment_names))),
        )

    def terminate_worker(self, session: RecoverySession, worker_id: str) -> bool:
        return recovery.terminate_worker(session, worker_id)

"""``local-hyperv``: a pool of Hyper-V AutoCAD VMs; each rollout leases one and returns it restored.

The lifecycle lives in :mod:`autocad_bench_hyperv.lifecycle` and is the same code in both
execution modes: ``run_shared`` runs it on the controller's worker thread, the command of
``build_rollout_command`` runs it in ``python -m autocad_bench_hyperv.wrapper``. The VMs'
Notes are the durable lease marks, so ``reap_batch`` and the recovery hooks work from any
process, also after the controller was killed.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Mapping

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
from autocad_bench_hyperv import recovery
from autocad_bench_hyperv.bounds import TIME_SCALE_ENV
from autocad_bench_hyperv.lifecycle import run_lifecycle
from autocad_bench_hyperv.pool import Pool
from autocad_bench_hyperv.preflight import run_preflight
from autocad_bench_hyperv.recovery import RecoverySession
from autocad_bench_hyperv.runner import WINDOWS_ENVIRONMENT, RunnerFactory, default_runner
from autocad_bench_hyperv.settings import HyperVSettings
from autocad_bench_hyperv.wrapper import WrapperSpec

WRAPPER_MODULE = "autocad_bench_hyperv.wrapper"
_WORKER_IN_LOG = re.compile(r"leased ([A-Za-z0-9][A-Za-z0-9._-]*/[^ ]+) for rollout")


class HyperVPlugin(InfrastructureRecoveryPlugin):
    """The ``local-hyperv`` backend (entry point ``autocad_bench.infrastructure``).

    ``runner_factory`` builds the command runner of a host (default: PSRP or a local
    ``powershell.exe``, as the host's ``connection`` says); tests inject one that talks to an
    in-memory Hyper-V host. It applies to this process only: the subprocess wrapper always
    uses the configured connection. ``environ`` is where credentials are read (default
    ``os.environ``).
    """

    name = "local-hyperv"
    settings_model = HyperVSettings

    def __init__(self, runner_factory: RunnerFactory | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self._runner_factory = runner_factory
        self._environ = environ

    # --- helpers -------------------------------------------------------------------------------

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def settings(self, spec: InfrastructureSpec) -> HyperVSettings:
        settings: HyperVSettings = self.parse_settings(spec)
        return settings

    def pool(self, settings: HyperVSettings) -> Pool:
        environ = self.environ
        factory = self._runner_factory or (lambda host: default_runner(host, environ))
        return Pool(settings, factory)

    # --- lifecycle -----------------------------------------------------------------------------

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        settings = self.settings(request.spec)
        return run_preflight(request, settings, self.pool(settings), self.environ)

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "launch", WrapperSpec(request=request).model_dump_json(),
                  "--", *request.child_command),
            environment_names=self._names(request),
        )

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings = self.settings(request.spec)
        return run_lifecycle(request, settings, lambda broker: asyncio.run(child.run(broker)),
                             pool=self.pool(settings), environ=self.environ, mode="shared")

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        cleaned, errors = recovery.reap(self.pool(self.settings(request.spec)), request.batch_id)
        return ReapReport(cleaned=tuple(cleaned), errors=tuple(errors))

    # --- recovery ------------------------------------------------------------------------------

    def create_recovery_session(self, spec: InfrastructureSpec) -> RecoverySession:
        settings = self.settings(spec)
        return RecoverySession(settings, self.pool(settings))

    def list_active_workers(self, session: RecoverySession, request: ActiveWorkersRequest) -> dict[str, str]:
        return recovery.active_workers(session, request.batch_id)

    def worker_id_from_log(self, log_text: str) -> str | None:
        found = _WORKER_IN_LOG.findall(log_text)
        return str(found[-1]) if found else None

    def worker_status(self, session: RecoverySession, worker_id: str) -> WorkerStatus:
        return recovery.worker_status(session, worker_id)

    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        spec = WrapperSpec(request=request.launch, worker_id=request.worker_id)
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "recover", spec.model_dump_json(), "--",
                  *request.resume_command),
            environment_names=self._names(request.launch),
        )

    def terminate_worker(self, session: RecoverySession, worker_id: str) -> bool:
        return recovery.terminate_worker(session, worker_id)

    # --- internals -----------------------------------------------------------------------------

    def _names(self, request: RolloutLaunchRequest) -> tuple[str, ...]:
        settings = self.settings(request.spec)
        return tuple(dict.fromkeys((*settings.environment_names(), *WINDOWS_ENVIRONMENT, TIME_SCALE_ENV,
                                    *request.child_environment_names, *request.evaluation.environment_names)))

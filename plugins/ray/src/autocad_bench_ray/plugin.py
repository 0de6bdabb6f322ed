"""``ray``: LibreCAD desktops as Ray actors, packed onto the nodes of a Ray cluster.

Every rollout gets one detached, named :class:`~autocad_bench_ray.desktop.DesktopActor` that
needs one unit of the custom resource ``desktop`` (each node declares its slots when it
starts), so Ray's scheduler places and packs desktops. The actor runs local-xvfb's desktop
(Xvfb + LibreCAD + broker) on its node and hands the controller the broker's URL and token;
the controller then talks to the broker directly, so the exactly-once protocol, traces and
scoring are those of every other backend. ``docs/ray.md`` describes the backend.

Ray is imported only inside this package's functions: an installed, unselected ``ray``
backend costs nothing.
"""

from __future__ import annotations

import asyncio
import os
import sys

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
from autocad_bench_ray import recovery
from autocad_bench_ray.connection import ClusterUnavailable, ensure_cluster, stop_local_cluster
from autocad_bench_ray.lifecycle import RayLog, run_rollout
from autocad_bench_ray.readiness import run_preflight
from autocad_bench_ray.recovery import RecoverySession
from autocad_bench_ray.settings import RaySettings
from autocad_bench_ray.wrapper import WrapperSpec
from autocad_bench_xvfb.lifecycle import EXIT_LAUNCH_FAILED

WRAPPER_MODULE = "autocad_bench_ray.wrapper"


class RayPlugin(InfrastructureRecoveryPlugin):
    """The ``ray`` backend (entry point ``autocad_bench.infrastructure``)."""

    name = "ray"
    settings_model = RaySettings

    def settings(self, spec: InfrastructureSpec) -> RaySettings:
        """The validated settings of ``spec`` (raises on invalid settings; ``validate_spec`` reports them)."""
        settings: RaySettings = self.parse_settings(spec)
        return settings

    # --- lifecycle -----------------------------------------------------------------------------

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        return run_preflight(request, self.settings(request.spec))

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        settings = self.settings(request.spec)
        address = ensure_cluster(settings, request.batch_id, start=True)
        assert address is not None
        spec = WrapperSpec(request=request, settings=settings, address=address)
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "launch", spec.model_dump_json(), "--",
                  *request.child_command),
            environment_names=tuple(dict.fromkeys(
                (*request.child_environment_names, *request.evaluation.environment_names))),
        )

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings = self.settings(request.spec)
        try:
            ensure_cluster(settings, request.batch_id, start=True)
        except ClusterUnavailable as error:
            RayLog(request.log_path).line(f"rollout {request.rollout_id} not started: {error}")
            return EXIT_LAUNCH_FAILED
        return run_rollout(request, settings, lambda broker: asyncio.run(child.run(broker)), os.environ)

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        settings = self.settings(request.spec)
        try:
            address = ensure_cluster(settings, request.batch_id, start=False)
        except ClusterUnavailable as error:
            return ReapReport(errors=(str(error),))
        if address is None:
            return ReapReport()
        cleaned, errors = recovery.reap(settings, request.batch_id, None)
        stopped = stop_local_cluster(request.batch_id)
        if stopped is not None:
            cleaned.append(f"local Ray cluster at {stopped}")
        return ReapReport(cleaned=tuple(cleaned), errors=tuple(errors))

    # --- recovery ------------------------------------------------------------------------------

    def create_recovery_session(self, spec: InfrastructureSpec) -> RecoverySession:
        settings = self.settings(spec)
        address = None
        if settings.address is not None:
            address = ensure_cluster(settings, "", start=False)
        return RecoverySession(settings, address)

    def list_active_workers(self, session: RecoverySession, request: ActiveWorkersRequest) -> dict[str, str]:
        if session.address is None:
            return {}  # a local cluster died with the controller that started it
        return recovery.list_active_workers(session.settings, request.batch_id)

    def worker_id_from_log(self, log_text: str) -> str | None:
        return recovery.worker_id_from_log(log_text)

    def worker_status(self, session: RecoverySession, worker_id: str) -> WorkerStatus:
        if session.address is None:
            return WorkerStatus(worker_id=worker_id, state="terminated", reconnectable=False,
                                detail="the local Ray cluster ended with the controller that started it")
        return recovery.worker_status(worker_id)

    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        launch = request.launch
        settings = self.settings(launch.spec)
        if settings.address is None:
            raise ClusterUnavailable("a local Ray cluster cannot be re-attached after its controller ended")
        spec = WrapperSpec(request=launch, settings=settings, address=settings.address, worker_id=request.worker_id)
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "recover", spec.model_dump_json()),
            environment_names=tuple(dict.fromkeys(
                (*launch.child_environment_names, *launch.evaluation.environment_names))),
        )

    def terminate_worker(self, session: RecoverySession, worker_id: str) -> bool:
        if session.address is None:
            return True
        return recovery.terminate_worker(worker_id)

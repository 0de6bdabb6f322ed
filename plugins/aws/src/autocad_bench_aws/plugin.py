"""``aws``: one fresh EC2 worker per rollout, reached through an SSM tunnel.

The lifecycle lives in :mod:`autocad_bench_aws.lifecycle` and is the same code in both
execution modes: ``run_shared`` runs it on the controller's worker thread, the command of
``build_rollout_command`` runs it in ``python -m autocad_bench_aws.wrapper``. The instance
tags (``BatchId``/``RolloutId``) are the durable worker index, so ``reap_batch`` and the
recovery hooks work from any process, also after the controller was killed.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

from autocad_bench.errors import Problem
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
    TracePublisher,
    TracePublisherRequest,
    WorkerStatus,
    validate_model,
)
from autocad_bench_aws.bounds import TIME_SCALE_ENV
from autocad_bench_aws.calls import AwsCallError, AwsSession, call
from autocad_bench_aws.fleet import STATE_DIR_ENV, FleetPoller, fleet_dir
from autocad_bench_aws.launch import terminate
from autocad_bench_aws.lifecycle import run_lifecycle
from autocad_bench_aws.preflight import run_preflight
from autocad_bench_aws.publisher import S3TracePublisher, parse_destination, trace_destination
from autocad_bench_aws.reconcile import reap, rollout_workers
from autocad_bench_aws.settings import AWS_FIELDS, AwsSettings, aws_settings
from autocad_bench_aws.wrapper import WrapperSpec

WRAPPER_MODULE = "autocad_bench_aws.wrapper"
AWS_ENVIRONMENT = (
    "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE",
    "AWS_STS_REGIONAL_ENDPOINTS", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
    "AWS_EC2_METADATA_DISABLED", STATE_DIR_ENV, TIME_SCALE_ENV,
)
"""Variables the subprocess wrapper inherits by name (the controller copies only named ones)."""

SessionFactory = Callable[[AwsSettings], AwsSession]
_LEGACY_WORKER = re.compile(r"launched instance (i-[0-9a-f]{8,17})")
_ANY_INSTANCE = re.compile(r"\b(i-[0-9a-f]{8,17})\b")


class AwsPlugin(InfrastructureRecoveryPlugin):
    """The ``aws`` backend (entry point ``autocad_bench.infrastructure``).

    ``session_factory`` builds the :class:`AwsSession` of a spec (default: profile or the
    standard credential chain, the spec's region); tests inject one whose clients are stubbed
    where moto has no implementation.
    """

    name = "aws"
    backend_fields = AWS_FIELDS

    def __init__(self, session_factory: SessionFactory | None = None) -> None:
        self._factory = session_factory
        self._sessions: dict[tuple[str, str | None], AwsSession] = {}
        self._lock = threading.Lock()

    def session(self, settings: AwsSettings) -> AwsSession:
        """The (cached) session of a region and profile; clients are built once and shared."""
        if self._factory is not None:
            return self._factory(settings)
        key = (settings.aws_region, settings.aws_profile)
        with self._lock:
            if key not in self._sessions:
                self._sessions[key] = AwsSession(settings.aws_region, settings.aws_profile)
            return self._sessions[key]

    # --- lifecycle -----------------------------------------------------------------------------

    def validate_spec(self, spec: InfrastructureSpec, location: str) -> list[Problem]:
        problems = super().validate_spec(spec, location)
        if problems:
            return problems
        return validate_model(AwsSettings, spec.backend_fields(), location)

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        settings = aws_settings(request.spec)
        return run_preflight(request, settings, self.session(settings))

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "launch", WrapperSpec(request=request).model_dump_json(),
                  "--", *request.child_command),
            environment_names=_names(request),
        )

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings = aws_settings(request.spec)
        session = self.session(settings)
        fleet = FleetPoller(fleet_dir(request.batch_id), session)
        return asyncio.run(run_lifecycle(request, settings, child.run, session=session, fleet=fleet,
                                         environ=os.environ, mode="shared"))

    def create_trace_publisher(self, request: TracePublisherRequest) -> TracePublisher | None:
        if request.destination is not None:
            destination, prefix_setting = request.destination, request.prefix
        else:  # the legacy AUTOCAD_BENCH_TRACE_S3_BUCKET / _S3_PREFIX names
            found = trace_destination(os.environ)
            if found is None:
                return None
            destination, prefix_setting = found
        bucket, prefix = parse_destination(destination, prefix_setting)
        # The request carries no spec; S3 follows a bucket's region redirect by itself.
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return S3TracePublisher(AwsSession(region, os.environ.get("AWS_PROFILE")), request.batch_id,
                                request.output_dir, bucket, prefix)

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        settings = aws_settings(request.spec)
        cleaned, errors = reap(self.session(settings), request.batch_id)
        return ReapReport(cleaned=tuple(cleaned), errors=tuple(errors))

    # --- recovery ------------------------------------------------------------------------------

    def create_recovery_session(self, spec: InfrastructureSpec) -> AwsSession:
        return self.session(aws_settings(spec))

    def list_active_workers(self, session: AwsSession, request: ActiveWorkersRequest) -> dict[str, str]:
        return rollout_workers(session, request.batch_id)

    def worker_id_from_log(self, log_text: str) -> str | None:
        launched = _LEGACY_WORKER.findall(log_text)
        if launched:
            return str(launched[-1])
        found = _ANY_INSTANCE.findall(log_text)
        return str(found[-1]) if found else None

    def worker_status(self, session: AwsSession, worker_id: str) -> WorkerStatus:
        try:
            found = call("DescribeInstances", lambda: session.ec2.describe_instances(InstanceIds=[worker_id]))
        except AwsCallError as error:
            state = "terminated" if error.code == "InvalidInstanceID.NotFound" else "unknown"
            return WorkerStatus(worker_id=worker_id, state=state, reconnectable=False, detail=str(error))
        instances = [i for r in found.get("Reservations", []) for i in r.get("Instances", [])]
        if not instances:
            return WorkerStatus(worker_id=worker_id, state="terminated", reconnectable=False, detail="not found")
        ec2_state = str(instances[0]["State"]["Name"])
        state = _WORKER_STATE.get(ec2_state, "unknown")
        if ec2_state != "running":
            return WorkerStatus(worker_id=worker_id, state=state, reconnectable=False, detail=f"ec2 {ec2_state}")
        try:
            info = call("DescribeInstanceInformation", lambda: session.ssm.describe_instance_information(
                Filters=[{"Key": "InstanceIds", "Values": [worker_id]}]))
        except AwsCallError as error:
            return WorkerStatus(worker_id=worker_id, state=state, reconnectable=False, detail=f"ssm: {error}")
        pings = [i.get("PingStatus") for i in info.get("InstanceInformationList", [])]
        online = "Online" in pings
        return WorkerStatus(worker_id=worker_id, state=state, reconnectable=online,
                            detail=f"ec2 {ec2_state}; ssm {pings[0] if pings else 'unregistered'}")

    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        spec = WrapperSpec(request=request.launch, worker_id=request.worker_id)
        return RolloutCommand(
            argv=(sys.executable, "-m", WRAPPER_MODULE, "recover", spec.model_dump_json(), "--",
                  *request.resume_command),
            environment_names=_names(request.launch),
        )

    def terminate_worker(self, session: AwsSession, worker_id: str) -> bool:
        try:
            terminate(session.ec2, [worker_id])
        except AwsCallError:
            return False
        return True


_WORKER_STATE: dict[str, Any] = {"pending": "pending", "running": "running", "stopping": "stopped",
                                 "stopped": "stopped", "shutting-down": "terminated", "terminated": "terminated"}


def _names(request: RolloutLaunchRequest) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*AWS_ENVIRONMENT, *request.child_environment_names,
                                *request.evaluation.environment_names)))

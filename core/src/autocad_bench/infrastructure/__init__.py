"""The infrastructure plugin protocol: base classes and request/response models."""

from autocad_bench.infrastructure.base import (
    InfrastructurePlugin,
    InfrastructureRecoveryPlugin,
    validate_model,
)
from autocad_bench.infrastructure.models import (
    BROKER_TOKEN_ENV,
    BROKER_URL_ENV,
    SUPPORTED_BROKER_VERSIONS,
    ActiveWorkersRequest,
    AssignmentView,
    CheckResult,
    EvaluationArguments,
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

__all__ = [
    "BROKER_TOKEN_ENV",
    "BROKER_URL_ENV",
    "SUPPORTED_BROKER_VERSIONS",
    "ActiveWorkersRequest",
    "AssignmentView",
    "CheckResult",
    "EvaluationArguments",
    "InfrastructurePlugin",
    "InfrastructureRecoveryPlugin",
    "InfrastructureSpec",
    "PreflightReport",
    "PreflightRequest",
    "ReapReport",
    "ReapRequest",
    "RecoveryLaunchRequest",
    "RolloutCommand",
    "RolloutLaunchRequest",
    "SharedChild",
    "TracePublisher",
    "TracePublisherRequest",
    "WorkerStatus",
    "validate_model",
]

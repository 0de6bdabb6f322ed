"""Every wait and retry of the AWS backend, in one table.

:data:`BOUNDS` is the single source: the code reads its values through the module constants
below, ``docs/aws.md`` prints the same table (a test compares them), and nothing in the
backend waits or retries without one of these limits. Times are the production values;
:func:`scaled` shrinks them (never stretches them) when ``AUTOCAD_BENCH_AWS_TIME_SCALE`` is
set below 1, which only the test suite and the benchmark do. Counts are never scaled.
"""

from __future__ import annotations

from typing import Literal

from autocad_bench.infrastructure.bounds import Bound, EvidenceBounds, TimeScale
from autocad_bench.infrastructure.bounds import bounds_table as render_table

TIME_SCALE_ENV = "AUTOCAD_BENCH_AWS_TIME_SCALE"
"""A factor in (0, 1] applied to every time bound (tests only); counts never change."""
_SCALE = TimeScale(TIME_SCALE_ENV)
time_scale, scaled = _SCALE.factor, _SCALE.scaled

Unit = Literal["requests", "seconds", "processes", "restarts", "attempts", "clones", "checks", "passes", "minutes",
              "calls"]
"""The units a row of :data:`BOUNDS` may have."""

RUN_INSTANCES_REQUESTS = 6
OTHER_CALL_REQUESTS = 3
AWS_BACKOFF_BASE_S = 1.0
AWS_BACKOFF_MAX_S = 20.0
QUOTA_RELEASE_BACKOFF_S = 15.0
INSTANCE_RUNNING_S = 900.0
SSM_ONLINE_S = 600.0
READINESS_CHECKS = 2
READINESS_COMMAND_S = 120.0
DEFAULT_CLONES = 2
MAX_CLONES = 3
TUNNEL_START_PROCESSES = 3
TUNNEL_HEALTH_S = 45.0
TUNNEL_RESTARTS = 8
TUNNEL_WATCH_INTERVAL_S = 2.0
RESET_WRAPPER_ATTEMPTS = 2
BROKER_TRANSPORT_ATTEMPTS = 8
EVALUATION_EXPORT_S = 600.0
PRESIGNED_URL_S = 900
EVALUATION_DOWNLOAD_S = 120.0
POLL_INTERVAL_S = 5.0
POLL_INTERVAL_MAX_S = 60.0
SSM_COMMAND_POLL_S = 2.0
TERMINATE_REQUESTS = OTHER_CALL_REQUESTS
RECONCILE_PASSES = 1
DEFAULT_TTL_MINUTES = 480
MIN_TTL_MINUTES = 30
MAX_TTL_MINUTES = 2880
CHILD_STOP_S = 10.0
TRACE_FLUSH_S = 30.0
TRACE_SCAN_S = 2.0
PLUGIN_VERSION_S = 10.0

EVIDENCE = EvidenceBounds(scale=scaled)
"""The caps of :func:`autocad_bench.infrastructure.evidence.finish_session` (the shared production values)."""

BOUNDS: tuple[Bound[Unit], ...] = (
    Bound("EC2 RunInstances", RUN_INSTANCES_REQUESTS, "requests",
          "retries VcpuLimitExceeded/InstanceLimitExceeded (waits for quota release), "
          "InsufficientInstanceCapacity (next subnet), throttling, transient signing, 5xx and "
          "connection errors; one ClientToken per subnet keeps a lost response idempotent"),
    Bound("Other EC2/SSM/S3/STS/Service Quotas calls", OTHER_CALL_REQUESTS, "requests",
          "read calls and idempotent terminate/stop/session calls only; SDK-internal retries are off"),
    Bound("Backoff between AWS requests", AWS_BACKOFF_MAX_S, "seconds",
          f"full jitter from {AWS_BACKOFF_BASE_S:g} s doubling to this cap; quota release waits "
          f"{QUOTA_RELEASE_BACKOFF_S:g} s per retry"),
    Bound("Instance running + both status checks ok", INSTANCE_RUNNING_S, "seconds",
          "shared fleet poller; a clone that misses it is terminated (admission failure)"),
    Bound("SSM agent online", SSM_ONLINE_S, "seconds", "shared fleet poller (DescribeInstanceInformation)"),
    Bound("Current-boot readiness", READINESS_CHECKS, "checks",
          f"first check plus one diagnostic re-check, each an SSM command bounded by "
          f"{READINESS_COMMAND_S:g} s"),
    Bound("Fresh clone admission", DEFAULT_CLONES, "clones",
          f"default; clone_attempts may be 1 to {MAX_CLONES}; the failed clone is terminated before "
          "its replacement launches; never after the first model request"),
    Bound("SSM port-forward startup", TUNNEL_START_PROCESSES, "processes",
          f"fresh session-manager-plugin processes; each must pass authenticated /health within "
          f"{TUNNEL_HEALTH_S:g} s"),
    Bound("SSM port-forward during the rollout", TUNNEL_RESTARTS, "restarts",
          f"one stable local port; the watchdog (every {TUNNEL_WATCH_INTERVAL_S:g} s) kills the "
          "whole process group and starts a fresh session"),
    Bound("Exact task lease/reset", RESET_WRAPPER_ATTEMPTS, "attempts",
          "pilot runs on one clone with the same lease identity and reset key, only while no "
          "model request was made"),
    Bound("Broker HTTP operation", BROKER_TRANSPORT_ATTEMPTS, "attempts",
          "core BrokerClient: fresh connection per retry, unchanged idempotency identity"),
    *EVIDENCE.rows("idempotent; termination follows even when it times out"),
    Bound("Evaluation export on the instance", EVALUATION_EXPORT_S, "seconds",
          f"SSM command that uploads through presigned URLs valid {PRESIGNED_URL_S} s; downloads "
          f"{EVALUATION_DOWNLOAD_S:g} s"),
    Bound("Status poll interval", POLL_INTERVAL_MAX_S, "seconds",
          f"starts at {POLL_INTERVAL_S:g} s, doubles on throttling up to this cap, halves back on success; "
          f"SSM command results are polled every {SSM_COMMAND_POLL_S:g} s"),
    Bound("Instance termination", TERMINATE_REQUESTS, "requests",
          "TerminateInstances in finally; NotFound counts as done; a failure leaves the reconciler and the TTL"),
    Bound("Batch straggler cleanup", RECONCILE_PASSES, "passes",
          "one tag-scoped DescribeInstances then one TerminateInstances, bounded retries, no polling"),
    Bound("Instance lifetime (TTL)", DEFAULT_TTL_MINUTES, "minutes",
          f"default instance_ttl_minutes ({MIN_TTL_MINUTES} to {MAX_TTL_MINUTES}); a shutdown timer in "
          "user data plus shutdown behaviour terminate ends the instance without the controller"),
    Bound("Child after SIGTERM", CHILD_STOP_S, "seconds", "subprocess-mode child, then SIGKILL"),
    Bound("Trace upload flush", TRACE_FLUSH_S, "seconds",
          f"at batch exit; live scan every {TRACE_SCAN_S:g} s"),
)


def bounds_table() -> str:
    """The Markdown table printed in ``docs/aws.md``."""
    return render_table(BOUNDS)

"""Every wait and retry of the local-hyperv backend, in one table.

:data:`BOUNDS` is the single source: the code reads its values through the module constants
below (or, for the configurable rows, through the settings field whose default and upper
limit are listed here), ``docs/hyperv.md`` prints the same table (a test compares them), and
nothing in the backend waits or retries without one of these limits. Times are the
production values; :func:`scaled` shrinks them (never stretches them) when
``AUTOCAD_BENCH_HYPERV_TIME_SCALE`` is set below 1, which only the test suite does. Counts
are never scaled.
"""

from __future__ import annotations

from typing import Literal

from autocad_bench.infrastructure.bounds import Bound, EvidenceBounds, TimeScale
from autocad_bench.infrastructure.bounds import bounds_table as render_table

TIME_SCALE_ENV = "AUTOCAD_BENCH_HYPERV_TIME_SCALE"
"""A factor in (0, 1] applied to every time bound (tests only); counts never change."""
_SCALE = TimeScale(TIME_SCALE_ENV)
time_scale, scaled = _SCALE.factor, _SCALE.scaled

Unit = Literal["seconds", "attempts", "VMs", "calls", "passes", "minutes", "checks"]
"""The units a row of :data:`BOUNDS` may have."""

# Host commands (one PowerShell invocation each, over PSRP or a local powershell.exe).
HOST_COMMAND_S = 120.0
GUEST_COMMAND_S = 60.0
READ_CALL_ATTEMPTS = 3
POOL_LOCK_WAIT_MS = 30_000
# Leasing.
DEFAULT_LEASE_WAIT_S = 600.0
MAX_LEASE_WAIT_S = 3600.0
LEASE_POLL_S = 5.0
DEFAULT_LEASE_TTL_MINUTES = 480
MIN_LEASE_TTL_MINUTES = 30
MAX_LEASE_TTL_MINUTES = 2880
# Admission of one VM.
RESTORE_ATTEMPTS = 2
DEFAULT_BOOT_S = 300.0
MAX_BOOT_S = 1800.0
HEARTBEAT_POLL_S = 3.0
ARM_ATTEMPTS = 3
DEFAULT_READINESS_S = 600.0
MAX_READINESS_S = 1800.0
READINESS_POLL_S = 5.0
DEFAULT_HANDOFF_S = 45.0
MAX_HANDOFF_S = 120.0
HEALTH_REQUEST_S = 10.0
HEALTH_RETRY_PAUSE_S = 1.0
DEFAULT_VM_ATTEMPTS = 2
MAX_VM_ATTEMPTS = 3
RESET_WRAPPER_ATTEMPTS = 2
# After the child.
CLEANUP_ATTEMPTS = 3
CLEANUP_PAUSE_S = 5.0
RECONCILE_PASSES = 1
CHILD_STOP_S = 10.0

EVIDENCE = EvidenceBounds(scale=scaled)
"""The caps of :func:`autocad_bench.infrastructure.evidence.finish_session` (the shared production values)."""

BOUNDS: tuple[Bound[Unit], ...] = (
    Bound("Host command (Get-VM, Set-VM, Start-VM, Stop-VM, checkpoints)", HOST_COMMAND_S, "seconds",
          "one PowerShell invocation over PSRP or a local powershell.exe; the process is killed (local) or the "
          "pipeline stopped (PSRP) when it overruns"),
    Bound("Guest command (Invoke-Command -VMName)", GUEST_COMMAND_S, "seconds",
          "PowerShell Direct into the VM: arm the broker token, read readiness, read the token back for recovery"),
    Bound("Read-only host calls", READ_CALL_ATTEMPTS, "attempts",
          "Get-VM, heartbeat, checkpoint and adapter reads only; a mutation is never retried blindly"),
    Bound("Pool lock (host-wide named mutex)", POOL_LOCK_WAIT_MS / 1000, "seconds",
          "every compare-and-set of a VM's Notes runs under Global\\AutoCADBenchHyperVPool; an abandoned mutex "
          "(crashed holder) is taken over"),
    Bound("Waiting for a free VM and a licence seat", DEFAULT_LEASE_WAIT_S, "seconds",
          f"default lease_wait_s (max {MAX_LEASE_WAIT_S:g}); polled every {LEASE_POLL_S:g} s; then the "
          "rollout fails as admission_failed with no model call"),
    Bound("Lease lifetime", DEFAULT_LEASE_TTL_MINUTES, "minutes",
          f"default lease_ttl_minutes ({MIN_LEASE_TTL_MINUTES} to {MAX_LEASE_TTL_MINUTES}); only an expired "
          "lease may be taken over, so keep it above the longest rollout"),
    Bound("Checkpoint restore", RESTORE_ATTEMPTS, "attempts",
          "turn off, restore and re-mark under the pool lock; each attempt is idempotent"),
    Bound("Boot until heartbeat OK", DEFAULT_BOOT_S, "seconds",
          f"default boot_timeout_s (max {MAX_BOOT_S:g}); Get-VMIntegrationService polled every "
          f"{HEARTBEAT_POLL_S:g} s"),
    Bound("Arming the broker token", ARM_ATTEMPTS, "attempts",
          "PowerShell Direct becomes available some seconds after the heartbeat; the same token is rewritten"),
    Bound("Current-boot readiness", DEFAULT_READINESS_S, "seconds",
          f"default readiness_timeout_s (max {MAX_READINESS_S:g}); guest readiness read every "
          f"{READINESS_POLL_S:g} s"),
    Bound("Authenticated /health of the exact process", DEFAULT_HANDOFF_S, "seconds",
          f"default handoff_timeout_s (max {MAX_HANDOFF_S:g}); each request {HEALTH_REQUEST_S:g} s"),
    Bound("Fresh VM admission", DEFAULT_VM_ATTEMPTS, "VMs",
          f"default vm_attempts (1 to {MAX_VM_ATTEMPTS}); a VM that fails admission is quarantined and "
          "replaced; never after the first model request"),
    Bound("Exact task lease/reset", RESET_WRAPPER_ATTEMPTS, "attempts",
          "the pilot is replayed on the same VM with the same lease identity and reset key, only while no model "
          "request was made"),
    *EVIDENCE.rows("idempotent; the VM is restored even when it times out"),
    Bound("Returning a VM to clean (turn off, restore, unmark)", CLEANUP_ATTEMPTS, "attempts",
          f"{CLEANUP_PAUSE_S:g} s apart, each with its own {RESTORE_ATTEMPTS} restore attempts; a failure leaves "
          "the mark for reap_batch"),
    Bound("Batch straggler cleanup", RECONCILE_PASSES, "passes",
          "one Get-VM per host, then turn off, restore and unmark every VM marked with the batch"),
    Bound("Child after SIGTERM", CHILD_STOP_S, "seconds", "subprocess-mode child, then SIGKILL"),
)


def bounds_table() -> str:
    """The Markdown table printed in ``docs/hyperv.md``."""
    return render_table(BOUNDS)

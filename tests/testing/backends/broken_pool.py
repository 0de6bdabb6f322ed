"""Variants of the example pool backend, each with one planted contract break.

``FLAWS`` maps a flaw to the rule id the conformance kit must name and the executed check
that exposes it. Wrapper flaws run ``broken_wrapper.py``; hook flaws override one method.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from pathlib import Path

from autocad_bench.infrastructure import (
    BROKER_TOKEN_ENV,
    BROKER_URL_ENV,
    ActiveWorkersRequest,
    ReapReport,
    ReapRequest,
    RecoveryLaunchRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    SharedChild,
    WorkerStatus,
)
from autocad_bench.testing.lifecycle_checks import Rule
from example_autocad_backend import ExamplePoolPlugin, PoolSettings
from example_autocad_backend.plugin import _lease_path, lease_worker

BROKEN_WRAPPER = Path(__file__).with_name("broken_wrapper.py")

FLAWS: dict[str, tuple[str, str]] = {
    # flaw: (executed check, rule it must break)
    "no-release": ("lifecycle", Rule.STATE_RELEASED),
    "original-wrapper": ("lifecycle", Rule.CHILD_ENVIRONMENT),
    "original-wrapper-cancel": ("cancel", Rule.STATE_RELEASED),
    "helper-outlives": ("lifecycle", Rule.NO_LEFTOVER_PROCESSES),
    "exit-zero": ("lifecycle", Rule.EXIT_CODE),
    "cannot-start": ("lifecycle", Rule.COMMAND_STARTS),
    "never-runs-child": ("lifecycle", Rule.CHILD_RUNS_ONCE),
    "runs-child-twice": ("lifecycle", Rule.CHILD_RUNS_ONCE),
    "mangles-argv": ("lifecycle", Rule.CHILD_EXACT_ARGV),
    "unreachable-url": ("lifecycle", Rule.BROKER_REACHABLE),
    "leaks-credential": ("lifecycle", Rule.CHILD_ENVIRONMENT),
    "ignores-sigterm": ("cancel", Rule.CANCEL_WITHIN_GRACE),
    "shared-returns-none": ("shared", Rule.SHARED_EXIT_CODE),
    "shared-unreachable-url": ("shared", Rule.BROKER_REACHABLE),
    "shared-leaks-environment": ("shared", Rule.CHILD_ENVIRONMENT),
    "shared-leaks-port": ("shared", Rule.NO_LEAKED_RESOURCES),
    "shared-never-runs-child": ("shared", Rule.CHILD_RUNS_ONCE),
    "shared-no-release": ("shared", Rule.STATE_RELEASED),
    "shared-hangs": ("shared", Rule.CHECK_TIMEOUT),
    "invalid-handle": ("crash", Rule.RECOVERY_WORKER_HANDLE),
    "lists-no-worker": ("crash", Rule.RECOVERY_LISTS_WORKER),
    "reap-misses-leftovers": ("crash", Rule.REAP_CLEANS_LEFTOVERS),
    "reap-overreaches": ("crash", Rule.REAP_SCOPED),
    "reap-not-idempotent": ("crash", Rule.REAP_IDEMPOTENT),
    "terminate-fails": ("crash", Rule.TERMINATE_IDEMPOTENT),
    "recovery-any-worker": ("crash", Rule.RECOVERY_SAME_DESKTOP),
    "recovery-never-runs-child": ("crash", Rule.RECOVERY_RUNS_RESUME_CHILD),
    "skips-evaluation": ("evaluation", Rule.EVALUATION_RUNS),
    "ignores-evaluation-failure": ("evaluation", Rule.EVALUATION_FAILS_ROLLOUT),
}
RECOVERY_WRAPPER_FLAWS = {"recovery-any-worker", "recovery-never-runs-child"}

_LEAKED_SOCKETS: list[socket.socket] = []


class BrokenPool(ExamplePoolPlugin):
    """The example pool with the planted ``flaw`` (a key of :data:`FLAWS`)."""

    def __init__(self, flaw: str) -> None:
        super().__init__()
        self.flaw = flaw

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        command = super().build_rollout_command(request)
        wrapper_flaw = self.flaw.removesuffix("-cancel")
        if self.flaw == "cannot-start":
            return command.model_copy(update={"argv": ("/nonexistent/example-pool-wrapper", *command.argv[3:])})
        if wrapper_flaw in {"no-release", "original-wrapper", "helper-outlives", "exit-zero", "never-runs-child",
                            "runs-child-twice", "mangles-argv", "unreachable-url", "leaks-credential",
                            "ignores-sigterm", "skips-evaluation", "ignores-evaluation-failure"}:
            return command.model_copy(update={"argv": (sys.executable, str(BROKEN_WRAPPER), wrapper_flaw,
                                                       *command.argv[3:])})
        return command

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings: PoolSettings = self.parse_settings(request.spec)
        if self.flaw == "shared-no-release":
            Path(settings.lease_dir).mkdir(parents=True, exist_ok=True)
            _lease_path(settings, 0).write_text('{"batch_id": "x", "rollout_id": "y", "pid": 0}')
            environ = {BROKER_URL_ENV: settings.workers[0], BROKER_TOKEN_ENV: os.environ[settings.token_env]}
            return asyncio.run(child.run(environ))
        with lease_worker(settings, request.batch_id, request.rollout_id) as url:
            environ = {BROKER_URL_ENV: url, BROKER_TOKEN_ENV: os.environ.get(settings.token_env, "")}
            if self.flaw == "shared-returns-none":
                asyncio.run(child.run(environ))
                return None  # type: ignore[return-value]
            if self.flaw == "shared-unreachable-url":
                environ[BROKER_URL_ENV] = "http://127.0.0.1:9"
            if self.flaw == "shared-leaks-environment":
                environ = {**os.environ, **environ}
            if self.flaw == "shared-leaks-port":
                listener = socket.socket()
                listener.bind(("127.0.0.1", 0))
                listener.listen()
                _LEAKED_SOCKETS.append(listener)
            if self.flaw == "shared-never-runs-child":
                return 5
            if self.flaw == "shared-hangs":
                time.sleep(30)
            return asyncio.run(child.run(environ))

    def list_active_workers(self, session: PoolSettings, request: ActiveWorkersRequest) -> dict[str, str]:
        workers = super().list_active_workers(session, request)
        if self.flaw == "invalid-handle":
            return {rollout: str(int(worker) + 100) for rollout, worker in workers.items()}
        if self.flaw == "lists-no-worker":
            return {}
        return workers

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        if self.flaw == "reap-misses-leftovers":
            return ReapReport()
        if self.flaw == "reap-overreaches":
            settings: PoolSettings = self.parse_settings(request.spec)
            cleaned = []
            for index in range(len(settings.workers)):
                with contextlib.suppress(FileNotFoundError):
                    _lease_path(settings, index).unlink()
                    cleaned.append(str(index))
            return ReapReport(cleaned=tuple(cleaned))
        report = super().reap_batch(request)
        if self.flaw == "reap-not-idempotent":
            return ReapReport(cleaned=("lease 0",))
        return report

    def worker_status(self, session: PoolSettings, worker_id: str) -> WorkerStatus:
        status = super().worker_status(session, worker_id)
        if self.flaw == "not-reconnectable":  # not a flaw: the kit then skips the resume, saying so
            return status.model_copy(update={"reconnectable": False, "detail": "the desktop was rebooted"})
        return status

    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        command = super().build_recovery_command(request)
        if self.flaw in RECOVERY_WRAPPER_FLAWS:
            return command.model_copy(update={"argv": (sys.executable, str(BROKEN_WRAPPER), self.flaw,
                                                       *command.argv[3:])})
        return command

    def terminate_worker(self, session: PoolSettings, worker_id: str) -> bool:
        if self.flaw == "terminate-fails":
            return False
        return super().terminate_worker(session, worker_id)

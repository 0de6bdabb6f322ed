"""The executed half of the backend conformance kit: run a backend's lifecycle and judge it.

:class:`LifecycleProbe` provisions rollouts through a backend for real, with
:mod:`autocad_bench.testing.conformance_child` as the child command, and checks the rules of
the infrastructure contract on what actually happened. Each check returns nothing when the
backend kept every rule and raises :class:`ContractViolation` listing *every* broken rule
otherwise, each prefixed with its id in brackets (``[child-runs-once] ...``), so a failing
test names the rule. The ids are the constants of :class:`Rule`.

The checks (names as in :data:`EXECUTED_CHECKS`):

``lifecycle``
    ``build_rollout_command`` run the way the controller runs it (its own session and process
    group, only the variables it names plus the base ones); the child must run exactly once
    with the exact argv, see only the variables the contract allows and no secret, reach the
    broker's ``/health``, and its nonzero exit code must be the command's. Afterwards no
    process of the rollout may remain, ``external_state`` must be back to what it was and
    ``preflight`` must admit what it admitted before.
``shared``
    ``run_shared`` on a worker thread of its own: it must call the child once, with the
    broker in the environment it passes and nothing secret, and return the child's exit code
    as an ``int``; no process, listening port or open file it created may outlive it, and the
    state and capacity must be back.
``cancel``
    The command is cancelled mid-rollout as the controller's stop does: SIGTERM to its process
    group, then SIGKILL once the grace has passed. It must stop within the grace with a stop
    exit code (``128 + SIGTERM``, or ``-SIGTERM`` for a command killed by the signal), the
    child must have had its SIGTERM, and the backend's cleanup must still have run: nothing
    left (processes, state, capacity).
``crash``
    The controller "crashes": the command's whole process group is SIGKILLed mid-rollout, so
    no ``finally`` runs. A recovery backend must list the rollout's worker and recognise that
    handle in ``worker_status``; ``reap_batch`` of another batch must leave the leftovers
    alone, ``reap_batch`` of this batch must remove every one of them (processes included)
    and say so, a second reap must find nothing, and ``terminate_worker`` on the reaped worker
    must still return ``True``. Once those hold, a recovery backend then resumes a second
    crashed rollout: when ``worker_status`` calls its worker reconnectable, the kit builds
    ``build_recovery_command`` (a :class:`RecoveryLaunchRequest` as the controller's resume
    builds it, with a recording child as ``resume_command``) and runs it as the controller
    runs a subprocess-mode command. The resume child must run exactly once with the exact
    resume argv, reach the same worker's broker (the URL the crashed child had, or a URL whose
    ``/health`` names the same desktop by ``boot_id`` and ``startup_id``), see only
    the allowed environment, and its exit code must be the command's; afterwards no process
    may remain and ``external_state`` and the capacity must be back. When the worker is not
    reconnectable (or the backend has no recovery protocol) the resume path is not
    exercised: no failure, but :attr:`LifecycleProbe.not_exercised` says why.

``evaluation``
    The ``lifecycle`` check's command for a batch that enables evaluation, with an evaluation
    that cannot succeed (no gold cache is given). The child must still run once and exit 0;
    then the lifecycle must run the trusted evaluation (core
    :func:`~autocad_bench.evaluation.evaluate_rollout`), which records
    ``evaluation/status.json`` in the rollout directory, and its failure must fail the rollout:
    the command's exit code must not be 0. A lifecycle that skips the evaluation would hand the
    controller an unscored "successful" rollout. Cleanup is checked as in ``lifecycle``. A
    backend may instead refuse the rollout before its child starts (a nonzero exit: it checks
    the evaluation settings up front); then :attr:`LifecycleProbe.not_exercised` says so.
Every check runs under its own time bound (:attr:`ConformanceOptions.check_timeout_s`):
backend hooks are called on a daemon thread and abandoned at the bound, commands are killed.
Whatever a broken backend leaves behind, the probe kills the processes it saw and reaps the
batch before it reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from autocad_bench.infrastructure.models import (
    BROKER_TOKEN_ENV,
    BROKER_URL_ENV,
    ActiveWorkersRequest,
    AssignmentView,
    EvaluationArguments,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RecoveryLaunchRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    WorkerStatus,
)
from autocad_bench.interrupt import GRACEFUL_STOP_BOUND_S
from autocad_bench.plugins import PluginHandle
from autocad_bench.testing import conformance_child
from autocad_bench.testing.process_watch import (
    OwnResources,
    ProcessWatch,
    describe,
    own_resources,
    resources_leaked,
)

T = TypeVar("T")

EXECUTED_CHECKS = ("lifecycle", "shared", "cancel", "crash", "evaluation")
"""The names :attr:`ConformanceOptions.skip` accepts, one per executed check."""

CONFORMANCE_SECRET = "conformance-secret-value-7f3a9c"
"""A provider credential the request lists for the child: the child must get it, argv never."""
EVALUATION_SECRET = "conformance-evaluation-secret-2d81e4"
"""Listed for the evaluation stage only: it must never reach the child."""
UNLISTED_SECRET = "conformance-unlisted-secret-95b0c7"
"""In the controller's environment but named by nobody: it must reach neither command nor child."""

SECRET_ENV = "AUTOCAD_BENCH_CONFORMANCE_SECRET"
EVALUATION_SECRET_ENV = "AUTOCAD_BENCH_CONFORMANCE_EVALUATION_SECRET"
UNLISTED_SECRET_ENV = "AUTOCAD_BENCH_CONFORMANCE_UNLISTED_SECRET"
SECRETS = {SECRET_ENV: CONFORMANCE_SECRET, EVALUATION_SECRET_ENV: EVALUATION_SECRET,
           UNLISTED_SECRET_ENV: UNLISTED_SECRET}

LOCALE_COERCION = frozenset({"LC_CTYPE"})
"""Set by Python itself in a C locale (PEP 538), so a Python wrapper may pass it on."""

CHILD_PAYLOAD = ("--x", "a b", "", "$HOME", "*", "'\"quoted\"'", "ü-ñ", "tail")
"""Arguments a backend must hand the child unchanged (spaces, quotes, globs, an empty one)."""

LIFECYCLE_EXIT_CODE = 7
SHARED_EXIT_CODE = 5
RESUME_EXIT_CODE = 9


class Rule:
    """The ids of the contract rules, as they prefix failure messages."""

    COMMAND_STARTS = "command-starts"
    CHILD_RUNS_ONCE = "child-runs-once"
    CHILD_EXACT_ARGV = "child-exact-argv"
    CHILD_ENVIRONMENT = "child-environment"
    BROKER_REACHABLE = "broker-reachable"
    EXIT_CODE = "exit-code-propagated"
    SHARED_EXIT_CODE = "shared-returns-exit-code"
    NO_LEFTOVER_PROCESSES = "no-leftover-processes"
    NO_LEAKED_RESOURCES = "no-leaked-ports-or-files"
    STATE_RELEASED = "state-released"
    CAPACITY_RESTORED = "capacity-restored"
    CANCEL_WITHIN_GRACE = "cancel-within-grace"
    CANCEL_EXIT_CODE = "cancel-exit-code"
    CANCEL_REACHES_CHILD = "cancel-reaches-child"
    RECOVERY_LISTS_WORKER = "recovery-lists-worker"
    RECOVERY_WORKER_HANDLE = "recovery-worker-handle"
    REAP_SCOPED = "reap-scoped-to-batch"
    REAP_CLEANS_LEFTOVERS = "reap-cleans-leftovers"
    REAP_IDEMPOTENT = "reap-idempotent"
    TERMINATE_IDEMPOTENT = "terminate-worker-idempotent"
    RECOVERY_RUNS_RESUME_CHILD = "recovery-runs-resume-child"
    RECOVERY_SAME_DESKTOP = "recovery-same-desktop"
    CHECK_TIMEOUT = "check-timeout"
    EVALUATION_RUNS = "evaluation-runs-when-enabled"
    EVALUATION_FAILS_ROLLOUT = "failed-evaluation-fails-rollout"


class ContractViolation(AssertionError):
    """One executed check found broken rules; ``violations`` is ``[(rule id, message), ...]``."""

    def __init__(self, check: str, violations: list[tuple[str, str]]) -> None:
        self.check = check
        self.violations = list(violations)
        lines = "\n".join(f"[{rule}] {message}" for rule, message in violations)
        super().__init__(f"the backend broke the contract in the '{check}' check:\n{lines}")

    @property
    def rules(self) -> list[str]:
        return [rule for rule, _ in self.violations]


@dataclass(frozen=True)
class ConformanceOptions:
    """How the executed checks run; override the ``conformance_options`` fixture to change it.

    ``check_timeout_s`` bounds each executed check as a whole (provisioning included).
    ``cancel_grace_s`` is how long a cancelled command gets between SIGTERM and SIGKILL; the
    controller gives :data:`~autocad_bench.interrupt.GRACEFUL_STOP_BOUND_S`, the default, and
    a backend that stops faster may lower it to keep its tests fast (never raise it: the
    operator is promised that bound). ``settle_s`` is how long the rollout's processes may
    take to disappear after the command exited. ``skip`` maps a check name of
    :data:`EXECUTED_CHECKS` to the reason it cannot run in this test environment: the
    check is then reported as skipped with that reason, never passed. ``child_environment_extra``
    names non-secret variables the backend adds to the child beyond the contract's.
    ``task_template`` is handed to backends that start the application on a template.
    """

    check_timeout_s: float = 120.0
    cancel_grace_s: float = GRACEFUL_STOP_BOUND_S
    settle_s: float = 5.0
    skip: Mapping[str, str] = field(default_factory=dict)
    child_environment_extra: frozenset[str] = frozenset()
    task_template: Path | None = None

    def __post_init__(self) -> None:
        unknown = set(self.skip) - set(EXECUTED_CHECKS)
        if unknown:
            raise ValueError(f"unknown executed checks {sorted(unknown)}; known: {', '.join(EXECUTED_CHECKS)}")
        for check, reason in self.skip.items():
            if not reason.strip():
                raise ValueError(f"skipping the '{check}' check needs a reason")
        if not 0 < self.cancel_grace_s <= GRACEFUL_STOP_BOUND_S:
            raise ValueError(f"cancel_grace_s must be in (0, {GRACEFUL_STOP_BOUND_S:g}]")


class _Deadline:
    def __init__(self, check: str, seconds: float) -> None:
        self.check = check
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def timeout(self, what: str) -> ContractViolation:
        return ContractViolation(self.check, [(Rule.CHECK_TIMEOUT, f"{what} did not finish within the check's "
                                               f"bound of {self.seconds:g} s (ConformanceOptions.check_timeout_s)")])


def bounded(deadline: _Deadline, what: str, call: Callable[[], T]) -> T:
    """``call()`` on a daemon thread, abandoned (and reported) when the check's bound passes."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name=f"conformance: {what}", daemon=True)
    thread.start()
    thread.join(deadline.remaining())
    if thread.is_alive():
        raise deadline.timeout(what)
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def base_environment() -> tuple[str, ...]:
    """The variables the controller gives every lifecycle command and child."""
    from autocad_bench.controller.children import BASE_ENVIRONMENT

    return BASE_ENVIRONMENT


def stop_exit_codes() -> frozenset[int]:
    """The exit codes the controller reads as "stopped by our signal"."""
    from autocad_bench.controller.batch import STOP_EXIT_CODES

    return STOP_EXIT_CODES


def command_environment(command: RolloutCommand, environ: Mapping[str, str]) -> dict[str, str]:
    """Exactly what the controller gives a lifecycle command: base and named variables, plus its own."""
    from autocad_bench.controller.children import child_environment

    return child_environment(command.environment_names, environ, command.environment)


def _diff(before: Hashable, after: Hashable) -> str:
    collections: tuple[type, ...] = (tuple, frozenset, set)
    if (isinstance(before, tuple) and isinstance(after, tuple) and len(before) == len(after)
            and all(isinstance(part, collections) for part in (*before, *after))):
        # A snapshot made of parts (files, processes, ...): show what changed in each part.
        return "; ".join(f"part {index}: {_diff(old, new)}"
                         for index, (old, new) in enumerate(zip(before, after, strict=True)) if old != new)
    if isinstance(before, tuple | frozenset | set) and isinstance(after, tuple | frozenset | set):
        gone = [item for item in before if item not in after]
        added = [item for item in after if item not in before]
        if gone or added:
            return f"now present: {_short(added)}; now missing: {_short(gone)}"
    return f"before: {_short(before)}; after: {_short(after)}"


def _short(value: object, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return "(no log)"
    return " | ".join(text) if text else "(empty log)"


class KitSharedChild:
    """The :class:`~autocad_bench.infrastructure.SharedChild` the kit hands ``run_shared``.

    Records every call's ``environ`` (as digests) and whether its broker URL answered
    ``/health``, then returns ``exit_code``.
    """

    def __init__(self, exit_code: int) -> None:
        self.exit_code = exit_code
        self.calls: list[dict[str, Any]] = []

    async def run(self, environ: Mapping[str, str]) -> int:
        import asyncio

        health = await asyncio.to_thread(conformance_child.check_health, environ.get(BROKER_URL_ENV),
                                         environ.get(BROKER_TOKEN_ENV))
        self.calls.append({"environ": {key: conformance_child.value_digest(str(value))
                                       for key, value in environ.items()},
                           "health": health, "broker_url": environ.get(BROKER_URL_ENV)})
        return self.exit_code


@dataclass
class _Run:
    """One rollout the probe started: its request, command, process and what it saw."""

    request: RolloutLaunchRequest
    command: RolloutCommand
    record_dir: Path
    process: subprocess.Popen[bytes] | None = None
    watch: ProcessWatch | None = None

    def started(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.record_dir.glob("*.started.json"))]

    def exited(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.record_dir.glob("*.exited.json"))]


@dataclass
class _Trial:
    """One check's rollout from request to clean-up: what it started from and what it started.

    ``state`` and ``capacity`` are the external state and the preflight answer before the
    rollout; ``runs`` the commands started for it (a crashed one, then its resume). Unless
    ``ok`` is set, the check broke something and :meth:`LifecycleProbe._trial` abandons it.
    """

    request: RolloutLaunchRequest
    records: Path
    state: Hashable = None
    capacity: tuple[object, ...] = ()
    runs: list[_Run] = field(default_factory=list)
    ok: bool = False


class LifecycleProbe:
    """Runs the executed checks against one backend (see the module docstring).

    ``external_state`` is the author's snapshot of everything outside the test process the
    backend may change (leases, state files, workers): it must be back to its value once a
    rollout ended and once a batch was reaped. ``workdir`` holds the kit's own files (rollout
    directories, logs, the child's records) and must lie outside that snapshot.
    """

    def __init__(self, handle: PluginHandle, spec: InfrastructureSpec, external_state: Callable[[], Hashable],
                 workdir: Path, options: ConformanceOptions | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.handle = handle
        self.spec = spec
        self.external_state = external_state
        self.workdir = workdir
        self.options = options or ConformanceOptions()
        self._environ = environ
        self.not_exercised: dict[str, str] = {}
        """Parts of a check that ran but could not be exercised on this backend, with the reason
        (``{"resume": "..."}`` when the crash check could not resume a rollout)."""

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def run(self, check: str) -> None:
        """Run the executed check ``check`` (one of :data:`EXECUTED_CHECKS`)."""
        checks: dict[str, Callable[[_Deadline], list[tuple[str, str]]]] = {
            "lifecycle": self._lifecycle, "shared": self._shared, "cancel": self._cancel, "crash": self._crash,
            "evaluation": self._evaluation}
        deadline = _Deadline(check, self.options.check_timeout_s)
        violations = checks[check](deadline)
        if violations:
            raise ContractViolation(check, violations)

    # --- building blocks -----------------------------------------------------------------

    def _request(self, check: str, plan: dict[str, Any], *, evaluation: bool = False
                 ) -> tuple[RolloutLaunchRequest, Path]:
        root = self.workdir / f"{check}-{uuid.uuid4().hex[:8]}"
        records = root / "child-records"
        records.mkdir(parents=True)
        output = root / "batch" / "rollouts" / "conformance-rollout"
        output.mkdir(parents=True)
        (root / "batch" / "logs").mkdir()
        child = (sys.executable, "-m", conformance_child.MODULE, str(records), json.dumps(plan), *CHILD_PAYLOAD)
        request = RolloutLaunchRequest(
            batch_id=f"conformance-{check}-{root.name[-8:]}", rollout_id="conformance-rollout",
            attempt_id=f"conformance-{check}.conformance-rollout.1", task_id="conformance-task", spec=self.spec,
            child_command=child, output_dir=output, log_path=root / "batch" / "logs" / "conformance-rollout.log",
            # Enabled only for the evaluation check, and without a gold cache: it can only fail.
            evaluation=EvaluationArguments(enabled=evaluation, task_id="conformance-task",
                                           environment_names=(EVALUATION_SECRET_ENV,)),
            child_environment_names=(SECRET_ENV,), task_template=self.options.task_template,
        )
        return request, records

    def _capacity(self, deadline: _Deadline, batch_id: str) -> tuple[object, ...]:
        request = PreflightRequest(
            batch_id=batch_id, spec=self.spec, max_concurrency=4,
            assignments=tuple(AssignmentView(rollout_id=f"c{i}", task_id="conformance-task", provider="scripted",
                                             model=f"m{i}") for i in range(4)))
        report = bounded(deadline, "preflight", lambda: self.handle.call("preflight", request=request))
        if not isinstance(report, PreflightReport):
            return ("not a PreflightReport", repr(report))
        return report.admitted_wave, tuple((check.name, check.passed) for check in report.checks)

    def _snapshot(self, deadline: _Deadline) -> Hashable:
        return bounded(deadline, "external_state()", self.external_state)

    def _command(self, deadline: _Deadline, request: RolloutLaunchRequest) -> RolloutCommand:
        command = bounded(deadline, "build_rollout_command",
                          lambda: self.handle.call("build_rollout_command", request=request))
        if not isinstance(command, RolloutCommand):
            raise ContractViolation(deadline.check, [(Rule.COMMAND_STARTS,
                                                      f"build_rollout_command returned {command!r}")])
        return command

    def _start(self, run: _Run) -> str | None:
        """Start the command as the controller does; the reason it could not start, if so."""
        env = command_environment(run.command, self.environ)
        try:
            with open(run.request.log_path, "ab") as log:
                run.process = subprocess.Popen(
                    list(run.command.argv), env=env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, cwd=run.command.cwd, start_new_session=True)
        except OSError as error:
            return f"the lifecycle command {list(run.command.argv)[:3]}... could not be started: {error}"
        run.watch = ProcessWatch(run.process.pid, group=True)
        run.watch.poll()
        return None

    def _wait(self, run: _Run, deadline: _Deadline, *, until: Callable[[], bool] | None = None,
              timeout: float | None = None) -> int | None:
        """Wait for the command to exit (or ``until()``), polling its processes; None on timeout."""
        assert run.process is not None and run.watch is not None
        end = time.monotonic() + min(deadline.remaining(), timeout if timeout is not None else deadline.remaining())
        while True:
            run.watch.poll()
            code = run.process.poll()
            if code is not None:
                return code
            if until is not None and until():
                return None
            if time.monotonic() >= end:
                return None
            time.sleep(0.05)

    def _kill_group(self, run: _Run, signum: int) -> None:
        assert run.process is not None
        try:
            os.killpg(run.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            if run.process.poll() is None:
                run.process.send_signal(signum)

    def _abandon(self, run: _Run | None, deadline: _Deadline, batch_id: str) -> None:
        """After a broken check: kill what the rollout left and reap its batch (best effort)."""
        if run is not None and run.process is not None:
            if run.process.poll() is None:
                self._kill_group(run, signal.SIGKILL)
                run.process.wait()
            if run.watch is not None:
                run.watch.kill_all()
        reap = ReapRequest(batch_id=batch_id, spec=self.spec, output_dir=self.workdir)
        cleanup = _Deadline(deadline.check, min(60.0, self.options.check_timeout_s))
        # The report is about the first failure, not about this clean-up.
        with contextlib.suppress(BaseException):
            bounded(cleanup, "reap_batch (kit clean-up)", lambda: self.handle.call("reap_batch", request=reap))

    def _child_rules(self, run: _Run, *, exit_code: int | None, health: bool) -> list[tuple[str, str]]:
        """Ran once, with the exact argv, allowed environment, reachable broker."""
        started = run.started()
        log = _tail(run.request.log_path)
        if not started:
            return [(Rule.CHILD_RUNS_ONCE, f"the child command never ran (no record in {run.record_dir}); "
                                           f"command log: {log}")]
        violations = []
        if len(started) > 1:
            violations.append((Rule.CHILD_RUNS_ONCE, f"the child command ran {len(started)} times, not once"))
        record = started[0]
        if record["orig_argv"] != list(run.request.child_command):
            violations.append((Rule.CHILD_EXACT_ARGV, f"the child ran as {record['orig_argv']!r}, "
                                                      f"not as {list(run.request.child_command)!r}"))
        violations += self.environment_rules(record["environ"], run.request, run.command, where="child")
        if health and not (record.get("health") or {}).get("ok"):
            detail = (record.get("health") or {}).get("detail", "not checked")
            violations.append((Rule.BROKER_REACHABLE, f"the broker URL the child got ({record.get('broker_url')!r}) "
                                                      f"did not answer /health: {detail}"))
        if exit_code is not None:
            exited = run.exited()
            if not exited or exited[0]["exit_code"] != exit_code:
                violations.append((Rule.CHILD_RUNS_ONCE, f"the child did not run to its end (exit record: "
                                                         f"{exited!r}); command log: {log}"))
        return violations

    def environment_rules(self, environ: Mapping[str, str], request: RolloutLaunchRequest, command: RolloutCommand,
                          *, where: str) -> list[tuple[str, str]]:
        """What the child may see: base and listed variables, the broker, the backend's non-secret additions.

        ``environ`` maps names to :func:`~autocad_bench.testing.conformance_child.value_digest`
        of the values. Backend-only names (named by the command but not listed for the child)
        and evaluation-only names must be absent; the listed child credential must be present
        with its value; no kit secret the child may not see may appear under any name.
        """
        base = set(base_environment())
        child_names = set(request.child_environment_names)
        allowed = (base | child_names | {BROKER_URL_ENV, BROKER_TOKEN_ENV} | set(command.environment)
                   | set(self.options.child_environment_extra) | LOCALE_COERCION)
        hidden = ((set(command.environment_names) - child_names - base - set(self.options.child_environment_extra))
                  | (set(request.evaluation.environment_names) - child_names))
        violations = []
        for name in (BROKER_URL_ENV, BROKER_TOKEN_ENV):
            if name not in environ:
                violations.append((Rule.CHILD_ENVIRONMENT, f"the {where} did not get {name}"))
        listed = environ.get(SECRET_ENV) == conformance_child.value_digest(CONFORMANCE_SECRET)
        if where in ("child", "resume child") and not listed:
            violations.append((Rule.CHILD_ENVIRONMENT, f"the {where} did not get {SECRET_ENV}, which the request "
                                                       "lists in child_environment_names"))
        if hidden & set(environ):
            violations.append((Rule.CHILD_ENVIRONMENT, f"the {where} saw backend- or evaluation-only variables "
                                                       f"{sorted(hidden & set(environ))}"))
        unexpected = set(environ) - allowed - hidden
        if unexpected:
            violations.append((Rule.CHILD_ENVIRONMENT, f"the {where} saw variables the contract does not give it: "
                                                       f"{sorted(unexpected)}"))
        forbidden = {conformance_child.value_digest(EVALUATION_SECRET): EVALUATION_SECRET_ENV,
                     conformance_child.value_digest(UNLISTED_SECRET): UNLISTED_SECRET_ENV}
        for name, digest in environ.items():
            if digest in forbidden:
                violations.append((Rule.CHILD_ENVIRONMENT, f"the {where} saw the value of {forbidden[digest]} "
                                                           f"(a secret it may not see) as {name}"))
        return violations

    def _released(self, deadline: _Deadline, run: _Run | None, state: Hashable, capacity: tuple[object, ...],
                  batch_id: str, *, what: str) -> list[tuple[str, str]]:
        """No process of the rollout left, the external state and the capacity back."""
        violations = []
        if run is not None and run.watch is not None:
            alive = run.watch.settle(min(self.options.settle_s, deadline.remaining()))
            if alive:
                violations.append((Rule.NO_LEFTOVER_PROCESSES, f"{what}, processes of the rollout still run: "
                                                               f"{describe(alive)}"))
        after = self._snapshot(deadline)
        if after != state:
            violations.append((Rule.STATE_RELEASED, f"{what}, external_state is not back to its value before the "
                                                    f"rollout (a lease or state record was not released): "
                                                    f"{_diff(state, after)}"))
        now = self._capacity(deadline, batch_id)
        if now != capacity:
            violations.append((Rule.CAPACITY_RESTORED, f"{what}, preflight no longer admits what it did before the "
                                                       f"rollout: before {capacity!r}, after {now!r}"))
        return violations

    # --- the checks -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _trial(self, check: str, plan: dict[str, Any], deadline: _Deadline, *, evaluation: bool = False
               ) -> Iterator[_Trial]:
        """Request a rollout for ``check`` and note the state before it; abandon it unless ``ok``.

        The snapshot is taken inside the guarded block so that a backend failing there is
        still reaped.
        """
        request, records = self._request(check, plan, evaluation=evaluation)
        trial = _Trial(request, records)
        try:
            trial.state = self._snapshot(deadline)
            trial.capacity = self._capacity(deadline, request.batch_id)
            yield trial
        finally:
            if not trial.ok:
                for run in reversed(trial.runs):
                    self._abandon(run, deadline, request.batch_id)
                if not trial.runs:
                    self._abandon(None, deadline, request.batch_id)

    def _launch(self, trial: _Trial, deadline: _Deadline, *, wait_started: bool) -> tuple[_Run, list[tuple[str, str]]]:
        """Build and start the trial's command (and wait for its child, if asked).

        Returns the run and the violations that end the check early (the command did not
        start, or exited before its child started); an empty list means it is running.
        """
        run = _Run(trial.request, self._command(deadline, trial.request), trial.records)
        trial.runs.append(run)
        failure = self._start(run)
        if failure is not None:
            return run, [(Rule.COMMAND_STARTS, failure)]
        return run, self._wait_started(run, deadline) if wait_started else []


    def _run_to_exit(self, trial: _Trial, deadline: _Deadline) -> tuple[_Run, int, list[tuple[str, str]]]:
        """Launch the trial's command and wait for its exit code; the violations that ended it
        early (it did not start) are returned instead, with the code -1."""
        run, early = self._launch(trial, deadline, wait_started=False)
        if early:
            return run, -1, early
        code = self._wait(run, deadline)
        if code is None:
            raise deadline.timeout("the lifecycle command")
        return run, code, []

    def _lifecycle(self, deadline: _Deadline) -> list[tuple[str, str]]:
        with self._trial("lifecycle", {"exit_code": LIFECYCLE_EXIT_CODE, "health": True}, deadline) as trial:
            run, code, early = self._run_to_exit(trial, deadline)
            if early:
                return early
            violations = self._child_rules(run, exit_code=LIFECYCLE_EXIT_CODE, health=True)
            if code != LIFECYCLE_EXIT_CODE:
                violations.append((Rule.EXIT_CODE, f"the child exited {LIFECYCLE_EXIT_CODE} but the lifecycle "
                                                   f"command exited {code}; command log: "
                                                   f"{_tail(trial.request.log_path)}"))
            violations += self._released(deadline, run, trial.state, trial.capacity, trial.request.batch_id,
                                         what="after the rollout ended")
            trial.ok = not violations
            return violations

    def _evaluation(self, deadline: _Deadline) -> list[tuple[str, str]]:
        with self._trial("evaluation", {"exit_code": 0, "health": True}, deadline, evaluation=True) as trial:
            run, code, early = self._run_to_exit(trial, deadline)
            if early:
                return early
            if not run.started() and code != 0:
                # Refusing up front an evaluation that cannot run is also keeping the contract.
                self.not_exercised["evaluation"] = (
                    f"the backend refused the rollout before its child started (exit {code}), so the evaluation "
                    f"step after the child did not run; command log: {_tail(trial.request.log_path, 2)}")
                violations = self._released(deadline, run, trial.state, trial.capacity, trial.request.batch_id,
                                            what="after the refused rollout")
                trial.ok = not violations
                return violations
            violations = self._child_rules(run, exit_code=0, health=True)
            status = trial.request.output_dir / "evaluation" / "status.json"
            if not status.is_file():
                violations.append((Rule.EVALUATION_RUNS, "the batch enables evaluation and the child exited 0, but "
                                                         "the lifecycle never evaluated the rollout (no "
                                                         f"{status.relative_to(trial.request.output_dir)} in the "
                                                         "rollout directory): run the trusted evaluation "
                                                         "(autocad_bench.evaluation.evaluate_rollout) after the "
                                                         f"child; command log: {_tail(trial.request.log_path)}"))
            if code == 0:
                violations.append((Rule.EVALUATION_FAILS_ROLLOUT, "the evaluation cannot succeed here (no gold "
                                                                  "cache is given) but the lifecycle command "
                                                                  "exited 0: a failed evaluation must fail a "
                                                                  "successful rollout"))
            violations += self._released(deadline, run, trial.state, trial.capacity, trial.request.batch_id,
                                         what="after the evaluated rollout ended")
            trial.ok = not violations
            return violations

    def _shared(self, deadline: _Deadline) -> list[tuple[str, str]]:
        stop = threading.Event()
        with self._trial("shared", {}, deadline) as trial:
            request, state, capacity = trial.request, trial.state, trial.capacity
            command = self._command(deadline, request)
            child = KitSharedChild(SHARED_EXIT_CODE)
            resources: OwnResources = own_resources()
            watch = ProcessWatch(os.getpid(), group=False)

            def follow() -> None:
                while not stop.is_set():
                    watch.poll()
                    stop.wait(0.1)

            follower = threading.Thread(target=follow, name="conformance: shared-mode processes", daemon=True)
            follower.start()
            try:
                result = bounded(deadline, "run_shared",
                                 lambda: self.handle.call("run_shared", request=request, child=child))
            finally:
                stop.set()
                follower.join()
            violations: list[tuple[str, str]] = []
            if isinstance(result, bool) or not isinstance(result, int):
                violations.append((Rule.SHARED_EXIT_CODE, f"run_shared returned {result!r}, not the child's exit "
                                                          f"code {SHARED_EXIT_CODE} as an int"))
            elif result != SHARED_EXIT_CODE:
                violations.append((Rule.SHARED_EXIT_CODE, f"the child returned {SHARED_EXIT_CODE} but run_shared "
                                                          f"returned {result}"))
            if not child.calls:
                violations.append((Rule.CHILD_RUNS_ONCE, "run_shared never ran the child (child.run was not awaited)"))
            else:
                if len(child.calls) > 1:
                    violations.append((Rule.CHILD_RUNS_ONCE, f"run_shared ran the child {len(child.calls)} times"))
                call = child.calls[0]
                violations += self.environment_rules(call["environ"], request, command, where="shared child")
                if not call["health"]["ok"]:
                    violations.append((Rule.BROKER_REACHABLE, f"the broker URL run_shared passed "
                                                              f"({call['broker_url']!r}) did not answer /health: "
                                                              f"{call['health']['detail']}"))
            alive = watch.settle(min(self.options.settle_s, deadline.remaining()))
            if alive:
                violations.append((Rule.NO_LEFTOVER_PROCESSES, f"after run_shared returned, processes it started "
                                                               f"still run: {describe(alive)}"))
                watch.kill_all()
            leaked = resources_leaked(resources, settle_s=min(2.0, deadline.remaining()))
            if leaked.ports or leaked.files:
                violations.append((Rule.NO_LEAKED_RESOURCES, f"after run_shared returned, this process still holds "
                                                             f"listening ports {sorted(leaked.ports)} and files "
                                                             f"{sorted(leaked.files)} it opened during the rollout"))
            violations += self._released(deadline, None, state, capacity, request.batch_id,
                                         what="after run_shared returned")
            trial.ok = not violations
            return violations

    def _wait_started(self, run: _Run, deadline: _Deadline) -> list[tuple[str, str]]:
        code = self._wait(run, deadline, until=lambda: bool(run.started()))
        if run.started():
            return []
        if code is None:
            raise deadline.timeout("waiting for the child to start")
        return [*self._child_rules(run, exit_code=None, health=True),
                (Rule.CHILD_RUNS_ONCE, f"the lifecycle command exited {code} before its child started")]

    def _cancel(self, deadline: _Deadline) -> list[tuple[str, str]]:
        grace = self.options.cancel_grace_s
        plan = {"sleep_s": self.options.check_timeout_s, "helper": True, "health": True}
        with self._trial("cancel", plan, deadline) as trial:
            run, early = self._launch(trial, deadline, wait_started=True)
            if early:
                return early
            violations = self._child_rules(run, exit_code=None, health=True)
            self._kill_group(run, signal.SIGTERM)
            code = self._wait(run, deadline, timeout=grace)
            if code is None:
                self._kill_group(run, signal.SIGKILL)
                assert run.process is not None
                run.process.wait()
                violations.append((Rule.CANCEL_WITHIN_GRACE, f"the command still ran {grace:g} s after SIGTERM to its "
                                                             f"process group and was SIGKILLed (its cleanup had no "
                                                             f"chance to run)"))
            elif code not in stop_exit_codes():
                violations.append((Rule.CANCEL_EXIT_CODE, f"the cancelled command exited {code}, not with a stop code "
                                                          f"({128 + signal.SIGTERM} or -{int(signal.SIGTERM)})"))
            exited = run.exited()
            if not any(record.get("terminated") for record in exited):
                violations.append((Rule.CANCEL_REACHES_CHILD, "the child never received SIGTERM: it was killed "
                                                              "without its graceful stop"))
            violations += self._released(deadline, run, trial.state, trial.capacity, trial.request.batch_id,
                                         what="after the rollout was cancelled")
            trial.ok = not violations
            return violations

    def _reap(self, deadline: _Deadline, batch_id: str, request: RolloutLaunchRequest) -> ReapReport | str:
        reap = ReapRequest(batch_id=batch_id, spec=self.spec, output_dir=request.output_dir.parents[1])
        report = bounded(deadline, f"reap_batch({batch_id!r})", lambda: self.handle.call("reap_batch", request=reap))
        return report if isinstance(report, ReapReport) else f"reap_batch returned {report!r}"

    def _crash(self, deadline: _Deadline) -> list[tuple[str, str]]:
        self.not_exercised.pop("resume", None)
        violations = self._crash_and_reap(deadline)
        if violations:
            return violations  # the resume below would only repeat what the leftovers broke
        return self._crash_and_resume(deadline)

    def _crash_and_reap(self, deadline: _Deadline) -> list[tuple[str, str]]:
        plan = {"sleep_s": self.options.check_timeout_s, "health": True}
        with self._trial("crash", plan, deadline) as trial:
            request, state, capacity = trial.request, trial.state, trial.capacity
            run, violations = self._launch(trial, deadline, wait_started=True)
            if violations:
                return violations
            self._kill_group(run, signal.SIGKILL)  # the controller and its rollouts die; no finally runs
            assert run.process is not None and run.watch is not None
            run.process.wait()
            run.watch.poll()
            left = self._snapshot(deadline)
            recovery, worker, _ = self._recovery_rules(deadline, request)
            violations += recovery
            other = self._reap(deadline, request.batch_id + "-other", request)
            if self._snapshot(deadline) != left:
                violations.append((Rule.REAP_SCOPED, "reap_batch of another batch changed this batch's leftovers"))
            first = self._reap(deadline, request.batch_id, request)
            if isinstance(first, str) or isinstance(other, str):
                violations.append((Rule.REAP_CLEANS_LEFTOVERS, str(first if isinstance(first, str) else other)))
            elif left != state and not first.cleaned:
                violations.append((Rule.REAP_CLEANS_LEFTOVERS, f"the crash left {_diff(state, left)} but reap_batch "
                                                               f"reported nothing cleaned ({first!r})"))
            alive = run.watch.settle(min(self.options.settle_s, deadline.remaining()))
            if alive:
                violations.append((Rule.REAP_CLEANS_LEFTOVERS, f"after reap_batch, processes of the crashed rollout "
                                                               f"still run: {describe(alive)}"))
            after = self._snapshot(deadline)
            if after != state:
                violations.append((Rule.REAP_CLEANS_LEFTOVERS, f"after reap_batch, external_state is not back to its "
                                                               f"value before the rollout: {_diff(state, after)}"))
            second = self._reap(deadline, request.batch_id, request)
            if isinstance(second, str) or second.cleaned or second.errors:
                violations.append((Rule.REAP_IDEMPOTENT, f"a second reap_batch of the batch was not a no-op: "
                                                         f"{second!r}"))
            if worker is not None:
                session = bounded(deadline, "create_recovery_session",
                                  lambda: self.handle.call("create_recovery_session", spec=self.spec))
                gone = bounded(deadline, "terminate_worker",
                               lambda: self.handle.call("terminate_worker", session=session, worker_id=worker))
                if gone is not True:
                    violations.append((Rule.TERMINATE_IDEMPOTENT, f"terminate_worker({worker!r}) on a reaped worker "
                                                                  f"returned {gone!r}, not True"))
            now = self._capacity(deadline, request.batch_id)
            if now != capacity:
                violations.append((Rule.CAPACITY_RESTORED, f"after reap_batch, preflight no longer admits what it did "
                                                           f"before the rollout: before {capacity!r}, after {now!r}"))
            trial.ok = not violations
            return violations

    def _recovery_rules(self, deadline: _Deadline, request: RolloutLaunchRequest
                        ) -> tuple[list[tuple[str, str]], str | None, WorkerStatus | None]:
        """A recovery backend lists the crashed rollout's worker and knows that handle (the worker id)."""
        if not self.handle.implements("list_active_workers"):
            return [], None, None
        session = bounded(deadline, "create_recovery_session",
                          lambda: self.handle.call("create_recovery_session", spec=self.spec))
        listing = ActiveWorkersRequest(batch_id=request.batch_id, spec=self.spec,
                                       output_dir=request.output_dir.parents[1])
        workers = bounded(deadline, "list_active_workers",
                          lambda: self.handle.call("list_active_workers", session=session, request=listing))
        if not isinstance(workers, dict) or request.rollout_id not in workers:
            return [(Rule.RECOVERY_LISTS_WORKER, f"after the crash, list_active_workers returned {workers!r}, "
                                                 f"without the rollout {request.rollout_id!r}")], None, None
        worker = str(workers[request.rollout_id])
        status = bounded(deadline, "worker_status",
                         lambda: self.handle.call("worker_status", session=session, worker_id=worker))
        if not isinstance(status, WorkerStatus) or status.worker_id != worker or status.state == "unknown":
            return [(Rule.RECOVERY_WORKER_HANDLE, f"list_active_workers gave the handle {worker!r} but worker_status "
                                                  f"does not know it: {status!r}")], worker, None
        return [], worker, status

    def _crash_and_resume(self, deadline: _Deadline) -> list[tuple[str, str]]:
        """Crash a second rollout and resume it on its listed worker, as ``autocad-bench-resume`` does."""
        if not (self.handle.implements("list_active_workers") and self.handle.implements("build_recovery_command")):
            self.not_exercised["resume"] = "the backend does not implement the recovery protocol"
            return []
        plan = {"sleep_s": self.options.check_timeout_s, "health": True}
        with self._trial("crash-resume", plan, deadline) as trial:
            crashed, violations = self._launch(trial, deadline, wait_started=True)
            try:
                if violations:
                    return violations
                return self._resume_crashed(trial, crashed, deadline)
            finally:
                if crashed.watch is not None:
                    crashed.watch.kill_all()  # whatever of the crashed attempt outlived it is the kit's to end

    def _resume_crashed(self, trial: _Trial, crashed: _Run, deadline: _Deadline) -> list[tuple[str, str]]:
        """Kill the running ``crashed`` rollout and resume it through the recovery hooks."""
        request, records = trial.request, trial.records
        self._kill_group(crashed, signal.SIGKILL)
        assert crashed.process is not None and crashed.watch is not None
        crashed.process.wait()
        crashed.watch.poll()
        recovery, worker, status = self._recovery_rules(deadline, request)
        if recovery or worker is None or status is None:
            return recovery
        if not status.reconnectable:
            self.not_exercised["resume"] = (f"worker_status called the worker {worker!r} not reconnectable "
                                            f"({status.state}: {status.detail or 'no detail'})")
            return []  # not a failure; the trial reaps the crashed rollout
        crashed_record = crashed.started()[0]
        resume_records = records.parent / "resume-records"
        resume_records.mkdir()
        resume_child = (sys.executable, "-m", conformance_child.MODULE, str(resume_records),
                        json.dumps({"exit_code": RESUME_EXIT_CODE, "health": True}), *CHILD_PAYLOAD)
        # As the controller's resume: the rollout's own request, its child the resume command.
        launch = request.model_copy(update={"child_command": resume_child})
        recovery_request = RecoveryLaunchRequest(launch=launch, worker_id=worker, resume_command=resume_child)
        command = bounded(deadline, "build_recovery_command",
                          lambda: self.handle.call("build_recovery_command", request=recovery_request))
        if not isinstance(command, RolloutCommand):
            return [(Rule.RECOVERY_RUNS_RESUME_CHILD, f"build_recovery_command returned {command!r}")]
        resumed = _Run(launch, command, resume_records)
        trial.runs.append(resumed)
        failure = self._start(resumed)
        if failure is not None:
            return [(Rule.RECOVERY_RUNS_RESUME_CHILD, f"the recovery command could not be started: {failure}")]
        code = self._wait(resumed, deadline)
        if code is None:
            raise deadline.timeout("the recovery command")
        violations = self._resume_rules(resumed, worker, crashed_record)
        if code != RESUME_EXIT_CODE:
            violations.append((Rule.EXIT_CODE, f"the resume child exited {RESUME_EXIT_CODE} but the recovery "
                                               f"command exited {code}; command log: {_tail(launch.log_path)}"))
        violations += self._released(deadline, resumed, trial.state, trial.capacity, request.batch_id,
                                     what="after the resumed rollout ended")
        trial.ok = not violations
        return violations

    def _resume_rules(self, run: _Run, worker: str, crashed: dict[str, Any]) -> list[tuple[str, str]]:
        """The resume child ran once, exactly, on the crashed rollout's desktop, seeing what it may."""
        started = run.started()
        if not started:
            return [(Rule.RECOVERY_RUNS_RESUME_CHILD, f"the recovery command for worker {worker!r} never ran the "
                                                      f"resume child (no record in {run.record_dir}); command log: "
                                                      f"{_tail(run.request.log_path)}")]
        violations = []
        if len(started) > 1:
            violations.append((Rule.RECOVERY_RUNS_RESUME_CHILD, f"the resume child ran {len(started)} times, not "
                                                                f"once"))
        record = started[0]
        if record["orig_argv"] != list(run.request.child_command):
            violations.append((Rule.RECOVERY_RUNS_RESUME_CHILD, f"the resume child ran as {record['orig_argv']!r}, "
                                                                f"not as {list(run.request.child_command)!r}"))
        exited = run.exited()
        if not exited or exited[0]["exit_code"] != RESUME_EXIT_CODE:
            violations.append((Rule.RECOVERY_RUNS_RESUME_CHILD, f"the resume child did not run to its end (exit "
                                                                f"record: {exited!r})"))
        # The same desktop: the same broker URL, or (a backend tunnelling to its workers hands
        # out a new local port per connection) a broker that names the same desktop on /health.
        desktop = (record.get("health") or {}).get("desktop")
        same_desktop = desktop is not None and desktop == (crashed.get("health") or {}).get("desktop")
        if record.get("broker_url") != crashed.get("broker_url") and not same_desktop:
            violations.append((Rule.RECOVERY_SAME_DESKTOP, f"resuming on worker {worker!r}, the resume child got the "
                                                           f"broker URL {record.get('broker_url')!r} (desktop "
                                                           f"{desktop!r}), not {crashed.get('broker_url')!r} of the "
                                                           f"worker the crashed rollout held (desktop "
                                                           f"{(crashed.get('health') or {}).get('desktop')!r})"))
        violations += self.environment_rules(record["environ"], run.request, run.command, where="resume child")
        if not (record.get("health") or {}).get("ok"):
            detail = (record.get("health") or {}).get("detail", "not checked")
            violations.append((Rule.BROKER_REACHABLE, f"the broker URL the resume child got "
                                                      f"({record.get('broker_url')!r}) did not answer /health: "
                                                      f"{detail}"))
        return violations

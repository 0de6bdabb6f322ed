"""The rollout lifecycle, one implementation for both execution modes.

``run_shared`` calls :func:`run_lifecycle` on the controller's worker thread with a child
runner that awaits the in-process pilot; the subprocess wrapper calls it with a runner that
executes the exact child command. In order:

1. resolve the evaluator (fails now, before any desktop exists, if evaluation cannot run);
2. clean up a leftover worker record of the same rollout (an earlier crashed attempt);
3. launch a sandbox; a failed launch is torn down and replaced by a fresh one, at most
   ``launch_attempts`` launches in all (no model call has happened yet);
4. run the child with the broker URL and token added to its environment; keep its code;
5. tear the sandbox down (in ``finally``: also after an exception or a signal);
6. run the evaluation, if any.

The recovery command (``wrapper recover``) runs steps 4 to 6 on a desktop a crashed
controller left running (:func:`run_adopted`): the same code runs the child, tears the
desktop down in ``finally`` and evaluates after it.

Exit codes: the child's own code; :data:`EXIT_LAUNCH_FAILED` when no launch reached the
verified handoff; :data:`EXIT_EVALUATION_UNAVAILABLE`; :data:`EXIT_CLEANUP_FAILED` when the
child succeeded but a process of the rollout survived teardown (the record is kept for
``reap_batch``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest
from autocad_bench_xvfb.evaluation import EvaluationUnavailable, Evaluator, resolve_evaluator
from autocad_bench_xvfb.health import LaunchError
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.registry import WorkerRegistry
from autocad_bench_xvfb.sandbox import (
    DEFAULT_BROKER_COMMAND,
    AdoptedSandbox,
    LocalSandbox,
    SandboxIdentity,
    TeardownReport,
    terminate_record,
)
from autocad_bench_xvfb.settings import LocalXvfbSettings

EXIT_LAUNCH_FAILED = 70
EXIT_EVALUATION_UNAVAILABLE = 71
EXIT_CLEANUP_FAILED = 72
EXIT_NOT_RECONNECTABLE = 73

ChildRunner = Callable[[Mapping[str, str]], int]
"""Runs the child with these variables added to its environment; returns its exit code."""


def identity_of(request: RolloutLaunchRequest) -> SandboxIdentity:
    """The sandbox identity (batch, rollout, attempt, broker version, template) of ``request``."""
    return SandboxIdentity(batch_id=request.batch_id, rollout_id=request.rollout_id, attempt_id=request.attempt_id,
                           broker_version=request.spec.broker_version, template=request.task_template)


def launch_sandbox(
    request: RolloutLaunchRequest,
    settings: LocalXvfbSettings,
    *,
    state_dir: Path,
    mode: Literal["shared", "subprocess"],
    log: LifecycleLog,
    broker_command: Sequence[str] = DEFAULT_BROKER_COMMAND,
    environ: Mapping[str, str] | None = None,
) -> LocalSandbox:
    """A verified sandbox for ``request`` (steps 2 and 3 above); raises :class:`LaunchError`."""
    registry = WorkerRegistry(state_dir)
    stale = registry.get(request.batch_id, request.rollout_id)
    if stale is not None:
        log.line(f"worker {stale.worker_id} of an earlier attempt of this rollout is still recorded; removing it")
        _log_report(log, stale.worker_id, terminate_record(stale, settings, registry, kill_owner=True))
    failures = []
    for attempt in range(1, settings.launch_attempts + 1):
        sandbox = LocalSandbox(settings, identity_of(request), runtime_root=settings.runtime_root(request.output_dir),
                               registry=registry, mode=mode, log=log, broker_command=broker_command,
                               environ=environ)
        try:
            sandbox.launch()
            log.line(f"worker {sandbox.worker_id} ready: display {sandbox.display}, broker pid "
                     f"{sandbox.health.pid if sandbox.health else '?'} at {sandbox.url}, launch "
                     f"{sandbox.timings['launch_s']:.2f} s (attempt {attempt} of {settings.launch_attempts})")
            return sandbox
        except (LaunchError, OSError) as error:
            failures.append(str(error))
            log.line(f"worker {sandbox.worker_id} launch attempt {attempt} of {settings.launch_attempts} "
                     f"failed: {error}")
        finally:
            if not sandbox.launched:
                _log_report(log, sandbox.worker_id, sandbox.teardown())
    raise LaunchError(f"no desktop reached the verified handoff in {settings.launch_attempts} launches: "
                      + " | ".join(failures))


def run_lifecycle(
    request: RolloutLaunchRequest,
    settings: LocalXvfbSettings,
    run_child: ChildRunner,
    *,
    state_dir: Path,
    mode: Literal["shared", "subprocess"],
    broker_command: Sequence[str] = DEFAULT_BROKER_COMMAND,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run one rollout end to end (see the module docstring); return its exit code."""
    log = LifecycleLog(request.log_path)
    try:
        evaluator = resolve_evaluator(request, environ)
    except EvaluationUnavailable as error:
        log.line(f"rollout {request.rollout_id} not started: {error}")
        return EXIT_EVALUATION_UNAVAILABLE
    try:
        sandbox = launch_sandbox(request, settings, state_dir=state_dir, mode=mode, log=log,
                                 broker_command=broker_command, environ=environ)
    except LaunchError as error:
        log.line(f"rollout {request.rollout_id} failed before handoff: {error}")
        return EXIT_LAUNCH_FAILED
    return run_on(sandbox, run_child, evaluator, log)


def run_adopted(
    sandbox: AdoptedSandbox,
    run_child: ChildRunner,
    evaluator: Evaluator | None,
    log: LifecycleLog,
) -> int:
    """Steps 4 to 6 on a desktop re-attached after a controller crash (the recovery command)."""
    log.line(f"worker {sandbox.worker_id}: re-attached to the broker at {sandbox.url} on display "
             f"{sandbox.display}; continuing the rollout")
    return run_on(sandbox, run_child, evaluator, log)


def run_on(sandbox: LocalSandbox | AdoptedSandbox, run_child: ChildRunner, evaluator: Evaluator | None,
           log: LifecycleLog) -> int:
    """Run the child on a verified desktop, tear it down (always), then evaluate."""
    assert sandbox.url is not None
    code: int | None = None
    try:
        code = run_child({BROKER_URL_ENV: sandbox.url, BROKER_TOKEN_ENV: sandbox.token})
        log.line(f"worker {sandbox.worker_id}: child exited with code {code}")
    finally:
        report = sandbox.teardown()
        _log_report(log, sandbox.worker_id, report)
    if not report.ok and code == 0:
        code = EXIT_CLEANUP_FAILED
    return with_evaluation(code, evaluator, log)


def with_evaluation(code: int, evaluator: Evaluator | None, log: LifecycleLog) -> int:
    """Run the evaluation (if any) after the desktop is gone; its failure fails a successful rollout."""
    if evaluator is not None:
        evaluation_code = evaluator(log)
        if code == 0 and evaluation_code != 0:
            code = evaluation_code
    return code


def _log_report(log: LifecycleLog, worker_id: str, report: TeardownReport) -> None:
    if report.ok:
        log.line(f"worker {worker_id} torn down: nothing of it remains")
    else:
        log.line(f"worker {worker_id} teardown FAILED (record kept for reap_batch): " + "; ".join(report.errors))

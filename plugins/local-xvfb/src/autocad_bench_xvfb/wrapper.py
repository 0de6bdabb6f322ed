"""Subprocess mode: ``python -m autocad_bench_xvfb.wrapper launch SPEC -- CHILD...``.

The controller runs this command (built by ``build_rollout_command``) with only the
variables it names. The wrapper runs the same lifecycle as shared mode
(:func:`autocad_bench_xvfb.lifecycle.run_lifecycle`) and executes ``CHILD...`` exactly,
with the controller-passed environment (minus evaluation-only credentials) plus the broker
URL and token. SIGTERM or SIGINT stop the child within a bound and still tear the desktop
down.

``recover SPEC`` is the recovery command ``autocad-bench-resume --execute`` runs for a
rollout whose controller died (see :mod:`autocad_bench_xvfb.recovery` for the verdicts):

- the rollout still runs in a live wrapper (subprocess mode): wait for that wrapper to exit,
  evaluate if it did not get to, and exit with the code its ``result.json`` implies;
- its owner is dead and its broker alive and verified with the stored token: take the
  desktop over and run the exact child command against it (the pilot continues from its
  last committed turn), then tear down and evaluate exactly as a launch does;
- otherwise remove what is left of the worker and exit with
  :data:`~autocad_bench_xvfb.lifecycle.EXIT_NOT_RECONNECTABLE`.

SPEC is JSON without secrets: the launch request, the settings, the resolved state
directory and the broker command.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.controller.summary import read_scores
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import RolloutResult
from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench.infrastructure.wrapper import child_environment, run_child_process, run_terminable
from autocad_bench_xvfb.bounds import ADOPT_POLL_S, CHILD_STOP_TIMEOUT_S, KILL_TIMEOUT_S
from autocad_bench_xvfb.evaluation import EvaluationUnavailable, resolve_evaluator
from autocad_bench_xvfb.lifecycle import (
    EXIT_EVALUATION_UNAVAILABLE,
    EXIT_NOT_RECONNECTABLE,
    run_adopted,
    run_lifecycle,
    with_evaluation,
)
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.procs import ProcessRef, kill_ref
from autocad_bench_xvfb.recovery import assess
from autocad_bench_xvfb.registry import WorkerRecord, WorkerRegistry
from autocad_bench_xvfb.sandbox import AdoptedSandbox, terminate_record
from autocad_bench_xvfb.settings import LocalXvfbSettings


class WrapperSpec(BaseModel):
    """The wrapper's single argument (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: RolloutLaunchRequest
    settings: LocalXvfbSettings
    state_dir: str
    broker_command: tuple[str, ...] = Field(min_length=1)
    worker_id: str | None = None


def launch(spec: WrapperSpec, child: Sequence[str]) -> int:
    """``launch SPEC -- CHILD...``: run the rollout's lifecycle with ``CHILD...`` as its child; returns the exit code.

    Exits with an error when ``child`` differs from the request's ``child_command``.
    """
    request = spec.request
    if tuple(child) != request.child_command:
        raise SystemExit("autocad_bench_xvfb.wrapper: the command after -- differs from the request's child_command")
    environ = dict(os.environ)
    return run_lifecycle(
        request, spec.settings,
        lambda broker: run_child_process(child, child_environment(environ, request, broker), CHILD_STOP_TIMEOUT_S),
        state_dir=Path(spec.state_dir), mode="subprocess", broker_command=spec.broker_command, environ=environ,
    )


def recover(spec: WrapperSpec) -> int:
    """``recover SPEC``: wait for, take over or remove the worker a dead controller left; returns the exit code.

    See the module docstring for the three cases; :data:`EXIT_EVALUATION_UNAVAILABLE` when the
    evaluator cannot be resolved, :data:`EXIT_NOT_RECONNECTABLE` when the desktop is gone and the
    rollout wrote no ``result.json``.
    """
    request = spec.request
    log = LifecycleLog(request.log_path)
    registry = WorkerRegistry(Path(spec.state_dir))
    environ = dict(os.environ)
    try:
        evaluator = resolve_evaluator(request, environ)
    except EvaluationUnavailable as error:
        log.line(f"rollout {request.rollout_id} not recovered: {error}")
        return EXIT_EVALUATION_UNAVAILABLE
    version = request.spec.broker_version
    while True:
        record = registry.find(spec.worker_id) if spec.worker_id else None
        if record is None:
            break
        verdict = assess(record, spec.settings, registry, version)
        if verdict.verdict == "adopt":
            log.line(f"worker {record.worker_id}: {verdict.detail}")
            _wait_for_exit(record.owner)
            log.line(f"worker {record.worker_id}: wrapper process {record.owner.pid} exited")
            continue  # its teardown removed the record, or it died too: decide again
        if verdict.verdict == "take-over" and verdict.token is not None and _result(request.output_dir) is None:
            _stop_orphans(record)
            sandbox = AdoptedSandbox(record, verdict.token, spec.settings, registry)
            return run_adopted(
                sandbox,
                lambda broker: run_child_process(request.child_command, child_environment(environ, request, broker),
                                                 CHILD_STOP_TIMEOUT_S),
                evaluator, log)
        report = terminate_record(record, spec.settings, registry, kill_owner=True)
        log.line(f"worker {record.worker_id} removed ({'clean' if report.ok else '; '.join(report.errors)})")
        if verdict.reconnectable:
            log.line(f"worker {record.worker_id}: the rollout had already written result.json; only its "
                     "teardown was missing")
        else:
            log.line(f"worker {record.worker_id} cannot be reconnected: {verdict.detail}")
        break
    result = _result(request.output_dir)
    if result is None:
        log.line(f"rollout {request.rollout_id} cannot continue on worker {spec.worker_id}: its desktop is gone "
                 "and it wrote no result.json")
        return EXIT_NOT_RECONNECTABLE
    code = 0 if result.status == "completed" else (result.exit_code or 1)
    log.line(f"rollout {request.rollout_id} finished without its controller ({result.status}); exit code {code}")
    if evaluator is not None and read_scores(request.output_dir)[0] is not None:
        evaluator = None  # the wrapper it adopted evaluated it already
    return with_evaluation(code, evaluator, log)


def _wait_for_exit(owner: ProcessRef) -> None:
    """Poll until the process exits; unbounded (the controller stops this command if it must)."""
    while owner.is_alive():
        time.sleep(ADOPT_POLL_S)


def _stop_orphans(record: WorkerRecord) -> None:
    """A dead wrapper's child (the pilot) may still run in the wrapper's group: stop it first,
    so exactly one pilot drives the desktop."""
    owner = record.owner
    if owner.role == "wrapper" and owner.pid != os.getpid() and owner.group_is_ours():
        kill_ref(owner, CHILD_STOP_TIMEOUT_S, KILL_TIMEOUT_S)


def _result(output_dir: Path) -> RolloutResult | None:
    try:
        return RolloutResult.model_validate_json(RolloutPaths(output_dir).result.read_bytes())
    except (OSError, ValueError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m autocad_bench_xvfb.wrapper``; returns the exit code (2: usage error).

    An invalid SPEC raises a validation error; SIGTERM and SIGINT stop the command within a bound.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("launch", "recover"):
        print("usage: python -m autocad_bench_xvfb.wrapper launch SPEC -- CHILD... | recover SPEC",
              file=sys.stderr)
        return 2
    spec = WrapperSpec.model_validate_json(args[1])
    return run_terminable(lambda: _dispatch(spec, args))


def _dispatch(spec: WrapperSpec, args: list[str]) -> int:
    if args[0] == "recover":
        return recover(spec)
    if len(args) < 4 or args[2] != "--":
        print("usage: python -m autocad_bench_xvfb.wrapper launch SPEC -- CHILD...", file=sys.stderr)
        return 2
    return launch(spec, args[3:])


if __name__ == "__main__":
    sys.exit(main())

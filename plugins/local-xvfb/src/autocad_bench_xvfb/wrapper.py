"""Subprocess mode: ``python -m autocad_bench_xvfb.wrapper launch SPEC -- CHILD...``.

The controller runs this command (built by ``build_rollout_command``) with only the
variables it names. The wrapper runs the same lifecycle as shared mode
(:func:`autocad_bench_xvfb.lifecycle.run_lifecycle`) and executes ``CHILD...`` exactly,
with the controller-passed environment (minus evaluation-only credentials) plus the broker
URL and token. SIGTERM or SIGINT stop the child within a bound and still tear the desktop
down. ``recover SPEC`` is the recovery command: a local desktop cannot be reconnected (see
:mod:`autocad_bench_xvfb.recovery`), so it removes the stale worker and exits with
:data:`~autocad_bench_xvfb.lifecycle.EXIT_NOT_RECONNECTABLE`.

SPEC is JSON without secrets: the launch request, the settings, the resolved state
directory and the broker command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench_xvfb.bounds import CHILD_STOP_TIMEOUT_S
from autocad_bench_xvfb.lifecycle import EXIT_NOT_RECONNECTABLE, run_lifecycle
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.registry import WorkerRegistry
from autocad_bench_xvfb.sandbox import terminate_record
from autocad_bench_xvfb.settings import LocalXvfbSettings


class WrapperSpec(BaseModel):
    """The wrapper's single argument (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: RolloutLaunchRequest
    settings: LocalXvfbSettings
    state_dir: str
    broker_command: tuple[str, ...] = Field(min_length=1)
    worker_id: str | None = None


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM/SIGINT so that every ``finally`` runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # Only the first signal interrupts; a second one must not abort the teardown it started.
    for other in (signal.SIGTERM, signal.SIGINT):
        signal.signal(other, signal.SIG_IGN)
    raise Terminated(signum)


def child_environment(environ: Mapping[str, str], request: RolloutLaunchRequest,
                      broker: Mapping[str, str]) -> dict[str, str]:
    """What the child sees: the controller-passed variables without evaluation-only ones, plus the broker."""
    evaluation_only = set(request.evaluation.environment_names) - set(request.child_environment_names)
    env = {key: value for key, value in environ.items() if key not in evaluation_only}
    env.update(broker)
    return env


def run_child_process(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run the exact child command; on an interruption stop it (SIGTERM, bounded wait, SIGKILL) and re-raise."""
    process = subprocess.Popen(list(command), env=dict(env), stdin=subprocess.DEVNULL)
    try:
        return process.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=CHILD_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise


def launch(spec: WrapperSpec, child: Sequence[str]) -> int:
    request = spec.request
    if tuple(child) != request.child_command:
        raise SystemExit("autocad_bench_xvfb.wrapper: the command after -- differs from the request's child_command")
    environ = dict(os.environ)
    return run_lifecycle(
        request, spec.settings,
        lambda broker: run_child_process(child, child_environment(environ, request, broker)),
        state_dir=Path(spec.state_dir), mode="subprocess", broker_command=spec.broker_command, environ=environ,
    )


def recover(spec: WrapperSpec) -> int:
    log = LifecycleLog(spec.request.log_path)
    registry = WorkerRegistry(Path(spec.state_dir))
    record = registry.find(spec.worker_id) if spec.worker_id else None
    if record is not None:
        report = terminate_record(record, spec.settings, registry, kill_owner=True)
        log.line(f"worker {record.worker_id} removed ({'clean' if report.ok else '; '.join(report.errors)})")
    log.line(f"worker {spec.worker_id} cannot be reconnected: a local-xvfb desktop's broker token lived only in "
             "the memory of the process that ran its lifecycle, so rollout "
             f"{spec.request.rollout_id} cannot continue exactly on it")
    return EXIT_NOT_RECONNECTABLE


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("launch", "recover"):
        print("usage: python -m autocad_bench_xvfb.wrapper launch SPEC -- CHILD... | recover SPEC",
              file=sys.stderr)
        return 2
    spec = WrapperSpec.model_validate_json(args[1])
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _raise_terminated)
    try:
        if args[0] == "recover":
            return recover(spec)
        if len(args) < 4 or args[2] != "--":
            print("usage: python -m autocad_bench_xvfb.wrapper launch SPEC -- CHILD...", file=sys.stderr)
            return 2
        return launch(spec, args[3:])
    except Terminated as stop:
        return 128 + stop.signum


if __name__ == "__main__":
    sys.exit(main())

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

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench.infrastructure.wrapper import child_environment, run_child_process, run_terminable
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


def launch(spec: WrapperSpec, child: Sequence[str]) -> int:
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

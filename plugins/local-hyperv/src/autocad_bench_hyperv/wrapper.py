"""Subprocess mode: ``python -m autocad_bench_hyperv.wrapper launch SPEC -- CHILD...``.

The controller runs this command (built by ``build_rollout_command``) with only the
variables it names. The wrapper runs the same lifecycle as shared mode
(:func:`autocad_bench_hyperv.lifecycle.run_lifecycle`) and executes ``CHILD...`` exactly, with
the controller-passed environment minus the backend's and the evaluation's credentials, plus
the broker URL and token. SIGTERM or SIGINT stop the child within a bound and still return
the VM clean. ``recover SPEC -- RESUME...`` reconnects to the worker named in SPEC.

SPEC is JSON without secrets: the launch request and, for recovery, the worker id.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench.infrastructure.wrapper import child_environment as passed_environment
from autocad_bench.infrastructure.wrapper import run_child_process, run_terminable
from autocad_bench_hyperv.bounds import CHILD_STOP_S, scaled
from autocad_bench_hyperv.lifecycle import run_lifecycle
from autocad_bench_hyperv.pool import Pool
from autocad_bench_hyperv.runner import SECRET_ENV_PREFIX, default_runner
from autocad_bench_hyperv.settings import HyperVSettings, hyperv_settings


class WrapperSpec(BaseModel):
    """The wrapper's single argument (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: RolloutLaunchRequest
    worker_id: str | None = None


def child_environment(environ: Mapping[str, str], request: RolloutLaunchRequest, settings: HyperVSettings,
                      broker: Mapping[str, str]) -> dict[str, str]:
    """What the child sees: the passed variables without backend/evaluation-only credentials, plus the broker."""
    return passed_environment(environ, request, broker, backend_names=settings.environment_names(),
                              secret_prefix=SECRET_ENV_PREFIX)


def run(spec: WrapperSpec, child: Sequence[str]) -> int:
    """Run the lifecycle for ``spec`` in subprocess mode with ``child`` as the child command;
    returns the lifecycle's exit code.
    """
    request = spec.request
    settings = hyperv_settings(request.spec)
    environ = dict(os.environ)
    pool = Pool(settings, lambda host: default_runner(host, environ))
    return run_lifecycle(
        request, settings,
        lambda broker: run_child_process(child, child_environment(environ, request, settings, broker),
                                         scaled(CHILD_STOP_S)),
        pool=pool, environ=environ, mode="subprocess", worker_id=spec.worker_id)


def main(argv: Sequence[str] | None = None) -> int:
    """The wrapper's command line: 2 on a usage error, a launch whose ``CHILD`` differs from the
    request's ``child_command``, or a recover without a worker id; ``128 + signum`` when
    stopped by a signal. An invalid ``SPEC`` raises pydantic's ``ValidationError``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] not in ("launch", "recover") or args[2] != "--":
        print("usage: python -m autocad_bench_hyperv.wrapper launch|recover SPEC -- CHILD...", file=sys.stderr)
        return 2
    spec = WrapperSpec.model_validate_json(args[1])
    child = args[3:]
    if args[0] == "launch" and tuple(child) != spec.request.child_command:
        print("autocad_bench_hyperv.wrapper: the command after -- differs from the request's child_command",
              file=sys.stderr)
        return 2
    if args[0] == "recover" and spec.worker_id is None:
        print("autocad_bench_hyperv.wrapper: recover needs a worker_id", file=sys.stderr)
        return 2
    return run_terminable(lambda: run(spec, child))


if __name__ == "__main__":
    sys.exit(main())

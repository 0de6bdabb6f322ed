"""Subprocess-mode lifecycle: ``python -m autocad_bench_aws.wrapper launch|recover SPEC -- CHILD...``.

``SPEC`` is a :class:`WrapperSpec` JSON (no secrets: credentials arrive by name in the
environment). The wrapper runs :func:`autocad_bench_aws.lifecycle.run_lifecycle`, the same code
``run_shared`` runs, with a child runner that executes the exact child command with only the
base variables, the assignment's credential names and the broker URL/token: AWS credentials
and the vision-judge key stay with the wrapper. SIGTERM cancels the lifecycle, so the child is
stopped and termination is still requested.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench_aws.bounds import CHILD_STOP_S
from autocad_bench_aws.calls import AwsSession
from autocad_bench_aws.fleet import FleetPoller, fleet_dir
from autocad_bench_aws.lifecycle import run_lifecycle
from autocad_bench_aws.settings import aws_settings


class WrapperSpec(BaseModel):
    """The wrapper's ``SPEC`` argument: the launch request and, to recover, the worker to
    reconnect to (no secrets).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: RolloutLaunchRequest
    worker_id: str | None = None


async def _main(spec: WrapperSpec, child: list[str]) -> int:
    request = spec.request
    settings = aws_settings(request.spec)
    session = AwsSession(settings.aws_region, settings.aws_profile)
    fleet = FleetPoller(fleet_dir(request.batch_id), session)
    from autocad_bench.controller.children import child_environment

    async def run(extra: Mapping[str, str]) -> int:
        env = child_environment(request.child_environment_names, os.environ, extra)
        process = await asyncio.create_subprocess_exec(*child, env=env, stdin=asyncio.subprocess.DEVNULL)
        try:
            return await process.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), CHILD_STOP_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
            raise

    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, task.cancel)
    return await run_lifecycle(request, settings, run, session=session, fleet=fleet, environ=os.environ,
                               mode="subprocess", worker_id=spec.worker_id)


def main(argv: list[str] | None = None) -> int:
    """Run the lifecycle for ``launch|recover SPEC -- CHILD...`` and return its exit code: 2 on a
    usage error, 143 when cancelled. An invalid ``SPEC`` raises pydantic's ``ValidationError``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("launch", "recover") or "--" not in args:
        print("usage: python -m autocad_bench_aws.wrapper launch|recover SPEC -- CHILD...", file=sys.stderr)
        return 2
    split = args.index("--")
    spec = WrapperSpec.model_validate_json(args[1])
    child = args[split + 1:]
    if not child:
        print("no child command after --", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(spec, child))
    except asyncio.CancelledError:
        return 143


if __name__ == "__main__":
    sys.exit(main())

"""The child harness as the controller launches it, in subprocess and shared mode."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from autocad_bench.controller.loops import SharedLoops
from autocad_bench.harness.pilot import run_pilot
from autocad_bench.infrastructure.models import RolloutCommand
from autocad_bench.interrupt import StopRequest
from autocad_bench.plugins import PluginHost

# Non-secret variables every child gets so it can find Python, its packages and a locale.
BASE_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
                    "SYSTEMROOT", "AUTOCAD_BENCH_PRICING_JSON", "AUTOCAD_BENCH_LOAD_PLUGINS",
                    "AUTOCAD_BENCH_TRACE_PLUGINS")


def child_command(rollout_dir: Path) -> tuple[str, ...]:
    """The infrastructure-neutral harness command for one rollout directory."""
    return (sys.executable, "-m", "autocad_bench.harness", str(rollout_dir))


def child_environment(names: tuple[str, ...], environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """Only the base variables, the named ones (credentials) and the backend's additions."""
    env = {name: environ[name] for name in BASE_ENVIRONMENT if name in environ}
    env.update({name: environ[name] for name in names if name in environ})
    env.update(extra)
    return env


class InProcessChild:
    """The shared-mode child: runs the pilot coroutine on the caller's event loop, or on one
    of the batch's shared loops when they are asked for (:mod:`autocad_bench.controller.loops`).

    The pilot sees exactly what a subprocess child would see in its environment: the base
    variables, the credential names of its assignment and what the backend adds.
    """

    def __init__(self, rollout_dir: Path, names: tuple[str, ...], environ: Mapping[str, str],
                 host: PluginHost, *, stop: StopRequest | None = None, loops: SharedLoops | None = None) -> None:
        self._rollout_dir = rollout_dir
        self._loops = loops
        self._stop = stop
        self._names = names
        self._environ = environ
        self._host = host

    async def run(self, environ: Mapping[str, str]) -> int:
        env = child_environment(self._names, self._environ, environ)
        pilot = run_pilot(self._rollout_dir, env, host=self._host, stop=self._stop)
        if self._loops is None:
            return await pilot
        # The pilot runs on one of the batch's shared loops; this (the backend's) loop waits.
        return await self._loops.run(pilot)


GROUP_DRAIN_S = 15.0
"""After an operator's stop, how long the rest of a finished command's process group (a
pilot still finishing its turn) may take before it is killed."""


def _drain_group(pgid: int, stop: StopRequest | None) -> None:
    """Leave nothing of the command's process group behind once the command has exited.

    A lifecycle command that exits while members of its group still run (its wrapper died
    on the forwarded stop, the pilot is still saving) must not leave them to write into the
    rollout later: they get a bounded wait after a stop, then SIGKILL; without a stop they
    are leaks and are killed at once.
    """
    deadline = time.monotonic() + (GROUP_DRAIN_S if stop is not None and stop.is_set() else 0.0)
    while True:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if time.monotonic() >= deadline or (stop is not None and stop.immediate):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            return
        time.sleep(0.1)


def run_subprocess(command: RolloutCommand, environ: Mapping[str, str], log_path: Path, *,
                   stop: StopRequest | None = None) -> int:
    """Run a backend's lifecycle command with only the named variables; log to ``log_path``.

    The command runs in its own session (a terminal's Ctrl-C does not reach it); ``stop``
    forwards the controller's stop to its process group instead (SIGTERM, then SIGKILL).
    """
    env = child_environment(command.environment_names, environ, command.environment)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            list(command.argv), env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=command.cwd, start_new_session=True,
        )
        if stop is not None:
            stop.register_group(process.pid)
        try:
            code = process.wait()
            _drain_group(process.pid, stop)
            return code
        except BaseException:
            # Interrupted controller: stop the rollout's whole process group, then re-raise.
            try:
                os.killpg(process.pid, 15)
                process.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
            raise
        finally:
            if stop is not None:
                stop.unregister_group(process.pid)

"""Plumbing of a backend's subprocess-mode wrapper (``python -m <backend>.wrapper ...``).

In subprocess mode the controller runs the backend's wrapper, which runs the backend's
lifecycle synchronously and, inside it, the exact child command. The pieces here are the
same for every such wrapper: SIGTERM and SIGINT become an exception in the main thread (so
every ``finally`` of the lifecycle runs and the worker is still returned or torn down), the
child is stopped within a bound when that happens, and the child's environment is the
controller-passed one minus what only the backend or the evaluation may see, plus the broker.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import FrameType

from autocad_bench.infrastructure.models import RolloutLaunchRequest


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM/SIGINT so that every ``finally`` runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # Only the first signal interrupts; a second one must not abort the cleanup it started.
    for other in (signal.SIGTERM, signal.SIGINT):
        signal.signal(other, signal.SIG_IGN)
    raise Terminated(signum)


def run_terminable(body: Callable[[], int]) -> int:
    """Run ``body`` with SIGTERM/SIGINT raising :class:`Terminated`; a signal exits ``128 + signum``."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _raise_terminated)
    try:
        return body()
    except Terminated as stop:
        return 128 + stop.signum


def child_environment(environ: Mapping[str, str], request: RolloutLaunchRequest, broker: Mapping[str, str], *,
                      backend_names: Iterable[str] = (), secret_prefix: str | None = None) -> dict[str, str]:
    """What the child sees: the passed variables without backend/evaluation-only ones, plus the broker.

    ``backend_names`` are the backend's own credential variables and ``secret_prefix`` marks
    more of them; a name the request passes to the child explicitly is never hidden.
    """
    hidden = (set(backend_names) | set(request.evaluation.environment_names)) - set(request.child_environment_names)
    env = {key: value for key, value in environ.items()
           if key not in hidden and not (secret_prefix is not None and key.startswith(secret_prefix))}
    env.update(broker)
    return env


def run_child_process(command: Sequence[str], env: Mapping[str, str], stop_timeout_s: float) -> int:
    """Run the exact child command; on an interruption stop it (SIGTERM, bounded wait, SIGKILL) and re-raise."""
    process = subprocess.Popen(list(command), env=dict(env), stdin=subprocess.DEVNULL)
    try:
        return process.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=stop_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise

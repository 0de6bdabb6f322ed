"""The LibreCAD desktop of the suite validity proof: where the broker and the evaluator meet.

:mod:`autocad_bench_evaluator.suite.validity` schedules the proof (every LibreCAD task: the
reference solution must score 1.0, a ``done``-only replay 0, the perturbed solution strictly
between) over worker processes, but owns no desktop: the evaluator does not depend on the
broker. This module gives it one. :class:`LibreCADRig` is a private Xvfb display with the
broker's capture, its real input driver (``apply_action`` per action, then the broker's
post-batch settle) and its LibreCAD adapter (a fresh copy of the template per run, saved
through the adapter's trusted save).

Needs the evaluator (``pip install "autocad-bench[evaluator]"``), Xvfb, xdotool and LibreCAD::

    python -m autocad_bench_xvfb.suite_validity --help
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from autocad_bench_evaluator.suite import registry
from autocad_bench_evaluator.suite.validity import (
    WORKER_MARKER,
    RunResult,
    Variant,
    parse_batches,
    score_attempt,
    variant_jsonl,
)
from autocad_bench_evaluator.suite.validity import main as validity_main

from autocad_bench.actions import ACTION_ADAPTER
from autocad_bench_broker.apps.librecad import LibreCADAdapter, LibreCADConfig
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.drivers.capture import MssCapture, StabilityPolicy, stable_frame
from autocad_bench_broker.drivers.dispatch import apply_action
from autocad_bench_broker.drivers.input import PyAutoGUIDriver
from autocad_bench_broker.idle import wait_until_idle
from autocad_bench_broker.procgroup import find_processes, kill_process_group, process_environ

__all__ = ["LibreCADRig", "kill_leftovers", "librecad_rig", "main"]


class LibreCADRig:
    """A private Xvfb display with capture, real input and a LibreCAD adapter, reused per run."""

    def __init__(self, workdir: Path, *, width: int = 1920, height: int = 1080) -> None:

        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.display: XvfbDisplay = XvfbDisplay(width, height, log_path=self.workdir / "xvfb.log")
        name = self.display.start()
        try:
            self.capture: MssCapture = MssCapture(name)
            self.driver: PyAutoGUIDriver = PyAutoGUIDriver(name)
            # The drawing is checkpointed before every restart, so a quick SIGKILL is harmless.
            config = LibreCADConfig(term_timeout_s=0.3)
            self.adapter: LibreCADAdapter = LibreCADAdapter(
                name, self.workdir / "librecad", self.capture, config=config
            )
        except BaseException:
            self.display.stop()
            raise
        self.settle = StabilityPolicy(window_s=1.5, interval_s=0.1, settle_s=0.1)

    def pause(self, seconds: float) -> None:
        """A solution's ``wait``: at least ``seconds``, then until LibreCAD and Xvfb are idle.

        The solutions' fixed pauses were measured on an idle machine; under load a dialog may
        not be up (and typing lands elsewhere) when they end. Idle means both processes are
        sleeping and used no CPU over a short window; the extra wait is bounded by
        :data:`autocad_bench_broker.idle.IDLE_LIMIT_S` (then the replay goes on, as an agent's would).
        """
        time.sleep(seconds)
        wait_until_idle([pid for pid in (self.adapter.pid, self.display.pid) if pid is not None])

    @property
    def display_name(self) -> str:
        return self.display.name

    @staticmethod
    def kill_leftovers(marker: str, display: str | None) -> list[int]:
        """What the scheduler calls for a worker that died: see :func:`kill_leftovers`."""
        return kill_leftovers(marker, display)

    def close(self) -> None:
        try:
            self.adapter.kill()
            self.adapter.close()
            self.driver.close()
            self.capture.close()
        finally:
            self.display.stop()

    def run(
        self, task: registry.SuiteTask, variant: Variant, attempt: Path, frame_path: Path | None = None
    ) -> RunResult:
        """Launch on a fresh template copy, replay, checkpoint, score; never raises for a bad run.

        ``frame_path`` receives the settled screen after the last batch (PNG).
        """

        started = time.monotonic()
        batches = parse_batches(variant_jsonl(task, variant))
        count = sum(len(batch) for batch in batches)

        def failed(error: str, launch_s: float = 0.0, replay_s: float = 0.0) -> RunResult:
            return RunResult(
                task.task_id,
                variant,
                None,
                len(batches),
                count,
                launch_s,
                replay_s,
                round(time.monotonic() - started, 3),
                error,
            )

        try:
            self.adapter.launch(task.template_path, attempt)
        except Exception as error:  # launch errors are reported per run
            return failed(f"launch: {error}")
        ready = self.adapter.verify_ready()
        launch_s = round(time.monotonic() - started, 3)
        if not ready.ok:
            return failed(f"not ready: {list(ready.evidence.failures)}", launch_s)
        replay_started = time.monotonic()
        frame = ready.frame
        try:
            for batch in batches:
                for raw in batch:
                    apply_action(self.driver, ACTION_ADAPTER.validate_python(raw), sleep=self.pause)
                frame, _ = stable_frame(self.capture, self.settle)
        except Exception as error:  # e.g. the X server went away under the driver
            return failed(f"replay: {type(error).__name__}: {error}", launch_s)
        if frame_path is not None and frame is not None:
            frame_path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_image().save(frame_path)
        replay_s = round(time.monotonic() - replay_started, 3)
        checkpoint = self.adapter.checkpoint()
        if not checkpoint.ok:
            return failed(f"checkpoint: {checkpoint.error}", launch_s, replay_s)
        try:
            report = score_attempt(task, attempt)
        except Exception as error:
            return failed(f"score: {error}", launch_s, replay_s)
        return RunResult(
            task.task_id, variant, report, len(batches), count, launch_s, replay_s, round(time.monotonic() - started, 3)
        )




@contextmanager
def librecad_rig(workdir: Path | None = None) -> Iterator[LibreCADRig]:
    """A :class:`LibreCADRig` in ``workdir`` (a temporary directory by default), closed on exit."""
    temporary = workdir is None
    root = Path(tempfile.mkdtemp(prefix="autocad-bench-validity-")) if workdir is None else Path(workdir)
    rig = LibreCADRig(root)
    try:
        yield rig
    finally:
        rig.close()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)




def _marked_pids(marker: str) -> list[int]:
    """Processes whose initial environment carries ``WORKER_MARKER=marker``."""

    found = []
    for entry in Path("/proc").iterdir():
        pid = int(entry.name) if entry.name.isdigit() else None
        if pid is not None and pid != os.getpid() and process_environ(pid).get(WORKER_MARKER) == marker:
            found.append(pid)
    return found


def kill_leftovers(marker: str, display: str | None) -> list[int]:
    """Kill the process groups a dead worker left behind: its Xvfb and LibreCAD on its display.

    Returns the group ids that were signalled. Only processes started by that worker are
    touched: the Xvfb carries the worker's marker and LibreCAD runs on its private display.
    """

    pids = set(_marked_pids(marker))
    if display is not None:
        pids.update(find_processes("librecad", {"DISPLAY": display}))
    groups: set[int] = set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgid(0))  # never our own group
    for pgid in sorted(groups):
        kill_process_group(pgid, term_timeout_s=1.0, kill_timeout_s=3.0)
    return sorted(groups)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m autocad_bench_xvfb.suite_validity``: the validity command on LibreCAD desktops."""
    return validity_main(argv, rig_factory=LibreCADRig)


if __name__ == "__main__":
    sys.exit(main())

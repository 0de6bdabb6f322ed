"""Prove the LibreCAD tasks solvable on a real desktop, and that scoring separates good from bad.

For each task and *variant* a desktop (a *rig*) starts the CAD application on a fresh copy of
the template, replays the variant's action batches, saves the drawing through the
application's trusted save, and this module scores it against the gold with the evaluator's
deterministic scoring:

* ``oracle``: ``solution.librecad.jsonl``, must score 1.0 and pass;
* ``noop``: a single ``done`` batch, must score 0;
* ``perturbed``: ``solution.perturbed.jsonl`` (one deliberate mistake), must score strictly
  between 0 and 1.

:func:`run_validity` spreads the runs over ``workers`` independent desktops: every worker is a
separate process (``spawn`` context) that owns one rig, built by the ``rig_factory`` it is
given, and reuses it for all its runs. The parent hands out one run at a time and returns
the results in task order, then variant order, whatever order they finish in. A worker that
dies (or overruns ``run_timeout_s``) costs only the run it had in hand, which is reported with
an ``error``; the parent asks the factory to kill whatever the dead worker left behind
(``rig_factory.kill_leftovers``) and starts a replacement if the worker had completed a run
before.

The evaluator does not drive desktops and does not depend on the broker: the LibreCAD rig
lives where the broker and the evaluator meet, in the ``local-xvfb`` backend
(:mod:`autocad_bench_xvfb.suite_validity`); run ``python -m autocad_bench_xvfb.suite_validity
--help``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
from autocad_bench_evaluator.scoring import ScoreReport, score_drawing
from autocad_bench_evaluator.suite import registry
from autocad_bench_evaluator.suite.librecad import noop_jsonl

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

Variant = Literal["oracle", "noop", "perturbed"]
VARIANTS: tuple[Variant, ...] = ("oracle", "noop", "perturbed")
EVALUATOR_VERSION = "suite-validity"
DEFAULT_WORKERS = max(1, min(4, os.cpu_count() or 1))
DEFAULT_RUN_TIMEOUT_S = 300.0
"""A run (launch, replay, checkpoint, score) still going after this long is abandoned."""
RIG_STARTUP_TIMEOUT_S = 120.0
DOCS_PATH = Path(__file__).resolve().parents[4] / "docs" / "tasks.md"
"""``docs/tasks.md`` of the source checkout (``--update-docs`` rewrites its validity table)."""
TABLE_START = "<!-- validity-table:start -->"
TABLE_END = "<!-- validity-table:end -->"
WORKER_MARKER = "AUTOCAD_BENCH_VALIDITY_WORKER"
"""Environment variable set in each worker (inherited by its Xvfb) to find leftovers."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """One replay: the score report (None when no drawing could be scored) and timings."""

    task_id: str
    variant: Variant
    report: ScoreReport | None
    batches: int
    actions: int
    launch_s: float
    replay_s: float
    total_s: float
    error: str | None = None

    @property
    def score(self) -> float | None:
        return self.report.score if self.report is not None else None

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed

    @property
    def expected(self) -> bool:
        """Whether the outcome is what the variant must produce."""
        score = self.score
        if score is None:
            return False
        if self.variant == "oracle":
            return score == 1.0 and self.passed
        if self.variant == "noop":
            return score == 0.0 and not self.passed
        return 0.0 < score < 1.0


def variant_jsonl(task: registry.SuiteTask, variant: Variant) -> str:
    """The solution text (one batch per line) that ``variant`` replays for ``task``.

    Raises :class:`~.registry.SuiteError` for a task without LibreCAD solutions, ``OSError`` for an unreadable file.
    """
    if variant == "noop":
        return noop_jsonl()
    path = task.solution_path("librecad") if variant == "oracle" else task.perturbed_path
    if path is None:
        raise registry.SuiteError(f"{task.task_id} has no LibreCAD solution")
    return path.read_text()


def parse_batches(text: str) -> list[list[object]]:
    """The action lists of a solution file (one ``{"actions": [...]}`` per non-empty line)."""
    batches: list[list[object]] = []
    for line in text.splitlines():
        if line.strip():
            batches.append(list(json.loads(line)["actions"]))
    return batches


# -- task metadata -------------------------------------------------------------------------------


def family_of(task_id: str) -> str:
    """The family of a task instance (the task id itself while definitions have no ``family``)."""
    return str(getattr(registry.definition(task_id), "family", task_id))


def skill_of(task_id: str) -> str:
    """The skill a task exercises (its tier while definitions have no ``skill``)."""
    definition = registry.definition(task_id)
    return str(getattr(definition, "skill", definition.tier))


def per_family(task_ids: Sequence[str]) -> list[str]:
    """The first instance of each family, in the order of ``task_ids``."""
    seen: set[str] = set()
    chosen: list[str] = []
    for task_id in task_ids:
        family = family_of(task_id)
        if family not in seen:
            seen.add(family)
            chosen.append(task_id)
    return chosen


# -- one desktop ---------------------------------------------------------------------------------


def score_attempt(task: registry.SuiteTask, attempt: Path) -> ScoreReport:
    """The evaluator's score of the drawing at ``attempt`` against the task's gold."""
    spec = task.scoring
    with tempfile.TemporaryDirectory(prefix="autocad-bench-gold-") as tmp:
        gold = read_drawing(registry.generate_gold(task.task_id, Path(tmp)), spec.schema_version)
    if not isinstance(gold, DrawingMetadata):
        raise RuntimeError(f"the gold of {task.task_id} is invalid: {gold.reason}")
    candidate = read_drawing(attempt, spec.schema_version)
    if not isinstance(candidate, DrawingMetadata):
        raise RuntimeError(f"the attempt of {task.task_id} is invalid: {candidate.reason}")
    return score_drawing(gold, candidate, spec, EVALUATOR_VERSION)


# -- parallel desktops ---------------------------------------------------------------------------


class Rig(Protocol):
    """What a worker needs of a desktop (``autocad_bench_xvfb.suite_validity.LibreCADRig``;
    tests substitute fakes)."""

    workdir: Path

    @property
    def display_name(self) -> str: ...

    def run(
        self, task: registry.SuiteTask, variant: Variant, attempt: Path, frame_path: Path | None = None
    ) -> RunResult: ...

    def close(self) -> None: ...


RigFactory = Callable[[Path], Rig]
"""Builds a worker's rig from its directory; must be picklable (a class or module function).
It may also offer ``kill_leftovers(marker, display) -> list[int]``, called for a worker that
died, to stop the processes it left behind."""


def _run_one(rig: Rig, task_id: str, variant: Variant, keep: Path | None) -> RunResult:
    started = time.monotonic()
    try:
        task = registry.load(task_id)
    except Exception as error:
        return RunResult(task_id, variant, None, 0, 0, 0.0, 0.0, round(time.monotonic() - started, 3), f"load: {error}")
    attempt = rig.workdir / "attempts" / task_id / variant / "attempt.dxf"
    frame = keep / task_id / f"{variant}.png" if keep is not None else None
    result = rig.run(task, variant, attempt, frame)
    if keep is not None and attempt.is_file():
        target = keep / task_id / f"{variant}.dxf"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(attempt, target)
    return result


def _worker_main(conn: Connection, workdir: str, keep: str | None, marker: str, rig_factory: RigFactory) -> None:
    """One worker process: build a rig, then run whatever the parent sends until ``None``."""

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)  # so that the rig is closed on terminate()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl+C stops
    os.environ[WORKER_MARKER] = marker  # inherited by Xvfb: the parent finds it if we die
    try:
        rig = rig_factory(Path(workdir))
    except BaseException as error:
        with contextlib.suppress(OSError):
            conn.send(("failed", f"{type(error).__name__}: {error}"))
        return
    try:
        conn.send(("ready", rig.display_name))
        while True:
            try:
                item = conn.recv()
            except EOFError:  # the parent is gone
                break
            if item is None:
                break
            position, task_id, variant = item
            conn.send(("result", position, _run_one(rig, task_id, variant, Path(keep) if keep else None)))
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        rig.close()


@dataclass(slots=True)
class _Worker:
    index: int
    process: BaseProcess
    conn: Connection
    marker: str
    workdir: Path
    display: str | None = None
    position: int | None = None  # the run in hand
    deadline: float = 0.0
    completed: int = 0
    finishing: bool = False  # sent None: exits once idle
    closed: bool = False
    failure: str | None = None


@dataclass(slots=True)
class _Scheduler:
    items: list[tuple[str, Variant]]
    root: Path
    keep: Path | None
    count: int
    run_timeout_s: float
    rig_factory: RigFactory
    progress: bool
    context: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))
    results: list[RunResult | None] = field(default_factory=list)
    pending: deque[int] = field(default_factory=deque)
    workers: list[_Worker] = field(default_factory=list)
    started: int = 0
    rig_failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.results = [None] * len(self.items)
        self.pending = deque(range(len(self.items)))

    def start(self, index: int) -> None:
        self.started += 1
        workdir = self.root / f"worker-{index}-{self.started}"
        marker = f"{os.getpid()}-{index}-{uuid.uuid4().hex[:12]}"
        parent_conn, child_conn = self.context.Pipe()
        process = self.context.Process(
            target=_worker_main,
            args=(child_conn, str(workdir), str(self.keep) if self.keep else None, marker, self.rig_factory),
            name=f"validity-worker-{index}",
            daemon=True,
        )
        process.start()
        child_conn.close()
        worker = _Worker(
            index, process, parent_conn, marker, workdir, deadline=time.monotonic() + RIG_STARTUP_TIMEOUT_S
        )
        self.workers.append(worker)

    def live(self) -> list[_Worker]:
        return [w for w in self.workers if not w.closed]

    def dispatch(self, worker: _Worker) -> None:
        if not self.pending:
            worker.position = None
            worker.finishing = True
            worker.deadline = time.monotonic() + 60.0
            with contextlib.suppress(OSError):
                worker.conn.send(None)
            return
        position = self.pending.popleft()
        task_id, variant = self.items[position]
        try:
            worker.conn.send((position, task_id, variant))
        except OSError:
            self.pending.appendleft(position)  # never reached the worker
            self.retire(worker, "its pipe broke")
            return
        worker.position = position
        worker.deadline = time.monotonic() + self.run_timeout_s

    def lost(self, position: int, error: str) -> RunResult:
        task_id, variant = self.items[position]
        batches: list[list[object]] = []
        with contextlib.suppress(Exception):
            batches = parse_batches(variant_jsonl(registry.load(task_id), variant))
        return RunResult(task_id, variant, None, len(batches), sum(len(b) for b in batches), 0.0, 0.0, 0.0, error)

    def record(self, position: int, result: RunResult, worker: _Worker) -> None:
        self.results[position] = result
        if self.progress:
            done = sum(r is not None for r in self.results)
            print(f"[{done}/{len(self.items)} w{worker.index}] {describe(result)}", file=sys.stderr, flush=True)

    def receive(self, worker: _Worker) -> bool:
        """Handle one message; False when the pipe is closed (the worker exited or died)."""
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            return False
        kind = message[0]
        if kind == "ready":
            worker.display = message[1]
            self.dispatch(worker)
        elif kind == "failed":
            worker.failure = message[1]
            self.rig_failures.append(f"worker {worker.index}: {message[1]}")
        elif kind == "result":
            _, position, result = message
            if position == worker.position:
                worker.position = None
                worker.completed += 1
                self.record(position, result, worker)
                self.dispatch(worker)
        return True

    def retire(self, worker: _Worker, why: str | None = None) -> None:
        """Reap a worker that exited (or kill it), clean up after it, maybe start a replacement."""
        if worker.closed:
            return
        worker.closed = True
        process = worker.process
        process.join(timeout=10.0 if worker.finishing and why is None else 0.5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5.0)
        clean_exit = worker.finishing and why is None and process.exitcode == 0
        if worker.display is None and worker.failure is None:
            self.rig_failures.append(
                f"worker {worker.index} {why or f'exited with code {process.exitcode}'} before its rig was ready"
            )
        if not clean_exit:
            self.kill_leftovers(worker)
        worker.conn.close()
        if worker.position is not None:
            position, worker.position = worker.position, None
            reason = why or f"died with exit code {process.exitcode}"
            self.record(position, self.lost(position, f"worker {worker.index} {reason} during this run"), worker)
        if not clean_exit and worker.completed > 0 and self.pending:
            # It had worked: the crash is about one run, so the desktop count is kept up.
            self.start(worker.index)

    def loop(self) -> None:
        for index in range(self.count):
            self.start(index)
        while live := self.live():
            handles: list[Any] = [w.conn for w in live] + [w.process.sentinel for w in live]
            timeout = min(w.deadline for w in live) - time.monotonic()
            ready = set(wait(handles, timeout=min(max(timeout, 0.0), 5.0)))
            for worker in live:
                alive = True
                if worker.conn in ready:
                    alive = self.receive(worker)
                if worker.process.sentinel in ready or not alive:
                    while alive and worker.conn.poll():  # a result sent just before exiting
                        alive = self.receive(worker)
                    self.retire(worker)
                elif time.monotonic() > worker.deadline:
                    if worker.finishing:
                        what = "did not exit after its last run"
                    elif worker.display is None and worker.failure is None:
                        what = f"did not start its rig within {RIG_STARTUP_TIMEOUT_S:.0f} s"
                    else:
                        what = f"overran the run timeout ({self.run_timeout_s:.0f} s)"
                    worker.process.kill()
                    self.retire(worker, what)

    def shutdown(self) -> None:
        """Stop every worker still running (after an interrupt or an error in the parent)."""
        for worker in self.live():
            if worker.position is None:
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
            else:
                worker.process.terminate()
        for worker in self.live():
            worker.process.join(timeout=10.0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=5.0)
            worker.closed = True
            with contextlib.suppress(OSError):
                worker.conn.close()
            if worker.process.exitcode != 0:
                self.kill_leftovers(worker)

    def kill_leftovers(self, worker: _Worker) -> None:
        killer = getattr(self.rig_factory, "kill_leftovers", None)
        if killer is not None:
            killer(worker.marker, worker.display)

    def finish(self) -> list[RunResult]:
        reason = "no worker was left to run it"
        if self.rig_failures:
            reason += f" (rig failures: {'; '.join(self.rig_failures)})"
        return [
            result if result is not None else self.lost(position, reason)
            for position, result in enumerate(self.results)
        ]


def run_validity(
    task_ids: Sequence[str],
    variants: Sequence[Variant] = VARIANTS,
    *,
    workers: int | None = None,
    workdir: Path | None = None,
    keep: Path | None = None,
    progress: bool = False,
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S,
    rig_factory: RigFactory,
) -> list[RunResult]:
    """Replay every (task, variant) on ``workers`` parallel desktops (default :data:`DEFAULT_WORKERS`).

    Results come back in task order, then variant order. A run that a worker could not finish
    (the worker died, overran ``run_timeout_s`` or no worker could start) has ``report=None``
    and an ``error``; nothing is raised for it. ``keep`` stores each attempt drawing and final
    screen there; ``workdir`` holds the workers' rigs (a temporary directory by default).
    ``rig_factory`` builds a worker's desktop from its directory and must be picklable.
    """
    items = [(task_id, variant) for task_id in task_ids for variant in variants]
    if not items:
        return []
    count = max(1, min(DEFAULT_WORKERS if workers is None else workers, len(items)))
    temporary = workdir is None
    root = Path(tempfile.mkdtemp(prefix="autocad-bench-validity-")) if workdir is None else Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    scheduler = _Scheduler(items, root, keep, count, run_timeout_s, rig_factory, progress)
    try:
        scheduler.loop()
    finally:
        scheduler.shutdown()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    return scheduler.finish()


# -- reporting -----------------------------------------------------------------------------------


def describe(result: RunResult) -> str:
    """One progress line for ``result``: score, pass flag, whether the outcome was expected, batches and timings."""
    score = "-" if result.score is None else f"{result.score:.3f}"
    verdict = "ok" if result.expected else "UNEXPECTED"
    extra = f" error={result.error}" if result.error else ""
    return (
        f"{result.task_id:28s} {result.variant:9s} score={score:>6s} passed={result.passed!s:5s} "
        f"{verdict:10s} batches={result.batches:3d} launch={result.launch_s:.1f}s replay={result.replay_s:.1f}s "
        f"total={result.total_s:.1f}s{extra}"
    )


def _cell(result: RunResult | None) -> str:
    if result is None:
        return "n/a"
    if result.score is None:
        return f"error: {(result.error or '').replace('|', '/')}"
    mark = "pass" if result.passed else "fail"
    flag = "" if result.expected else " **UNEXPECTED**"
    return f"{result.score:.3f} ({mark}){flag}"


TABLE_HEADER = (
    "task",
    "family",
    "skill",
    "tier",
    "oracle",
    "no-op",
    "perturbed",
    "perturbation",
    "oracle batches",
    "oracle replay",
)
VARIANT_COLUMNS = ("oracle", "no-op", "perturbed")


def markdown_table(results: Sequence[RunResult]) -> str:
    """The validity table: one row per task instance, one column per variant, plus replay time."""
    by_task: dict[str, dict[str, RunResult]] = {}
    for result in results:
        by_task.setdefault(result.task_id, {})[result.variant] = result
    lines = ["| " + " | ".join(TABLE_HEADER) + " |", "|" + "---|" * len(TABLE_HEADER)]
    for task_id, runs in by_task.items():
        definition = registry.definition(task_id)
        oracle = runs.get("oracle")
        cells = [
            task_id,
            family_of(task_id),
            skill_of(task_id),
            definition.tier,
            _cell(oracle),
            _cell(runs.get("noop")),
            _cell(runs.get("perturbed")),
            definition.perturbation.replace("|", "/"),
            str(oracle.batches) if oracle else "-",
            f"{oracle.replay_s:.1f} s" if oracle and oracle.score is not None else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def machine_description() -> str:
    """E.g. ``a 2-CPU x86_64 Linux machine (AMD EPYC 7B13)``."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"a {cpus}-CPU {platform.machine()} {platform.system()} machine" + (f" ({model})" if model else "")


def measurement_sentence(
    results: Sequence[RunResult],
    wall_s: float,
    workers: int,
    *,
    machine: str | None = None,
    when: datetime.date | None = None,
) -> str:
    """The sentence above the docs table: date, run count, wall time, desktops, machine, unexpected outcomes.

    ``when`` defaults to today (UTC) and ``machine`` to :func:`machine_description` of this computer.
    """
    tasks = len({r.task_id for r in results})
    variants = len({r.variant for r in results})
    unexpected = [r for r in results if not r.expected]
    day = (when or datetime.datetime.now(datetime.UTC).date()).isoformat()
    outcome = (
        f"all {len(results)} runs gave the expected outcome"
        if not unexpected
        else f"{len(unexpected)} of {len(results)} runs did NOT give the expected outcome (marked below)"
    )
    return (
        f"Measured on {day}: {len(results)} runs ({tasks} task instances x {variants} variants) in "
        f"{wall_s:.0f} s wall time ({wall_s / 60:.1f} min) with {workers} parallel "
        f"{'desktop' if workers == 1 else 'desktops'} on {machine or machine_description()}; {outcome}."
    )


def validity_block(
    results: Sequence[RunResult],
    wall_s: float,
    workers: int,
    *,
    machine: str | None = None,
    when: datetime.date | None = None,
) -> str:
    """The generated text between the markers: provenance comment, measurement sentence, table."""
    return (
        f"{TABLE_START}\n"
        "<!-- Generated by `uv run python benchmarks/suite_validity.py --all --update-docs`; do not edit by hand. -->\n"
        f"{measurement_sentence(results, wall_s, workers, machine=machine, when=when)}\n\n"
        f"{markdown_table(results)}"
        f"{TABLE_END}"
    )


def replace_validity_table(text: str, block: str) -> str:
    """``text`` with everything from :data:`TABLE_START` to :data:`TABLE_END` replaced by ``block``."""
    start = text.find(TABLE_START)
    end = text.find(TABLE_END)
    if start < 0 or end < 0 or end < start or text.count(TABLE_START) != 1 or text.count(TABLE_END) != 1:
        raise ValueError(f"expected one {TABLE_START} ... {TABLE_END} pair in the document")
    return text[:start] + block + text[end + len(TABLE_END) :]


def update_docs(
    results: Sequence[RunResult], wall_s: float, workers: int, path: Path = DOCS_PATH, **kwargs: Any
) -> None:
    """Rewrite the validity block of the document at ``path`` from ``results``.

    ``kwargs`` go to :func:`validity_block`; raises ``ValueError`` unless the document has exactly one pair of markers.
    """
    path.write_text(replace_validity_table(path.read_text(), validity_block(results, wall_s, workers, **kwargs)))


def read_validity_table(text: str) -> list[dict[str, str]]:
    """The rows of the table between the markers, as ``{column: cell}`` dicts."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"no {TABLE_START} ... {TABLE_END} block")
    lines = [line.strip() for line in text[start:end].splitlines() if line.strip().startswith("|")]
    if len(lines) < 2:
        return []

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.strip("|").split("|")]

    header = cells(lines[0])
    return [dict(zip(header, cells(line), strict=False)) for line in lines[2:]]


def check_complete(results: Sequence[RunResult]) -> list[str]:
    """Why ``results`` cannot be the docs table (empty when it covers every instance and variant)."""
    problems = []
    expected = registry.list_tasks(app="librecad")
    seen = {(r.task_id, r.variant) for r in results}
    missing = [task_id for task_id in expected if any((task_id, v) not in seen for v in VARIANTS)]
    if missing:
        problems.append(f"runs missing for {len(missing)} instances: {', '.join(missing[:10])}")
    extra = sorted({r.task_id for r in results} - set(expected))
    if extra:
        problems.append(f"not LibreCAD instances: {', '.join(extra)}")
    return problems


def results_json(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """The ``--json`` output: per run its outcome, counts, timings, error and full score report, JSON-ready."""
    return [
        {
            "task_id": r.task_id,
            "variant": r.variant,
            "expected": r.expected,
            "batches": r.batches,
            "actions": r.actions,
            "launch_s": r.launch_s,
            "replay_s": r.replay_s,
            "total_s": r.total_s,
            "error": r.error,
            "report": r.report.model_dump(mode="json") if r.report else None,
        }
        for r in results
    ]


def main(argv: Sequence[str] | None = None, rig_factory: RigFactory | None = None) -> int:
    """The validity command line on ``rig_factory``'s desktops (exit 0 when every outcome is expected).

    Without a factory (``python -m autocad_bench_evaluator.suite.validity``, deprecated) it
    says where the command moved and exits 2: the evaluator has no desktop of its own.
    """
    if rig_factory is None:
        print("the validity replay moved to the local-xvfb backend, where the LibreCAD desktop is: "
              "python -m autocad_bench_xvfb.suite_validity", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description="Replay the LibreCAD reference solutions and score them.")
    parser.add_argument("--suite", help="named suite to run (default: librecad-2d)")
    parser.add_argument("--tasks", nargs="*", help="task ids (overrides --suite)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: oracle,noop,perturbed")
    parser.add_argument("--markdown", type=Path, help="write the validity table (markdown) here")
    parser.add_argument("--json", type=Path, help="write every result with its score report here")
    parser.add_argument("--keep", type=Path, help="copy every attempt drawing into this directory")
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help=f"parallel desktops (default: {DEFAULT_WORKERS})"
    )
    parser.add_argument("--per-family", action="store_true", help="only the first instance of each family")
    parser.add_argument(
        "--update-docs",
        action="store_true",
        help="run every LibreCAD instance (all variants) and rewrite the table in docs/tasks.md",
    )
    parser.add_argument("--docs", type=Path, default=DOCS_PATH, help="the document --update-docs rewrites")
    parser.add_argument(
        "--run-timeout", type=float, default=DEFAULT_RUN_TIMEOUT_S, help="seconds before a run is abandoned"
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.update_docs:
        if args.tasks or args.suite or args.per_family or args.variants != ",".join(VARIANTS):
            parser.error("--update-docs runs every LibreCAD instance: drop --tasks, --suite, --per-family, --variants")
        if not args.docs.is_file():
            parser.error(f"{args.docs} does not exist (run from a source checkout or pass --docs)")
        task_ids = registry.list_tasks(app="librecad")
    else:
        task_ids = args.tasks or registry.resolve_suite(args.suite or "librecad-2d")
    if args.per_family:
        task_ids = per_family(task_ids)
    variants: list[Variant] = []
    for name in args.variants.split(","):
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}")
        variants.append(name)
    workers = min(args.workers, len(task_ids) * len(variants)) or 1
    started = time.monotonic()
    try:
        results = run_validity(
            task_ids, variants, workers=workers, keep=args.keep, progress=True, run_timeout_s=args.run_timeout,
            rig_factory=rig_factory,
        )
    except KeyboardInterrupt:
        print("interrupted: every worker and desktop was stopped", file=sys.stderr)
        return 130
    elapsed = time.monotonic() - started
    table = markdown_table(results)
    print(table)
    print(
        f"{len(results)} runs in {elapsed:.1f} s with {workers} workers; "
        f"unexpected: {sum(not r.expected for r in results)}"
    )
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps(results_json(results), indent=2) + "\n")
    if args.update_docs:
        problems = check_complete(results)
        if problems:
            print(f"not updating {args.docs}: {'; '.join(problems)}", file=sys.stderr)
            return 1
        update_docs(results, elapsed, workers, args.docs)
        print(f"updated the validity table in {args.docs}", file=sys.stderr)
    return 0 if all(r.expected for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

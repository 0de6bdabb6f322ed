"""Live progress of ``autocad-bench-batch --execute`` on the terminal.

:class:`BatchProgress` is an observer the controller drives: :func:`run_batch` wraps
``runner.run()`` in it, it receives ``rollout_state_changed`` from the controller's plugin
host, and a small thread reads ``batch-state.json`` and each active rollout's
``run-state.json`` (turns, actions, cost, elapsed) and evaluation score.

The work per state change is constant in the size of the batch: the display keeps every
rollout's state and the per-state counts in memory and updates them from the events it
receives; a change reads only that rollout's files (and its entry, from the controller's
memory when it passes ``entries``). Whole-batch reads happen once at the start, for the
heartbeat, and every ``resync_s`` while events arrive (every ``interval_s`` without a host,
when files are the only source). The live display reads only the rows it shows.

On a terminal it is a rich live display: the per-state counts and one line per rollout.
When stdout is not a TTY, or ``CI`` is set, it degrades to plain log lines on stderr: one
per state change (with the counts) and, every ``heartbeat_s``, one per active rollout.
``AUTOCAD_BENCH_PROGRESS=live|plain|off`` overrides the choice. The final summary table and
summary.json/summary.csv stay the controller's (:mod:`autocad_bench.controller.summary`).

A running rollout's elapsed time keeps moving between two ``run-state.json`` writes: the
pilot rewrites that file once per turn, so while a model request is retried (a dead base
URL can take minutes) the file stands still; the display adds the time since it first saw
the current value. Model-request retries are shown too: while the display is up it listens
to the ``autocad_bench.retry`` logger (:mod:`autocad_bench.retry.reporting`), counts the
retries and shows the latest one under the table. That covers the rollouts of a shared-mode
batch, whose pilots run in this process; a subprocess child logs its retries to its
rollout log (``rollouts/<id>/controller.log`` or the backend's log), not here.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from autocad_bench.dashboard.reader import ACTIVE_STATES, STATES, BatchInfo, RolloutRow, RunsRoot
from autocad_bench.events import BatchEvent, RolloutStateEvent
from autocad_bench.harness.layout import BatchPaths
from autocad_bench.observers import Observer
from autocad_bench.storage.fields import as_dict as _dict

Mode = Literal["auto", "live", "plain", "off"]
MODE_ENV = "AUTOCAD_BENCH_PROGRESS"
RANK = {"queued": 0, "starting": 1, "running": 2, "evaluating": 3, "done": 4, "failed": 4}
STATE_STYLES = {"queued": "dim", "starting": "yellow", "running": "blue", "evaluating": "magenta",
                "done": "green", "failed": "red"}


def choose_mode(environ: Mapping[str, str], *, stdout_isatty: bool, console: Console) -> Literal["live", "plain",
                                                                                                 "off"]:
    """live on an interactive terminal, plain when stdout is not a TTY or CI is set."""
    forced = environ.get(MODE_ENV, "").strip().lower()
    if forced in ("live", "plain", "off"):
        return forced  # type: ignore[return-value]
    if environ.get("CI") or not stdout_isatty or not console.is_terminal:
        return "plain"
    return "live"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    whole = int(value)
    return f"{value:.1f}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


def _score(row: RolloutRow) -> str:
    if row.score is None:
        return "-"
    return f"{row.score:.3f}" + ("" if row.passed is None else (" pass" if row.passed else " fail"))


def counts_text(counts: Mapping[str, Any]) -> str:
    return " ".join(f"{state} {counts.get(state, 0)}" for state in STATES)


RETRY_LOGGER = "autocad_bench.retry"


class RetryFeed(logging.Handler):
    """Collects the retry lines of :data:`RETRY_LOGGER` for the display (any thread may log)."""

    def __init__(self, keep: int = 3, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(level=logging.NOTSET)
        self.count = 0
        self.recent: collections.deque[tuple[float, str]] = collections.deque(maxlen=keep)
        self._clock = clock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = retry_status(record)
            with self.lock or contextlib.nullcontext():
                self.count += 1
                self.recent.append((self._clock(), line))
        except Exception:  # the display must never take a retry down
            self.handleError(record)

    def latest(self) -> tuple[int, tuple[float, str] | None]:
        with self.lock or contextlib.nullcontext():
            return self.count, (self.recent[-1] if self.recent else None)


def retry_status(record: logging.LogRecord) -> str:
    """``retrying: <what> <reason> (attempt n, next in s)`` from a :func:`~autocad_bench.retry.reporting.log_retry`
    record (its ``retry_*`` attributes), else the record's message."""
    what = getattr(record, "retry_what", None)
    if what is None:
        return record.getMessage()
    return (f"retrying: {what} {getattr(record, 'retry_reason', '')} "
            f"(attempt {getattr(record, 'retry_attempt', '?')}, next in {getattr(record, 'retry_wait_s', 0.0):.1f}s)")


class BatchProgress(Observer):
    """Terminal progress of one batch (see module docstring); use as a context manager."""

    name = "cli-progress"

    def __init__(self, output_dir: Path, *, host: Any = None, console: Console | None = None, mode: Mode = "auto",
                 environ: Mapping[str, str] | None = None, stdout_isatty: bool | None = None,
                 interval_s: float = 0.5, heartbeat_s: float = 30.0, max_lines: int = 20,
                 clock: Callable[[], float] = time.monotonic,
                 entries: Callable[[str], Mapping[str, Any]] | None = None, resync_s: float = 60.0) -> None:
        self.output_dir = Path(output_dir)
        self.console = console or Console(stderr=True)
        environ = os.environ if environ is None else environ
        isatty = sys.stdout.isatty() if stdout_isatty is None else stdout_isatty
        self.mode = choose_mode(environ, stdout_isatty=isatty, console=self.console) if mode == "auto" else mode
        self.interval_s = interval_s
        self.heartbeat_s = heartbeat_s
        self.max_lines = max_lines
        self._host = host
        self._observing = contextlib.ExitStack()
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()  # one roster read at a time (see _ensure_loaded)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._reported: dict[str, str] = {}
        self._clock = clock
        self._started = clock()
        self._root: RunsRoot | None = None
        self._last_heartbeat = clock()
        # rollout id -> (elapsed_s last read from run-state.json, when it was first seen).
        self._elapsed_seen: dict[str, tuple[float, float]] = {}
        self._elapsed_lock = threading.Lock()  # not self._lock: _print holds that around console output
        self.retries = RetryFeed(clock=clock)
        self.resync_s = resync_s
        self._entries = entries
        # The display's model of the batch: rollout id -> state (batch order) and the counts.
        self._states: dict[str, str] = {}
        self._counts: collections.Counter[str] = collections.Counter()
        self._evaluation_enabled = False
        self._batch_id = ""
        self._last_poll = clock()
        self._last_refresh = 0.0

    # --- observer hooks (called by the controller on its threads) ---------------------------

    def batch_started(self, event: BatchEvent) -> None:
        if self.mode == "plain":
            self._print(f"batch {event.batch_id}: {event.rollouts} rollout(s) on {event.infrastructure_backend}")

    def rollout_state_changed(self, event: RolloutStateEvent) -> None:
        self._transition(event.rollout_id, event.previous, event.state)
        if self._live is not None and self._clock() - self._last_refresh >= 0.25:
            # At most four redraws a second however many rollouts change at once.
            self._last_refresh = self._clock()
            self._live.refresh()

    def batch_finished(self, event: BatchEvent) -> None:
        self.poll()
        if self.mode == "plain":
            counts = event.summary.get("counts")
            self._print(f"batch {event.batch_id} finished: "
                        f"{counts_text(counts if isinstance(counts, dict) else {})}")

    # --- reading the output tree ------------------------------------------------------------

    def snapshot(self) -> BatchInfo | None:
        """The batch as the dashboard reads it (None until batch-state.json exists)."""
        if not BatchPaths(self.output_dir).state.is_file():
            return None
        if self._root is None:
            self._root = RunsRoot(self.output_dir)
        info = self._root.read_batch(self._root.root, rows=True)
        return None if info.error else info

    def poll(self) -> BatchInfo | None:
        """Read the batch once; report state changes no observer event has reported."""
        info = self.snapshot()
        if info is None:
            return None
        self._last_poll = self._clock()
        with self._lock:
            self._load(info)
            changed = []
            for row in info.rollouts:
                before = self._reported.get(row.rollout_id, "queued")
                if row.state != before:
                    changed.append((row.rollout_id, before, row.state))
                    self._advance(row.rollout_id, row.state)
        rows = {row.rollout_id: row for row in info.rollouts}
        for rollout_id, before, state in changed:
            self._transition(rollout_id, before, state, rows.get(rollout_id))
        return info

    def _load(self, info: BatchInfo) -> None:
        """Take the batch's roster (and, where newer, states) from a whole read; under _lock."""
        self._batch_id = info.batch_id
        self._evaluation_enabled = info.evaluation_enabled
        for row in info.rollouts:
            if row.rollout_id not in self._states:
                self._states[row.rollout_id] = "queued"
                self._counts["queued"] += 1
            self._advance(row.rollout_id, row.state)

    def _ensure_loaded(self) -> None:
        """Read the roster once (the first event may come before any poll).

        Every rollout's first event arrives at once when a wave starts, each on its own
        thread: one of them reads the batch while the others wait for it (without the lock
        each read it, a whole-batch read per rollout: 15,000 rows read for 200 rollouts).
        """
        if self._states:
            return
        with self._load_lock:
            if self._states:
                return
            info = self.snapshot()
            if info is not None:
                with self._lock:
                    self._load(info)

    def _advance(self, rollout_id: str, state: str) -> bool:
        """Move one rollout forward in the model (never back); under _lock."""
        known = self._states.get(rollout_id)
        if known == state or (known is not None and RANK.get(state, 0) < RANK.get(known, 0)):
            return False
        if known is not None:
            self._counts[known] -= 1
        self._states[rollout_id] = state
        self._counts[state] += 1
        return True

    @property
    def counts(self) -> dict[str, int]:
        """Rollouts per state, as the display shows them."""
        with self._lock:
            return {state: self._counts.get(state, 0) for state in STATES}

    def row(self, rollout_id: str) -> RolloutRow | None:
        """One rollout's row, reading only its own files (its entry from ``entries`` if given)."""
        if self._root is None:
            if not BatchPaths(self.output_dir).state.is_file():
                return None
            self._root = RunsRoot(self.output_dir)
        entry: Mapping[str, Any] | None = None
        if self._entries is not None:
            try:
                entry = self._entries(rollout_id)
            except (KeyError, StopIteration, AttributeError):
                entry = None
        if entry is None:
            doc, index = self._root.state_entries(self._root.root)
            entry = index.get(rollout_id)
            if doc is not None:
                self._evaluation_enabled = bool(_dict(doc.get("evaluation")).get("enabled"))
        if entry is None:
            return None
        return self._root.rollout_row(self._root.root, dict(entry), evaluation_enabled=self._evaluation_enabled)

    def _transition(self, rollout_id: str, previous: str | None, state: str, row: RolloutRow | None = None) -> None:
        self._ensure_loaded()
        with self._lock:
            known = self._reported.get(rollout_id)
            # A poll can see a newer state than an event still being delivered: never go back.
            if known == state or (known is not None and RANK.get(state, 0) < RANK.get(known, 0)):
                return
            before = known or previous or "queued"
            self._reported[rollout_id] = state
            if rollout_id not in self._states:
                self._states[rollout_id] = before
                self._counts[before] += 1
            self._advance(rollout_id, state)
        if self.mode != "plain":
            return
        detail = ""
        if state in ("done", "failed", "evaluating"):
            row = row or self.row(rollout_id)
            if row is not None:
                detail = (f" turns={row.turns if row.turns is not None else '-'} "
                          f"actions={row.actions if row.actions is not None else '-'} cost={_money(row.cost_usd)}"
                          f" score={_score(row)}")
                if row.failure_class:
                    detail += f" failure={row.failure_class}"
        counts = f" [{counts_text(self.counts)}]" if self._states else ""
        self._print(f"{rollout_id}: {before} -> {state}{detail}{counts}")

    def _print(self, message: str) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        with self._lock:
            self.console.print(f"{stamp} {message}", markup=False, highlight=False, soft_wrap=True)

    def _heartbeat(self, info: BatchInfo) -> None:
        for row in info.rollouts:
            if row.state in ACTIVE_STATES:
                self._print(f"{row.rollout_id} {row.state} turns={row.turns if row.turns is not None else '-'} "
                            f"actions={row.actions if row.actions is not None else '-'} "
                            f"elapsed={_seconds(self.elapsed(row))} cost={_money(row.cost_usd)}")

    def elapsed(self, row: RolloutRow) -> float | None:
        """The rollout's elapsed seconds, kept moving while its pilot has not rewritten its state.

        ``run-state.json`` is written once per turn; a running rollout whose value has not
        changed since this display first read it is shown that value plus the time since.
        """
        value = row.elapsed_s
        if value is None or row.state != "running":
            with self._elapsed_lock:
                self._elapsed_seen.pop(row.rollout_id, None)
            return value
        now = self._clock()
        with self._elapsed_lock:
            seen = self._elapsed_seen.get(row.rollout_id)
            if seen is None or seen[0] != value:
                self._elapsed_seen[row.rollout_id] = seen = (value, now)
        return value + max(0.0, now - seen[1])

    # --- live display -----------------------------------------------------------------------

    def render(self) -> Group:
        """The live display: a counts line and a table of active, then recent, rollouts.

        Reads only the rows it shows; without a host (no events) it first polls the files.
        """
        if self._host is None:
            self.poll()
        else:
            self._ensure_loaded()
        elapsed = _seconds(self._clock() - self._started)
        retry = self._retry_line()
        with self._lock:
            states = dict(self._states)
            counts = {state: self._counts.get(state, 0) for state in STATES}
            batch_id = self._batch_id
        if not states:
            return Group(*[Text(f"preparing batch ... {elapsed}"), *([retry] if retry else [])])
        header = Text(f"batch {batch_id}  {elapsed}  ")
        for state in STATES:
            header.append(f"{state} {counts.get(state, 0)}  ", style=STATE_STYLES[state])
        count, _ = self.retries.latest()
        if count:
            header.append(f"retries {count}  ", style="yellow")
        table = Table(box=None, pad_edge=False, expand=False)
        for column in ("rollout", "model", "state", "turns", "actions", "elapsed", "cost", "score"):
            table.add_column(column, justify="right" if column in ("turns", "actions", "elapsed", "cost") else "left")
        order = {s: i for i, s in enumerate(("running", "evaluating", "starting", "failed", "done", "queued"))}
        # The first max_lines in (state order, batch order), as a stable sort of every row gave.
        by_state: dict[int, list[str]] = {}
        for rollout_id, state in states.items():
            bucket = by_state.setdefault(order.get(state, 9), [])
            if len(bucket) < self.max_lines:
                bucket.append(rollout_id)
        shown_ids = [rid for key in sorted(by_state) for rid in by_state[key]][: self.max_lines]
        for rollout_id in shown_ids:
            row = self.row(rollout_id)
            if row is None:
                continue
            state = states[rollout_id]
            table.add_row(row.rollout_id, row.model_label, Text(state, style=STATE_STYLES.get(state, "")),
                          "-" if row.turns is None else str(row.turns),
                          "-" if row.actions is None else str(row.actions),
                          _seconds(self.elapsed(row)), _money(row.cost_usd), _score(row))
        parts: list[Any] = [header, table]
        if len(states) > len(shown_ids):
            parts.append(Text(f"... {len(states) - len(shown_ids)} more", style="dim"))
        if retry:
            parts.append(retry)
        return Group(*parts)

    def _retry_line(self) -> Text | None:
        """The latest model-request retry and how long ago it was scheduled."""
        _, latest = self.retries.latest()
        if latest is None:
            return None
        at, line = latest
        return Text(f"{line} [{_seconds(self._clock() - at)} ago]", style="yellow")

    # --- lifecycle --------------------------------------------------------------------------

    def _attach(self) -> None:
        # The display observes the batch's events (and the retry log) only while it is shown.
        if self._host is not None:
            self._observing.enter_context(self._host.observing(self, self.name))
        logger = logging.getLogger(RETRY_LOGGER)
        logger.addHandler(self.retries)
        self._observing.callback(logger.removeHandler, self.retries)

    def _detach(self) -> None:
        self._observing.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                heartbeat_due = self.mode == "plain" and self._clock() - self._last_heartbeat >= self.heartbeat_s
                # With a host the events keep the model current: a whole read only now and then
                # (and for the heartbeat); without one the files are the only source.
                if self._host is not None and not heartbeat_due and self._clock() - self._last_poll < self.resync_s:
                    continue
                info = self.poll()
                if info is not None and heartbeat_due:
                    self._last_heartbeat = self._clock()
                    self._heartbeat(info)
            except Exception as error:  # progress must never take the batch down
                self._print(f"progress display error: {type(error).__name__}: {error}")

    def __enter__(self) -> BatchProgress:
        if self.mode == "off":
            return self
        self._attach()
        if self.mode == "live":
            self._live = Live(console=self.console, get_renderable=self.render, refresh_per_second=4,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        self._thread = threading.Thread(target=self._run, name="batch-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if self.mode == "plain":
                self.poll()
        finally:
            if self._live is not None:
                self._live.stop()
                self._live = None
            self._detach()


__all__ = ["BatchProgress", "choose_mode"]

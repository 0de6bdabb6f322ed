"""Thread CPU time per phase of a rollout, measured inside the controller (``--phases``).

A sampling profiler and ``cProfile`` both distort a controller that runs a thousand threads
(see docs/performance.md): the first samples whoever holds the GIL, the second charges its own
per-call cost to every call. This clock adds one ``time.thread_time()`` pair per call of a
few named methods (the phases of a rollout: its start, its turns, its end, the controller's
bookkeeping) and nothing else, so its own cost is a few microseconds per phase.

What a figure means: the CPU time of the thread that ran the method, from its call to its
return, *inclusive* of the phases it calls (``pilot.loop`` contains every ``pilot.turn``).
For a coroutine the clock runs across its awaits, which is exact when the coroutine's event
loop runs nothing but its own rollout: the default, where each rollout's lifecycle thread
runs its own loop. With shared pilot loops (``AUTOCAD_BENCH_PILOT_LOOPS``) other rollouts'
work would be counted too, so :func:`install` refuses them.

What can fail: :func:`install` raises ``AttributeError`` when a named method no longer
exists (the list below must follow the code) and ``RuntimeError`` with shared pilot loops.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

PHASES: tuple[tuple[str, str, str, str], ...] = (
    # (label, module, class, method); a label is what the table shows.
    ("controller: one rollout's sandbox", "autocad_bench.controller.batch", "BatchRunner", "_sandbox"),
    ("controller: prepare (assignment)", "autocad_bench.controller.batch", "BatchRunner", "_prepare"),
    ("controller: state change", "autocad_bench.controller.batch", "BatchRunner", "_set_state"),
    ("controller: record the end", "autocad_bench.controller.batch", "BatchRunner", "_record_end"),
    ("progress: state change shown", "autocad_bench.progress", "BatchProgress", "rollout_state_changed"),
    ("backend: run_shared (lease, pilot, release)", "example_autocad_backend.plugin", "ExamplePoolPlugin",
     "run_shared"),
    ("pilot: whole run", "autocad_bench.harness.pilot", "Pilot", "run"),
    ("pilot: set up (assignment, checkpoint)", "autocad_bench.harness.pilot", "Pilot", "__init__"),
    ("pilot: handoff (lease, reset, frame 0)", "autocad_bench.harness.pilot", "Pilot", "_handoff"),
    ("pilot: model loop", "autocad_bench.harness.pilot", "Pilot", "_loop"),
    ("pilot: one turn's model call", "autocad_bench.harness.pilot", "Pilot", "_request_turn"),
    ("pilot: one turn's batch (validate, send, record)", "autocad_bench.harness.pilot", "Pilot", "_handle_turn"),
    ("pilot: finish (save, events, release, result)", "autocad_bench.harness.pilot", "Pilot", "_finish"),
    ("broker: actions with frame", "autocad_bench.broker.client", "BrokerClient", "actions_with_frame"),
    ("broker: lease", "autocad_bench.broker.client", "BrokerClient", "lease"),
    ("broker: frame", "autocad_bench.broker.client", "BrokerClient", "frame"),
    ("broker: status", "autocad_bench.broker.client", "BrokerClient", "status"),
    ("trace: save frame", "autocad_bench.harness.trace", "TraceWriter", "save_frame"),
    ("trace: checkpoint", "autocad_bench.harness.trace", "TraceWriter", "checkpoint"),
    ("trace: run state", "autocad_bench.harness.trace", "TraceWriter", "run_state"),
)


class PhaseClock:
    """Thread CPU seconds and calls per label, kept per thread (no lock on the hot path)."""

    def __init__(self, clock: Callable[[], float] = time.thread_time) -> None:
        self._clock = clock
        self._local = threading.local()
        self._tables: list[dict[str, list[float]]] = []
        self._lock = threading.Lock()

    def _table(self) -> dict[str, list[float]]:
        table: dict[str, list[float]] | None = getattr(self._local, "table", None)
        if table is None:
            table = self._local.table = {}
            with self._lock:
                self._tables.append(table)
        return table

    def _add(self, label: str, seconds: float) -> None:
        cell = self._table().setdefault(label, [0.0, 0])
        cell[0] += seconds
        cell[1] += 1

    def wrap(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` (plain or ``async def``) timed under ``label``."""
        clock = self._clock
        if inspect.iscoroutinefunction(function):
            @functools.wraps(function)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                start = clock()
                try:
                    return await function(*args, **kwargs)
                finally:
                    self._add(label, clock() - start)
            return timed_async

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                self._add(label, clock() - start)
        return timed

    def totals(self) -> dict[str, tuple[float, int]]:
        """label -> (CPU seconds, calls), summed over every thread."""
        merged: dict[str, list[float]] = {}
        with self._lock:
            tables = list(self._tables)
        for table in tables:
            for label, (seconds, calls) in list(table.items()):
                cell = merged.setdefault(label, [0.0, 0])
                cell[0] += seconds
                cell[1] += calls
        return {label: (seconds, int(calls)) for label, (seconds, calls) in merged.items()}


def install(clock: PhaseClock, environ: Mapping[str, str] = os.environ,
            phases: tuple[tuple[str, str, str, str], ...] = PHASES) -> None:
    """Wrap every method of ``phases`` with ``clock`` (see the module docstring for failures)."""
    if environ.get("AUTOCAD_BENCH_PILOT_LOOPS", "").strip() not in ("", "0"):
        raise RuntimeError("phase times need each pilot on its own loop; unset AUTOCAD_BENCH_PILOT_LOOPS")
    for label, module_name, class_name, method in phases:
        owner = getattr(importlib.import_module(module_name), class_name)
        setattr(owner, method, clock.wrap(label, getattr(owner, method)))

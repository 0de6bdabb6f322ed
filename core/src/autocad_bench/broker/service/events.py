"""The broker's structured event log: what ``GET /events`` serves.

Every lifecycle step a broker takes is one :class:`~autocad_bench.broker.protocol.BrokerEvent`
(``seq``, ``at``, ``kind``, ``detail``). The protocol layer
(:mod:`autocad_bench.broker.service.app`) logs the kinds every broker shares: ``lease``,
``reset``, ``actions``, ``batch_rejected``, ``checkpoint``, ``release`` and ``fault``
(anything unexpected); a desktop driver adds its own (``startup``, ``reset_attempt``,
``reset_failed``, ``checkpoint_failed``, ``shutdown``...). Replayed answers add nothing.

Events are kept in memory for the route and, when a path is given, mirrored one JSON object
per line to a JSONL file so that the evidence survives a broker crash. The log is
thread-safe because desktop callbacks run in worker threads. A failing mirror write never
fails the operation that logged the event: the in-memory log stays authoritative and the
failure is counted in :attr:`EventLog.mirror_errors`.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from autocad_bench.broker.protocol import BrokerEvent
from autocad_bench.models import JsonObject

_ERROR_LIMIT = 300


def describe_error(error: BaseException) -> str:
    """One short line naming an exception (type and first line of its text, capped).

    Used for event details: it never includes a traceback, and callers must not pass
    exceptions whose text may carry secrets.
    """
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    line = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return line if len(line) <= _ERROR_LIMIT else line[: _ERROR_LIMIT - 3] + "..."


class EventLog:
    """Append-only, thread-safe list of broker events, optionally mirrored to ``path``.

    Opening the mirror creates its parent directory; that may raise ``OSError``. Later
    mirror failures are only counted.
    """

    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._events: list[BrokerEvent] = []
        self._file: IO[str] | None = None
        self.mirror_errors = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def add(self, kind: str, detail: JsonObject | None = None) -> BrokerEvent:
        """Record one event now and return it (``detail`` must be JSON-serialisable)."""
        with self._lock:
            event = BrokerEvent(seq=len(self._events), at=datetime.now(UTC), kind=kind, detail=detail or {})
            self._events.append(event)
            if self._file is not None:
                try:
                    self._file.write(event.model_dump_json() + "\n")
                    self._file.flush()
                except (OSError, ValueError):
                    self.mirror_errors += 1
            return event

    def snapshot(self) -> tuple[BrokerEvent, ...]:
        """Every event so far, in order."""
        with self._lock:
            return tuple(self._events)

    def clear(self) -> None:
        """Forget the in-memory events (test brokers reused across examples); the mirror keeps them."""
        with self._lock:
            self._events.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def close(self) -> None:
        """Close the mirror file; later events are kept in memory only. Idempotent."""
        with self._lock:
            handle, self._file = self._file, None
        if handle is not None:
            handle.close()


__all__ = ["EventLog", "describe_error"]

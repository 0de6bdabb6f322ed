"""Append-only JSON Lines traces that survive a crash with at most one torn last line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any


def append_jsonl(path: Path, record: Any, *, fsync: bool = False) -> None:
    """Append one JSON record as a single ``write`` of one line.

    One ``write`` call on an ``O_APPEND`` descriptor keeps concurrent appenders from
    interleaving inside a line; ``fsync`` makes the line durable before returning.
    """
    _append(path, _lines([record]), fsync=fsync)


def _append(path: Path, data: bytes, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def append_jsonl_many(path: Path, records: Sequence[Any], *, fsync: bool = False) -> None:
    """Append several records, one line each, in a single ``write`` (nothing if empty).

    Concurrent appenders cannot interleave inside the block; a crash may tear only its
    last line, which :func:`read_jsonl` skips like any torn last line.
    """
    if not records:
        return
    _append(path, _lines(records), fsync=fsync)


class JsonlAppender:
    """An append-only JSONL file kept open for a writer that appends many records.

    The same one-``write``-per-call lines as :func:`append_jsonl`, without opening and
    closing the file every time (which cost more than the write on per-turn paths). The
    descriptor is opened on first use and ``O_APPEND``, so other appenders to the same
    file still never interleave inside a line. :meth:`close` is idempotent; an appender
    may be used again after it (it reopens).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def append(self, record: Any) -> None:
        """Append one record as one line."""
        self._write(_lines([record]))

    def append_many(self, records: Sequence[Any]) -> None:
        """Append several records in one ``write`` (nothing if empty)."""
        if records:
            self._write(_lines(records))

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
        view = memoryview(data)
        while view:
            # A short write (full disk, signal) continues where it stopped, like a buffered file.
            view = view[os.write(self._fd, view):]


def _lines(records: Sequence[Any]) -> bytes:
    """One JSON line per record (sorted keys, UTF-8), as the bytes of a single write."""
    return "".join(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str) + "\n"
                   for record in records).encode()


def read_jsonl(path: Path) -> Iterator[Any]:
    """Yield every record; a torn (unparseable) *last* line is skipped, any other raises."""
    path = Path(path)
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            if index == last:
                return
            raise ValueError(f"{path}: line {index + 1} is not JSON") from None

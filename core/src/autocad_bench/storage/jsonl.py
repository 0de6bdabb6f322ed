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
    line = (json.dumps(record, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()
    _append(path, line, fsync=fsync)


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
    data = "".join(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str) + "\n" for record in records)
    _append(path, data.encode(), fsync=fsync)


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

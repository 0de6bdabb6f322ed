"""Atomic file replacement: a reader sees the old bytes or the new bytes, never a mix.

Every state file of a batch (batch-state.json, run-state.json, result.json, ...), and every
file the broker publishes (frames, artifacts, ready file, manifest, attempt drawing) is
written through here: write a temporary file in the same directory, fsync it, rename it over the
target, fsync the directory. A crash at any instant leaves valid JSON behind.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def atomic_write_bytes(
    path: Path, data: bytes | memoryview, *, durable: bool = True, mode: int | None = None
) -> None:
    """Replace ``path`` with ``data`` atomically; the parent directory must exist.

    The temporary file is a dot-file next to ``path``, created exclusively (``O_EXCL``:
    never through an existing file or symlink) with mode ``0600`` less the umask; ``mode``
    sets its permission bits exactly instead (``fchmod``, POSIX only), before any byte is
    written, so the final file never had other bits. ``durable=False`` skips the fsyncs:
    readers still never see a torn file, but the newest version may be lost on power failure
    (fine for progress indicators that are rewritten constantly and for files that only have
    to survive the writing process, never for resume checkpoints). Raises ``OSError`` when
    the file system refuses; the temporary file is then removed and ``path`` is unchanged.
    """
    path = Path(path)
    fd, tmp = _create_temporary(path)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_directory(path.parent)


def atomic_write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    """Serialize ``value`` (sorted keys, 2-space indent, trailing newline) and replace ``path``."""
    data = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(path, data.encode("utf-8"), durable=durable)


def atomic_write_model(path: Path, model: BaseModel, *, durable: bool = True) -> None:
    """Replace ``path`` with ``model`` as JSON (field order, 2-space indent, trailing newline).

    Pydantic's own serializer: the same values as ``atomic_write_json(path,
    model.model_dump(mode="json"))`` without the pure-Python indenting encoder, which costs
    far more than the write on hot paths (checkpoints and run state every turn).
    """
    atomic_write_bytes(path, (model.model_dump_json(indent=2) + "\n").encode("utf-8"), durable=durable)


def read_json(path: Path) -> Any:
    """Read a JSON file written by :func:`atomic_write_json`."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


_sequence = itertools.count()
"""Per-process counter for temporary names (``next`` on a count is atomic under the GIL)."""


def _create_temporary(path: Path) -> tuple[int, str]:
    """Open a new private file next to ``path``; unique per process, thread and call.

    The same guarantees as ``tempfile.mkstemp`` (``O_EXCL``, mode 0600, close-on-exec)
    without its random-name generator, which cost more than the write itself on the
    per-turn path. A leftover from a crashed writer never collides: ``O_EXCL`` refuses it
    and the next counter value is tried.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = f"{path.parent}/.{path.name}.{os.getpid()}.{threading.get_ident()}.{next(_sequence)}.tmp"
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue


def fsync_directory(directory: Path) -> None:
    """Make the directory's entries (new names, renames) durable; best effort, never raises.

    Without this a rename or a newly created file may be lost on power failure even when
    the file's own data was fsynced. Platforms without directory descriptors skip it.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

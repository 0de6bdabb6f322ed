"""Checks on saved drawing files: format signatures, SHA-256, and "written and stable".

A checkpoint is accepted only for a file that (a) changed since the save was requested or is
known to be current, (b) kept the same size, mtime and inode over two polls, and (c) starts
with the signature of its format: ``AC10xx`` for DWG; for ASCII DXF, group code ``0``
followed by ``SECTION`` after optional ``999`` comments (or the binary DXF sentinel).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# DWG versions AutoCAD writes: R13 AC1012 ... 2018+ AC1032 (AutoCAD 2019 saves AC1032).
_DWG_SIGNATURE = re.compile(rb"^AC10[0-9]{2}$")
_BINARY_DXF_SENTINEL = b"AutoCAD Binary DXF\r\n\x1a\x00"
_DXF_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class FileState:
    """Identity of a file's content on disk, cheap to compare between polls."""

    size: int
    mtime_ns: int
    inode: int


def file_state(path: Path) -> FileState | None:
    """The current :class:`FileState` of ``path``, None if it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return FileState(size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of the file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dwg_signature(path: Path) -> str | None:
    """The ``AC10xx`` version marker in the first 6 bytes of a DWG, None if absent."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(6)
    except OSError:
        return None
    return head.decode("ascii") if _DWG_SIGNATURE.match(head) else None


def dxf_signature(path: Path) -> str | None:
    """``"DXF <$ACADVER>"`` for an ASCII DXF, ``"DXF binary"``; None if not a DXF.

    The ASCII check is the first group after any ``999`` comment groups: code ``0``, then
    ``SECTION``. ``$ACADVER`` is read from the header when it is in the first 64 KiB.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(_DXF_HEAD_BYTES)
    except OSError:
        return None
    if head.startswith(_BINARY_DXF_SENTINEL):
        return "DXF binary"
    text = head.decode("latin-1").lstrip("\ufeff")
    lines = [line.strip() for line in text.splitlines()]
    start = 0
    while lines[start : start + 1] == ["999"]:  # comment groups (LibreCAD writes one)
        start += 2
    if lines[start : start + 2] != ["0", "SECTION"]:
        return None
    try:
        index = lines.index("$ACADVER")
        version = lines[index + 2]
    except (ValueError, IndexError):
        return "DXF"
    return f"DXF {version}" if version.startswith("AC") else "DXF"


def wait_for_stable_file(
    path: Path,
    *,
    changed_from: FileState | None,
    timeout_s: float,
    poll_s: float = 0.1,
    give_up: Callable[[], str | None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[FileState | None, str | None]:
    """Wait until ``path`` differs from ``changed_from`` and is unchanged over two polls.

    ``changed_from=None`` accepts the current content (only stability is required).
    ``give_up`` is called every poll; a non-None string aborts the wait with that reason
    (e.g. "a Save As dialog appeared"). Returns ``(state, None)`` on success and
    ``(None, reason)`` on timeout or abort; never raises for a missing file.
    """
    deadline = clock() + timeout_s
    previous: FileState | None = None
    while True:
        reason = give_up()
        if reason is not None:
            return None, reason
        current = file_state(path)
        if current is not None and current != changed_from and current == previous:
            return current, None
        previous = current
        if clock() >= deadline:
            if current is None:
                return None, f"{path.name} does not exist"
            if current == changed_from:
                return None, f"{path.name} was not rewritten within {timeout_s:.1f} s"
            return None, f"{path.name} kept changing for {timeout_s:.1f} s"
        sleep(poll_s)

"""Identity of the broker process and its desktop, as reported by ``GET /health``.

Admission compares these values with the readiness evidence collected when the desktop came
up, so each one must be stable for the lifetime of what it identifies and must change when
that thing is replaced:

- :func:`boot_id`: the current boot of the machine. Linux: ``/proc/sys/kernel/random/boot_id``
  (a random UUID the kernel draws at boot). Windows: ``boot-<epoch seconds>`` of the boot time
  derived from ``GetTickCount64``, rounded to 10 s so that it reads the same all through one
  boot (it changes on every reboot, which is all admission needs).
- :func:`new_startup_id`: random per broker start (a restarted broker is a new broker).
- :func:`interactive_session_id`: Windows: the Terminal Services session of this process
  (``ProcessIdToSessionId``; admission requires it nonzero and equal to the readiness
  session). Linux has no such session; the broker reports the number ``N`` of its X display
  ``:N`` instead (so display ``:0`` reports 0, which admission of a Windows image would refuse
  as it should: a Linux stand-in is never a valid Windows handoff).
- :func:`manifest_sha256`: the deployment manifest. With a manifest file configured, the
  SHA-256 of its bytes. Without one, :func:`package_sha256`: a digest over the broker
  package's own files, so two brokers report the same value exactly when they run the same
  code.

Nothing here touches the display; every function is cheap and safe to call at start-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sys
import time
from pathlib import Path

from autocad_bench_broker.errors import BrokerError

_BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
_DISPLAY = re.compile(r"^[A-Za-z0-9.\-]*:(?P<number>[0-9]+)(?:\.[0-9]+)?$")
_PACKAGE_DIR = Path(__file__).resolve().parent
_EXCLUDED_DIRS = frozenset({"__pycache__"})
_EXCLUDED_SUFFIXES = frozenset({".pyc", ".pyo"})


class IdentityError(BrokerError):
    """An identity value cannot be determined (unreadable boot id or manifest, bad display)."""


def new_startup_id() -> str:
    """A fresh random id (32 hex characters) for this broker start."""
    return secrets.token_hex(16)


def boot_id() -> str:
    """The current boot's id (see the module docstring); raises :class:`IdentityError`."""
    if sys.platform == "win32":
        return _windows_boot_id()
    try:
        value = _BOOT_ID_PATH.read_text(encoding="ascii").strip()
    except OSError as exc:
        raise IdentityError(f"cannot read {_BOOT_ID_PATH}: {exc.strerror or exc}") from exc
    if not value:
        raise IdentityError(f"{_BOOT_ID_PATH} is empty")
    return value


def _windows_boot_id() -> str:
    if sys.platform == "win32":  # repeated so that mypy checks ctypes.windll only for Windows
        import ctypes

        ticks_ms = int(ctypes.windll.kernel32.GetTickCount64())
        booted = time.time() - ticks_ms / 1000.0
        return f"boot-{round(booted / 10.0) * 10}"
    raise IdentityError("not running on Windows")


def display_number(display: str) -> int:
    """``N`` of an X display name ``[host]:N[.screen]``; raises :class:`IdentityError`."""
    match = _DISPLAY.match(display)
    if match is None:
        raise IdentityError(f"{display!r} is not an X display name like ':3'")
    return int(match.group("number"))


def interactive_session_id(display: str | None) -> int:
    """The desktop session the broker injects into (see the module docstring).

    ``display`` is the X display on Linux (required there) and ignored on Windows. Raises
    :class:`IdentityError` when it cannot be determined.
    """
    if sys.platform == "win32":
        import ctypes

        session = ctypes.c_ulong(0)
        if not ctypes.windll.kernel32.ProcessIdToSessionId(os.getpid(), ctypes.byref(session)):
            raise IdentityError("ProcessIdToSessionId failed")
        return int(session.value)
    if display is None:
        raise IdentityError("an X display is required to name the interactive session on Linux")
    return display_number(display)


def package_sha256(root: Path = _PACKAGE_DIR) -> str:
    """SHA-256 over the broker package's files (the default deployment manifest digest).

    The digest input is one line ``<relative posix path>\\0<sha256 of the file>\\n`` per file
    under ``root``, sorted by path; compiled caches (``__pycache__``, ``*.pyc``) are left out
    because they depend on the interpreter, not on the deployed code.
    """
    lines: list[bytes] = []
    for path in sorted(root.rglob("*"), key=lambda item: item.relative_to(root).as_posix()):
        relative = path.relative_to(root)
        if not path.is_file() or _EXCLUDED_DIRS.intersection(relative.parts) or path.suffix in _EXCLUDED_SUFFIXES:
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{relative.as_posix()}\0{digest}\n".encode())
    return hashlib.sha256(b"".join(lines)).hexdigest()


def manifest_sha256(manifest: Path | None) -> str:
    """SHA-256 of ``manifest``'s bytes, or :func:`package_sha256` when it is None.

    Raises :class:`IdentityError` if the manifest cannot be read.
    """
    if manifest is None:
        return package_sha256()
    try:
        return hashlib.sha256(manifest.read_bytes()).hexdigest()
    except OSError as exc:
        raise IdentityError(f"cannot read the manifest {manifest.name}: {exc.strerror or exc}") from exc

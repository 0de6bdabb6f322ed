"""Process environment for opening python-xlib connections (used by PyAutoGUI and window checks).

python-xlib reads ``$DISPLAY`` and ``$XAUTHORITY`` from ``os.environ`` when it connects, and
the python3-xlib release that PyAutoGUI installs refuses to connect at all when the
authority file (``$XAUTHORITY`` or ``~/.Xauthority``) does not exist, even to a server that
needs no cookie, such as our private Xvfb. :func:`xlib_environment` sets ``DISPLAY`` for the
duration of a connect and, only when no authority file exists, points ``XAUTHORITY`` at a
placeholder whose single entry matches no display (so no cookie is sent and the server's own
access control decides; an empty file would make python-xlib print a warning to stdout). Callers hold
:data:`X11_ENV_LOCK` implicitly: the context manager takes it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import struct
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

X11_ENV_LOCK = threading.RLock()
"""Serializes temporary changes of DISPLAY/XAUTHORITY in this process."""

_PLACEHOLDER_AUTHORITY: Path | None = None


def _authority_file_exists() -> bool:
    configured = os.environ.get("XAUTHORITY")
    if configured:
        return Path(configured).is_file()
    home = os.environ.get("HOME")
    return home is not None and (Path(home) / ".Xauthority").is_file()


def _placeholder_entry() -> bytes:
    """One Xauthority record (FamilyLocal, a host name no machine has, display 65535)."""

    def field(value: bytes) -> bytes:
        return struct.pack(">H", len(value)) + value

    family_local = 256
    return (
        struct.pack(">H", family_local)
        + field(b"autocad-bench.invalid")
        + field(b"65535")
        + field(b"MIT-MAGIC-COOKIE-1")
        + field(bytes(16))
    )


def _placeholder_authority() -> Path:
    global _PLACEHOLDER_AUTHORITY
    if _PLACEHOLDER_AUTHORITY is None or not _PLACEHOLDER_AUTHORITY.is_file():
        fd, name = tempfile.mkstemp(prefix="autocad-bench-xauth-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(_placeholder_entry())
        _PLACEHOLDER_AUTHORITY = Path(name)
        atexit.register(_remove_placeholder_authority)
    return _PLACEHOLDER_AUTHORITY


def _remove_placeholder_authority() -> None:
    if _PLACEHOLDER_AUTHORITY is not None:
        with contextlib.suppress(OSError):
            _PLACEHOLDER_AUTHORITY.unlink()


@contextmanager
def xlib_environment(display: str) -> Iterator[None]:
    """Within the block, ``$DISPLAY`` is ``display`` and an authority file exists."""
    with X11_ENV_LOCK:
        saved = {key: os.environ.get(key) for key in ("DISPLAY", "XAUTHORITY")}
        os.environ["DISPLAY"] = display
        if not _authority_file_exists():
            os.environ["XAUTHORITY"] = str(_placeholder_authority())
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

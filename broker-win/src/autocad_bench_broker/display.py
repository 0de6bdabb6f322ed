"""A private Xvfb display for one rollout (Linux stand-in desktop).

:class:`XvfbDisplay` starts ``Xvfb -displayfd`` so the server itself picks a free display
number and reports it once it accepts connections; the server runs in its own process group
so stopping it cannot touch anything else. Used by tests and by the local-xvfb backend.

The server starts without the GLX extension. Initialising GLX is most of an Xvfb start: it
loads Mesa's software rasteriser and, with it, LLVM (about 200 MB of shared libraries), so a
start with GLX reads about 36 MB from disk when the page cache is cold (6.5 MB without) and
takes about three times the wall time and CPU time. Nothing on these desktops draws with
OpenGL (LibreCAD paints with QPainter; frames are read with XGetImage), and a Qt application
falls back to raster windows by itself; LibreCAD's window is pixel-identical with and without.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from autocad_bench_broker.errors import DisplayError
from autocad_bench_broker.procgroup import GroupKillOutcome, kill_process_group

STARTUP_TIMEOUT_S = 10.0
"""How long ``start()`` waits by default for Xvfb to report its display (the documented bound
of docs/local-xvfb.md, ``xvfb_timeout_s``). A start normally takes 0.1 to 0.5 s, also cold
and on a loaded machine; the bound is for a machine that stalls, not for a slow Xvfb."""


class XvfbDisplay:
    """One Xvfb server (``:N``) of a fixed size, started on a free display number.

    ``start()`` waits at most ``startup_timeout_s`` for Xvfb to report its display number
    and raises :class:`DisplayError` if the binary is missing, exits early or stays silent
    (the half-started server is killed). ``stop()`` kills the server's process group within
    a bound and is idempotent. Use as a context manager to guarantee the stop.
    """

    def __init__(
        self,
        width: int = 1920,
        height: int = 1080,
        depth: int = 24,
        *,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        executable: str = "Xvfb",
        log_path: Path | None = None,
    ) -> None:
        self.width = width
        self.height = height
        self.depth = depth
        self.startup_timeout_s = startup_timeout_s
        self.executable = executable
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._number: int | None = None
        self.startup_s: float | None = None

    @property
    def number(self) -> int:
        """The display number N; raises :class:`DisplayError` before ``start()``."""
        if self._number is None:
            raise DisplayError("the Xvfb display is not started")
        return self._number

    @property
    def name(self) -> str:
        """The ``DISPLAY`` value, e.g. ``":3"``."""
        return f":{self.number}"

    @property
    def pid(self) -> int | None:
        """PID (and process group id) of the Xvfb server, None when not started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self, displayfd: int) -> list[str]:
        """The Xvfb command line (private: no TCP, no reset when the last client leaves, no GLX)."""
        return [
            self.executable,
            "-displayfd",
            str(displayfd),
            "-screen",
            "0",
            f"{self.width}x{self.height}x{self.depth}",
            "-nolisten",
            "tcp",
            "-noreset",
            "-extension",
            "GLX",
        ]

    def start(self) -> str:
        """Start the server and return its ``DISPLAY`` name (bounded by ``startup_timeout_s``)."""
        if self._proc is not None:
            raise DisplayError("this XvfbDisplay was already started")
        if shutil.which(self.executable) is None:
            raise DisplayError(f"{self.executable!r} not found on PATH (apt-get install xvfb)")
        started = time.monotonic()
        read_fd, write_fd = os.pipe()
        log: IO[bytes] | int = subprocess.DEVNULL
        try:
            if self.log_path is not None:
                log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
            self._proc = subprocess.Popen(
                self.command(write_fd),
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read_fd)
            raise DisplayError(f"cannot start Xvfb: {exc}") from exc
        finally:
            os.close(write_fd)
            if not isinstance(log, int):
                log.close()
        try:
            self._number = self._read_display_number(read_fd, started)
        except DisplayError:
            self.stop()
            raise
        finally:
            os.close(read_fd)
        self.startup_s = time.monotonic() - started
        return self.name

    def _read_display_number(self, read_fd: int, started: float) -> int:
        assert self._proc is not None
        deadline = started + self.startup_timeout_s
        buffer = b""
        while not buffer.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DisplayError(f"Xvfb did not report a display within {self.startup_timeout_s:.1f} s")
            ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.1))
            if ready:
                chunk = os.read(read_fd, 64)
                if not chunk:  # every writer closed: Xvfb exited
                    break
                buffer += chunk
            elif self._proc.poll() is not None:
                break
        text = buffer.decode(errors="replace").strip()
        if not text.isdigit():
            code = self._proc.poll()
            raise DisplayError(f"Xvfb exited (status {code}) before reporting a display: {text!r}")
        return int(text)

    def stop(self, timeout_s: float = 5.0) -> GroupKillOutcome | None:
        """Kill the server's process group (SIGTERM, then SIGKILL) and reap it; idempotent.

        Returns what was done, or None if the display was never started. Raises
        :class:`DisplayError` only if a process of the group survived SIGKILL. A SIGKILLed
        server leaves its ``/tmp/.X{N}-lock`` behind; Xvfb itself reclaims locks of dead PIDs.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        outcome = kill_process_group(proc.pid, leader=proc, term_timeout_s=timeout_s, kill_timeout_s=timeout_s)
        if not outcome.gone:
            raise DisplayError(f"Xvfb processes survived SIGKILL: {outcome.remaining_pids}")
        return outcome

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

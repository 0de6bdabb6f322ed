"""What the real broker keeps per session besides the protocol state.

The protocol state of a session (identity, replay caches, frames, checkpoints) is
:class:`autocad_bench.broker.service.Session`, shared with the test fake; its ``desktop``
field is a :class:`SessionDesktop`: the session's on-disk storage and the PNG of its latest
frame. Mutated only on the event loop or by the one worker thread that holds the desktop.
"""

from __future__ import annotations

from dataclasses import dataclass

from autocad_bench_broker.drivers.capture import PngImage
from autocad_bench_broker.store import SessionFiles


@dataclass(eq=False)
class SessionDesktop:
    """The desktop side of one session: its files and the latest frame's PNG."""

    files: SessionFiles
    last_png: PngImage | None = None
    """The PNG of the latest frame: served from memory and reused when the next frame has
    identical pixels."""


__all__ = ["SessionDesktop"]

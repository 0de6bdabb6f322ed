"""Screen capture: raw frames, their SHA-256, PNG encoding and the post-action stability poll.

A :class:`Frame` is the whole desktop as packed RGB bytes plus its size and the SHA-256 of
those bytes (computed once at capture; two frames are pixel-identical exactly when their
digests match). :func:`encode_png` turns a frame into the PNG the model and the trace see,
with the SHA-256 of the PNG bytes. :func:`stable_frame` polls until the desktop stops
changing, within a bound, and never raises once it has a frame.

PNG compression level: 6 (Pillow's default) is the broker default. Measured here (2 cores,
1920x1080 LibreCAD frames, median of 7 encodes):

=========  ==========================  ===========================
level      near-empty drawing          busy drawing (250 entities)
=========  ==========================  ===========================
0          33 ms, 6078 KiB             34 ms, 6078 KiB
1          31 ms, 95 KiB               42 ms, 257 KiB
3          32 ms, 92 KiB               48 ms, 224 KiB
4          41 ms, 75 KiB               52 ms, 203 KiB
6          42 ms, 74 KiB               73 ms, 183 KiB
9          98 ms, 72 KiB               408 ms, 172 KiB
optimize   101 ms, 72 KiB              363 ms, 172 KiB
=========  ==========================  ===========================

Level 6 costs 10-30 ms more than level 1 per frame but is 20-30 % smaller. A frame is
encoded once per action batch and then crosses the tunnel, is stored in the trace and is
re-sent in model requests whose byte size is capped (request-size guards, compaction
thresholds), while a model turn takes seconds: bytes matter more than 30 ms. Level 9 and
``optimize`` cost 2-5x the time for another 1-6 %, so they are not worth it.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from autocad_bench_broker.errors import CaptureError

if TYPE_CHECKING:
    from PIL import Image

DEFAULT_PNG_COMPRESS_LEVEL = 6


@dataclass(frozen=True, slots=True)
class Frame:
    """One capture of the whole display: packed 8-bit RGB rows, top-left origin.

    ``sha256`` is the hex digest of ``rgb``; ``captured_at`` is ``time.monotonic()`` at grab.
    """

    width: int
    height: int
    rgb: bytes = field(repr=False)
    sha256: str
    captured_at: float

    @classmethod
    def from_rgb(cls, width: int, height: int, rgb: bytes, captured_at: float | None = None) -> Frame:
        """Build a frame from packed RGB bytes; raises ValueError if the length is wrong."""
        if len(rgb) != width * height * 3:
            raise ValueError(f"expected {width * height * 3} RGB bytes, got {len(rgb)}")
        return cls(
            width=width,
            height=height,
            rgb=rgb,
            sha256=hashlib.sha256(rgb).hexdigest(),
            captured_at=time.monotonic() if captured_at is None else captured_at,
        )

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    def to_image(self) -> Image.Image:
        """The frame as a Pillow RGB image (shares no memory with the frame)."""
        from PIL import Image

        return Image.frombytes("RGB", self.size, self.rgb)


@dataclass(frozen=True, slots=True)
class PngImage:
    """An encoded screenshot: PNG bytes, their SHA-256, size and the encode cost."""

    data: bytes = field(repr=False)
    sha256: str
    width: int
    height: int
    frame_sha256: str
    compress_level: int
    encode_ms: float

    media_type = "image/png"


def encode_png(frame: Frame, compress_level: int = DEFAULT_PNG_COMPRESS_LEVEL) -> PngImage:
    """Encode ``frame`` as PNG with zlib ``compress_level`` (0-9); see the module docstring."""
    from PIL import Image

    if not 0 <= compress_level <= 9:
        raise ValueError("compress_level must be between 0 and 9")
    started = time.perf_counter()
    image = Image.frombuffer("RGB", frame.size, frame.rgb, "raw", "RGB", 0, 1)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=compress_level)
    data = out.getvalue()
    return PngImage(
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        width=frame.width,
        height=frame.height,
        frame_sha256=frame.sha256,
        compress_level=compress_level,
        encode_ms=(time.perf_counter() - started) * 1000.0,
    )


@runtime_checkable
class ScreenCapture(Protocol):
    """Grabs the whole desktop. ``grab()`` raises :class:`CaptureError` when it cannot."""

    @property
    def size(self) -> tuple[int, int]:
        """Width and height of the captured desktop in pixels."""
        ...

    def grab(self) -> Frame:
        """Capture the desktop now."""
        ...

    def close(self) -> None:
        """Release the connection to the display; idempotent."""
        ...


class MssCapture:
    """:class:`ScreenCapture` with mss on one display (``":N"`` on X11, None on Windows).

    The mss connection is opened on first use. ``monitor`` 0 is the union of all monitors,
    1 the first monitor (the default; on Xvfb and a single-monitor console they are equal).
    Calls are serialized by mss itself, so one instance may be shared between threads.
    """

    def __init__(self, display: str | None = None, *, monitor: int = 1) -> None:
        self.display = display
        self.monitor = monitor
        self._mss: Any = None

    def _session(self) -> Any:
        if self._mss is None:
            try:
                import mss
            except ImportError as exc:  # pragma: no cover - mss is a declared dependency
                raise CaptureError(f"mss is not installed: {exc}") from exc
            kwargs: dict[str, Any] = {}
            if self.display is not None:
                kwargs["display"] = self.display
            try:
                self._mss = mss.MSS(**kwargs)
            except Exception as exc:
                raise CaptureError(f"cannot open display {self.display!r}: {exc}") from exc
        return self._mss

    @property
    def size(self) -> tuple[int, int]:
        session = self._session()
        try:
            mon = session.monitors[self.monitor]
        except Exception as exc:
            raise CaptureError(f"cannot read monitor {self.monitor}: {exc}") from exc
        return int(mon["width"]), int(mon["height"])

    def grab(self) -> Frame:
        from PIL import Image

        session = self._session()
        try:
            shot = session.grab(session.monitors[self.monitor])
        except Exception as exc:
            raise CaptureError(f"screen grab on {self.display!r} failed: {exc}") from exc
        captured_at = time.monotonic()
        width, height = int(shot.width), int(shot.height)
        # mss returns BGRX rows; Pillow's C unpacker converts them far faster than slicing.
        rgb = Image.frombuffer("RGB", (width, height), shot.bgra, "raw", "BGRX", 0, 1).tobytes()
        return Frame.from_rgb(width, height, rgb, captured_at)

    def close(self) -> None:
        session, self._mss = self._mss, None
        if session is not None:
            session.close()


@dataclass(frozen=True, slots=True)
class StabilityPolicy:
    """Bounds of :func:`stable_frame`.

    ``settle_s`` is waited before the first grab (the application needs a moment to react to
    input, and two early identical grabs would otherwise pass for a settled screen);
    ``interval_s`` separates grabs; ``window_s`` bounds the whole poll from its start.
    """

    window_s: float = 1.5
    interval_s: float = 0.1
    settle_s: float = 0.1


def stable_frame(
    capture: ScreenCapture,
    policy: StabilityPolicy = StabilityPolicy(),
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Frame, bool]:
    """Grab until two consecutive frames are identical; return ``(frame, stable)``.

    Returns the later frame of an identical pair with ``stable=True``, or the freshest frame
    with ``stable=False`` once ``policy.window_s`` has passed. Grab errors inside the window
    are tolerated (the freshest good frame is returned). Raises :class:`CaptureError` only if
    no frame at all could be grabbed within the window: there is then nothing to return.
    """
    started = clock()
    deadline = started + policy.window_s
    if policy.settle_s > 0:
        sleep(min(policy.settle_s, policy.window_s))
    previous: Frame | None = None
    last_error: CaptureError | None = None
    while True:
        try:
            current = capture.grab()
        except CaptureError as exc:
            last_error = exc
        else:
            if previous is not None and current.sha256 == previous.sha256:
                return current, True
            previous = current
        if clock() >= deadline:
            break
        sleep(max(0.0, min(policy.interval_s, deadline - clock())))
    if previous is None:
        raise CaptureError(f"no frame within {policy.window_s:.2f} s: {last_error}")
    return previous, False

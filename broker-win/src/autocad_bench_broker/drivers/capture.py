"""Screen capture: raw frames, their SHA-256, PNG encoding and the post-action stability poll.

A :class:`Frame` is the whole desktop as packed RGB bytes plus its size and the SHA-256 of
those bytes (computed once at capture; two frames are pixel-identical exactly when their
digests match). :func:`encode_png` turns a frame into the PNG the model and the trace see,
with the SHA-256 of the PNG bytes. :func:`stable_frame` polls until the desktop stops
changing, within a bound, and never raises once it has a frame.

The poll compares *raw* grabs (:class:`RawGrab`): a capture that offers ``grab_raw()``
(:class:`MssCapture` does) hands over the pixels as the capture library returned them, and
two raw grabs are compared with one ``memcmp``. Only the grab the poll returns is converted
to a :class:`Frame` (BGRX to RGB, SHA-256). Measured with 1920x1080 LibreCAD frames on Xvfb
(2 cores, a VM): a raw grab compared with the previous one costs 3-4 ms, a converted grab
9-15 ms (unpack and pack 3 ms, SHA-256 4 ms, and fresh 6-8 MB buffers whose page faults
cost up to 10 ms more on a VM), so each extra grab of a poll saves 6-10 ms or more.

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

import functools
import hashlib
import io
import threading
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
    _check_level(compress_level)
    started = time.perf_counter()
    data = _png_bytes(frame.to_image(), compress_level)
    return _png_image(data, frame, compress_level, started)


def _check_level(compress_level: int) -> None:
    if not 0 <= compress_level <= 9:
        raise ValueError("compress_level must be between 0 and 9")


def _png_bytes(image: Image.Image, compress_level: int) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=compress_level)
    return out.getvalue()


def _png_image(data: bytes, frame: Frame, compress_level: int, started: float) -> PngImage:
    return PngImage(
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        width=frame.width,
        height=frame.height,
        frame_sha256=frame.sha256,
        compress_level=compress_level,
        encode_ms=(time.perf_counter() - started) * 1000.0,
    )


class RawGrab:
    """One grab before its conversion to a :class:`Frame`: cheap to take and to compare.

    ``key`` decides pixel identity between grabs of one capture: two grabs show identical
    pixels exactly when their sizes and keys are equal (for :class:`MssCapture` the key is
    the BGRX bytes with the unused fourth byte zeroed, so equal keys mean equal RGB; for a
    capture that only has ``grab()``, the frame's SHA-256). ``unpack`` returns the grab as
    an RGB Pillow image. :meth:`frame` and :meth:`frame_and_png` convert on their first call
    only and return that same frame afterwards; all methods are thread-safe.
    """

    __slots__ = ("_frame", "_image", "_lock", "_unpack", "captured_at", "height", "key", "width")

    def __init__(
        self,
        width: int,
        height: int,
        key: bytes | bytearray | str,
        captured_at: float,
        unpack: Callable[[], Image.Image],
    ) -> None:
        self.width = width
        self.height = height
        self.key = key
        self.captured_at = captured_at
        self._unpack = unpack
        self._frame: Frame | None = None
        self._image: Image.Image | None = None  # unpacked by frame(), kept for one encode
        self._lock = threading.Lock()

    @classmethod
    def of_frame(cls, frame: Frame) -> RawGrab:
        """A grab that is already converted (the fallback for captures without ``grab_raw``)."""
        grab = cls(frame.width, frame.height, frame.sha256, frame.captured_at, frame.to_image)
        grab._frame = frame
        return grab

    def same_pixels(self, other: RawGrab) -> bool:
        """True when ``other`` shows exactly the same pixels (one ``memcmp`` at most)."""
        return self.width == other.width and self.height == other.height and self.key == other.key

    @property
    def converted(self) -> bool:
        return self._frame is not None

    def frame(self) -> Frame:
        """The grab as a :class:`Frame` (RGB and SHA-256); converted once, then cached."""
        with self._lock:
            if self._frame is None:
                image = self._image = self._unpack()
                self._frame = Frame.from_rgb(self.width, self.height, image.tobytes(), self.captured_at)
            return self._frame

    def png(self, compress_level: int = DEFAULT_PNG_COMPRESS_LEVEL) -> PngImage:
        """This grab as PNG: the same bytes as ``encode_png(self.frame(), compress_level)``."""
        return self.frame_and_png(compress_level)[1]

    def frame_and_png(self, compress_level: int = DEFAULT_PNG_COMPRESS_LEVEL) -> tuple[Frame, PngImage]:
        """Convert (once) and encode: ``(self.frame(), encode_png(self.frame(), level))``.

        The PNG is compressed from the Pillow image of the conversion (RGB is not unpacked
        twice). On a first conversion the SHA-256 of the RGB bytes is computed in a helper
        thread while the PNG is compressed: both release the GIL.
        """
        _check_level(compress_level)
        with self._lock:
            started = time.perf_counter()
            frame, image, self._image = self._frame, self._image, None
            if frame is not None:
                data = _png_bytes(image if image is not None else frame.to_image(), compress_level)
                return frame, _png_image(data, frame, compress_level, started)
            image = self._unpack()
            rgb = image.tobytes()
            if len(rgb) != self.width * self.height * 3:
                raise ValueError(f"expected {self.width * self.height * 3} RGB bytes, got {len(rgb)}")
            digest: list[str] = []
            hasher = threading.Thread(
                target=lambda: digest.append(hashlib.sha256(rgb).hexdigest()), name="frame-sha256", daemon=True
            )
            try:
                hasher.start()
            except RuntimeError:  # no thread available: hash in this one
                hasher.run()
            try:
                data = _png_bytes(image, compress_level)
            finally:
                if hasher.ident is not None:
                    hasher.join()
            sha256 = digest[0] if digest else hashlib.sha256(rgb).hexdigest()
            frame = self._frame = Frame(self.width, self.height, rgb, sha256, self.captured_at)
            return frame, _png_image(data, frame, compress_level, started)

    def frame_like(self, twin: RawGrab) -> Frame:
        """This grab's frame, reusing ``twin``'s conversion when ``twin`` shows the same pixels.

        Identical pixels give identical RGB bytes and digest, so an already converted twin
        saves the conversion; the frame keeps this grab's own ``captured_at``.
        """
        if twin.converted and self.same_pixels(twin):
            done = twin.frame()
            with self._lock:
                if self._frame is None:
                    self._frame = Frame(done.width, done.height, done.rgb, done.sha256, self.captured_at)
        return self.frame()


def grab_raw(capture: ScreenCapture) -> RawGrab:
    """One raw grab: ``capture.grab_raw()`` when the capture has it, else ``grab()`` wrapped.

    Raises :class:`CaptureError` as the capture does.
    """
    method = getattr(capture, "grab_raw", None)
    if method is not None:
        grab = method()
        if not isinstance(grab, RawGrab):
            raise CaptureError(f"{type(capture).__name__}.grab_raw returned {type(grab).__name__}")
        return grab
    return RawGrab.of_frame(capture.grab())


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


_ZEROS: bytes = b""


def _zeros(count: int) -> bytes:
    """``count`` zero bytes, kept between grabs (a fresh buffer per grab would page-fault)."""
    global _ZEROS
    zeros = _ZEROS
    if len(zeros) != count:
        zeros = _ZEROS = bytes(count)
    return zeros


def _bgrx_image(width: int, height: int, bgrx: bytes | bytearray) -> Image.Image:
    """Packed BGRX rows as a Pillow RGB image (Pillow's C unpacker, far faster than slicing)."""
    from PIL import Image

    return Image.frombuffer("RGB", (width, height), bgrx, "raw", "BGRX", 0, 1)


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
        return self.grab_raw().frame()

    def grab_raw(self) -> RawGrab:
        """Grab without converting: the BGRX bytes, fourth byte zeroed, as the grab's key.

        mss does not define the fourth byte (X11 padding, or a Windows alpha that some
        applications leave behind), and RGB ignores it; zeroing it (under 1 ms at 1920x1080)
        makes "equal keys" mean exactly "equal RGB pixels".
        """
        session = self._session()
        try:
            shot = session.grab(session.monitors[self.monitor])
        except Exception as exc:
            raise CaptureError(f"screen grab on {self.display!r} failed: {exc}") from exc
        captured_at = time.monotonic()
        width, height = int(shot.width), int(shot.height)
        data = shot.raw  # a bytearray of our own: mss copies out of its buffer on each grab
        if not isinstance(data, bytearray):
            data = bytearray(data)
        if len(data) != width * height * 4:
            raise CaptureError(f"screen grab on {self.display!r}: {len(data)} bytes for {width}x{height} BGRX")
        data[3::4] = _zeros(width * height)
        return RawGrab(width, height, data, captured_at, functools.partial(_bgrx_image, width, height, data))

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
    Raw grabs are only 3-4 ms apart with ``interval_s=0``: with ``settle_s=0`` too, a poll
    regularly ends before LibreCAD redraws its crosshair, 10-20 ms after a pointer move.
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
    Grabs are compared raw (:func:`grab_raw`); only the returned one is converted.
    """
    started = clock()
    deadline = started + policy.window_s
    if policy.settle_s > 0:
        sleep(min(policy.settle_s, policy.window_s))
    previous: RawGrab | None = None
    last_error: CaptureError | None = None
    while True:
        try:
            current = grab_raw(capture)
        except CaptureError as exc:
            last_error = exc
        else:
            if previous is not None and current.same_pixels(previous):
                return current.frame(), True
            previous = current
        if clock() >= deadline:
            break
        sleep(max(0.0, min(policy.interval_s, deadline - clock())))
    if previous is None:
        raise CaptureError(f"no frame within {policy.window_s:.2f} s: {last_error}")
    return previous.frame(), False

"""Blocking desktop work of the server, and how it is run off the event loop.

- :func:`run_blocking` runs one blocking call in a fresh *daemon* thread and awaits it. The
  server never calls the input driver, the capture or the application adapter on the event
  loop. Daemon threads (rather than ``asyncio.to_thread``'s pool) keep shutdown bounded: a
  batch that is still sleeping through ``wait`` actions, or an adapter stuck in a launch,
  cannot hold the process open after the server has stopped.
- :func:`inject_batch` injects a validated batch in order through an
  :class:`~autocad_bench_broker.drivers.input.InputDriver` and returns one receipt per
  action. It never raises: the first failing action stops the batch (``ok=false`` with the
  error), later actions are ``not attempted``.
- :func:`settle_and_encode` is the post-action stability poll with the PNG encoding
  pipelined into it: the same rule as
  :func:`~autocad_bench_broker.drivers.capture.stable_frame` (grab until two consecutive
  grabs are pixel-identical, within ``policy.window_s``; otherwise the freshest frame with
  ``stable=False``). Grabs are compared raw; only the returned grab is converted to RGB and
  hashed, and not even that one when it shows the pixels of the PNG being reused. When the
  poll sleeps between grabs (``interval_s > 0``), the previous grab is converted and
  encoded in a second thread meanwhile, so when the pair matches the PNG is usually ready
  and the encode costs no extra latency. At most one speculative encode is in flight.
  With ``interval_s == 0`` nothing is speculated: the next grab follows at once, so a
  speculative encode could save at most one raw grab (1-4 ms) while it competes for the
  CPU with the poll and with the application's redraw (measured: slower on 2 cores).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from autocad_bench.actions import Action
from autocad_bench.broker.protocol import ActionReceipt
from autocad_bench.broker.service.events import describe_error
from autocad_bench_broker.drivers.capture import (
    DEFAULT_PNG_COMPRESS_LEVEL,
    Frame,
    PngImage,
    RawGrab,
    ScreenCapture,
    StabilityPolicy,
    grab_raw,
)
from autocad_bench_broker.drivers.dispatch import apply_action
from autocad_bench_broker.drivers.input import InputDriver
from autocad_bench_broker.errors import BrokerError, CaptureError

T = TypeVar("T")

NOT_ATTEMPTED = "not attempted"


class Interrupted(BrokerError):
    """A ``wait`` action or a stability poll was cut short because the broker is stopping."""


async def run_blocking(func: Callable[[], T], *, name: str = "broker-desktop") -> T:
    """Run ``func()`` in a new daemon thread and return (or raise) its result.

    Cancelling the awaiting task does not stop the thread (nothing can, safely); the result
    is then dropped. Callers that must keep the result whatever happens to the request
    shield the surrounding operation instead.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(outcome: Callable[[], None]) -> None:
        # The loop may already be closed when a straggling thread finishes during shutdown.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(outcome)

    def settle_result(value: T) -> None:
        if not future.done():
            future.set_result(value)

    def settle_error(error: BaseException) -> None:
        if not future.done():
            future.set_exception(error)

    def work() -> None:
        try:
            value = func()
        except BaseException as error:  # delivered to the awaiting task, never lost
            # Bound now: Python unbinds the ``except`` name when the clause ends.
            deliver(functools.partial(settle_error, error))
        else:
            deliver(functools.partial(settle_result, value))

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


def interruptible_sleep(stop: threading.Event) -> Callable[[float], None]:
    """A ``sleep`` that raises :class:`Interrupted` as soon as ``stop`` is set."""

    def sleep(seconds: float) -> None:
        if stop.wait(max(seconds, 0.0)):
            raise Interrupted("the broker is shutting down")

    return sleep


def inject_batch(
    driver: InputDriver,
    actions: Sequence[Action],
    first_index: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
    after_wait: Callable[[], object] | None = None,
) -> tuple[ActionReceipt, ...]:
    """Inject ``actions`` in order; one receipt per action, indices from ``first_index``.

    ``injected_at`` is taken when the driver call returned (the input has reached the
    desktop). On the first exception the batch stops: that receipt carries ``ok=false`` and
    the error, the rest ``ok=false``/``not attempted`` with no ``injected_at``. ``stop``
    (shutdown) makes the remaining actions ``not attempted`` as well. Never raises.
    """
    receipts: list[ActionReceipt] = []
    stopped = False
    for offset, action in enumerate(actions):
        index = first_index + offset
        if not stopped and stop is not None and stop.is_set():
            stopped = True
            receipts.append(
                ActionReceipt(
                    index=index,
                    type=action.type,
                    injected_at=None,
                    ok=False,
                    error=f"{NOT_ATTEMPTED}: the broker is shutting down",
                )
            )
            continue
        if stopped:
            receipts.append(
                ActionReceipt(index=index, type=action.type, injected_at=None, ok=False, error=NOT_ATTEMPTED)
            )
            continue
        try:
            apply_action(driver, action, sleep=sleep, after_wait=after_wait)
        except Exception as error:  # the input may have been (partly) delivered: stop here
            stopped = True
            receipts.append(
                ActionReceipt(index=index, type=action.type, injected_at=None, ok=False, error=describe_error(error))
            )
            continue
        receipts.append(ActionReceipt(index=index, type=action.type, injected_at=datetime.now(UTC), ok=True))
    return tuple(receipts)


@dataclass(frozen=True, slots=True)
class SettledFrame:
    """Result of :func:`settle_and_encode`: the frame, its PNG and whether pixels settled.

    ``pointer`` is where the desktop's pointer was right after the returned grab (``None``
    when no reader was given or it could not tell).
    """

    frame: Frame
    png: PngImage
    stable: bool
    grabs: int
    elapsed_s: float
    pointer: tuple[int, int] | None = None


def read_pointer_safely(read: Callable[[], tuple[int, int] | None] | None) -> tuple[int, int] | None:
    """``read()``, or ``None`` if there is no reader or it failed (a frame never fails on it)."""
    if read is None:
        return None
    try:
        position = read()
    except Exception:  # the pointer is evidence for the model; the frame must still be answered
        return None
    if position is None:
        return None
    return (int(position[0]), int(position[1]))


_SOURCES_KEPT = 2
_sources: OrderedDict[int, tuple[PngImage, RawGrab]] = OrderedDict()
_sources_lock = threading.Lock()


def _remember(png: PngImage, grab: RawGrab) -> None:
    """Keep the (converted) grab that ``png`` was encoded from, for the next batch's reuse.

    The server hands the PNG of a session's last frame back as ``reuse``; knowing its grab
    lets the next poll tell with one ``memcmp`` whether the screen is unchanged (reuse, no
    conversion) or changed (encode at once, no SHA-256 needed first). Only the last
    ``_SOURCES_KEPT`` PNGs are remembered (about 14 MB each at 1920x1080).
    """
    with _sources_lock:
        _sources[id(png)] = (png, grab)
        _sources.move_to_end(id(png))
        while len(_sources) > _SOURCES_KEPT:
            _sources.popitem(last=False)


def _source_of(png: PngImage) -> RawGrab | None:
    """The grab ``png`` was encoded from, if remembered (matched by identity, not by value)."""
    with _sources_lock:
        entry = _sources.get(id(png))
    return entry[1] if entry is not None and entry[0] is png else None


def settle_and_encode(
    capture: ScreenCapture,
    policy: StabilityPolicy,
    encoder: ThreadPoolExecutor,
    *,
    compress_level: int = DEFAULT_PNG_COMPRESS_LEVEL,
    reuse: PngImage | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    read_pointer: Callable[[], tuple[int, int] | None] | None = None,
) -> SettledFrame:
    """Poll ``capture`` until two consecutive grabs are identical; return the frame as PNG.

    Same bounds and outcome as ``stable_frame``: ``policy.settle_s`` before the first grab,
    ``policy.interval_s`` between grabs, ``policy.window_s`` for everything; grab errors are
    tolerated inside the window. Raises :class:`CaptureError` only if no frame at all could
    be grabbed (and :class:`Interrupted` if ``sleep`` raises it). Grabs are compared raw and
    only the returned one is converted, unless a speculative encode (``interval_s > 0``
    only; ``encoder`` runs it, one worker is enough) already converted an identical grab.
    ``reuse`` is the PNG of the previous frame: a frame with the same pixels
    (``PngImage.frame_sha256``) is not encoded again, since the encoder is deterministic
    (many actions leave the screen unchanged). When ``reuse`` is a PNG this function
    returned recently, its grab is remembered and compared raw: an unchanged screen is then
    not converted at all, and a changed one is encoded without waiting for its SHA-256.

    ``read_pointer`` (the input driver's ``pointer``) is called right after every successful
    grab, so the returned frame carries the pointer position of its own grab
    (:attr:`SettledFrame.pointer`); a failing reader only makes that ``None``.
    """
    started = clock()
    deadline = started + policy.window_s
    if policy.settle_s > 0:
        sleep(min(policy.settle_s, policy.window_s))
    speculate = policy.interval_s > 0
    previous: RawGrab | None = None
    previous_pointer: tuple[int, int] | None = None
    pending: tuple[RawGrab, Future[tuple[Frame, PngImage]]] | None = None  # (grab, its frame and PNG)
    last_error: CaptureError | None = None
    grabs = 0
    if reuse is not None and reuse.compress_level != compress_level:
        reuse = None
    source = _source_of(reuse) if reuse is not None else None

    def encode(grab: RawGrab) -> tuple[Frame, PngImage]:
        if reuse is not None:
            if source is None:
                frame = grab.frame()
                if frame.sha256 == reuse.frame_sha256:
                    return frame, reuse
            elif grab.same_pixels(source):
                return grab.frame_like(source), reuse  # unchanged screen: nothing to convert
            # else: the pixels differ from those of ``reuse``, which therefore cannot serve
        frame, png = grab.frame_and_png(compress_level)
        _remember(png, grab)
        return frame, png

    def settled(grab: RawGrab, stable: bool, pointer: tuple[int, int] | None) -> SettledFrame:
        if pending is not None and pending[0].same_pixels(grab):
            # Identical pixels encode to identical PNG bytes, so the earlier encode serves.
            png = pending[1].result()[1]
            frame = grab.frame_like(pending[0])
        else:
            frame, png = encode(grab)
        return SettledFrame(frame, png, stable, grabs, clock() - started, pointer)

    while True:
        try:
            current = grab_raw(capture)
        except CaptureError as exc:
            last_error = exc
        else:
            grabs += 1
            pointer = read_pointer_safely(read_pointer)
            if previous is not None and current.same_pixels(previous):
                return settled(current, True, pointer)
            previous, previous_pointer = current, pointer
            if speculate and (pending is None or pending[1].done()):
                pending = (current, encoder.submit(encode, current))
        if clock() >= deadline:
            break
        sleep(max(0.0, min(policy.interval_s, deadline - clock())))
    if previous is None:
        raise CaptureError(f"no frame within {policy.window_s:.2f} s: {last_error}")
    return settled(previous, False, previous_pointer)

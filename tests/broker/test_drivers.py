"""Input and capture drivers: argument checks, action dispatch, PNG encoding, stability poll,
and (integration) real PyAutoGUI input and mss capture on private Xvfb displays."""

from __future__ import annotations

import hashlib
import io
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from PIL import Image

from autocad_bench.actions import (
    ClickAction,
    DoneAction,
    DragAction,
    KeyAction,
    MoveAction,
    ScrollAction,
    TypeAction,
    WaitAction,
)
from autocad_bench_broker.desktop import settle_and_encode
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.drivers.capture import (
    DEFAULT_PNG_COMPRESS_LEVEL,
    Frame,
    MssCapture,
    RawGrab,
    StabilityPolicy,
    encode_png,
    grab_raw,
    stable_frame,
)
from autocad_bench_broker.drivers.dispatch import apply_action
from autocad_bench_broker.drivers.input import (
    InputDriver,
    PyAutoGUIDriver,
    RecordedCall,
    RecordingDriver,
)
from autocad_bench_broker.errors import CaptureError, InputRejected

from .conftest import needs_xvfb

# -- recording driver and dispatch ------------------------------------------------------------


def test_recording_driver_satisfies_the_protocol() -> None:
    assert isinstance(RecordingDriver(), InputDriver)
    assert isinstance(PyAutoGUIDriver(":0"), InputDriver)


def test_apply_action_maps_every_action_type_to_one_driver_call() -> None:
    driver = RecordingDriver()
    slept: list[float] = []
    actions = [
        MoveAction(x=10, y=20),
        ClickAction(x=5, y=6, button="right", count=2),
        DragAction(path=((1, 1), (50, 60), (70, 80)), button="left"),
        ScrollAction(x=100, y=100, dx=0, dy=-3),
        TypeAction(text="line 0,0"),
        KeyAction(keys=("ctrl", "s")),
        WaitAction(seconds=0.5),
        DoneAction(),
    ]
    for action in actions:
        apply_action(driver, action, sleep=slept.append)
    assert driver.calls == [
        RecordedCall("move", (10, 20)),
        RecordedCall("click", (5, 6, "right", 2)),
        RecordedCall("drag", (((1, 1), (50, 60), (70, 80)), "left")),
        RecordedCall("scroll", (100, 100, 0, -3)),
        RecordedCall("type_text", ("line 0,0",)),
        RecordedCall("hotkey", (("ctrl", "s"),)),
    ]
    assert slept == [0.5]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda d: d.move(1920, 0), "outside"),
        (lambda d: d.click(-1, 5), "outside"),
        (lambda d: d.click(5, 5, "back"), "button"),
        (lambda d: d.click(5, 5, "left", 4), "count"),
        (lambda d: d.drag([(1, 1)]), "two points"),
        (lambda d: d.drag([(1, 1), (5000, 1)]), "outside"),
        (lambda d: d.scroll(5, 5, 0, 0), "non-zero"),
        (lambda d: d.type_text("caf\u00e9"), "printable ASCII"),
        (lambda d: d.type_text("a\nb"), "printable ASCII"),
        (lambda d: d.type_text(""), "empty"),
        (lambda d: d.hotkey(["ctrl", "sleep"]), "unknown key"),
        (lambda d: d.hotkey([]), "no keys"),
    ],
)
def test_drivers_reject_bad_arguments_before_any_event(call, message) -> None:  # type: ignore[no-untyped-def]
    driver = RecordingDriver()
    with pytest.raises(InputRejected, match=message):
        call(driver)
    assert driver.calls == []


def test_pyautogui_driver_rejects_bad_text_and_keys_without_touching_a_display() -> None:
    # No X server listens on this display: a rejection must come before any binding attempt.
    driver = PyAutoGUIDriver(":65000")
    with pytest.raises(InputRejected):
        driver.type_text("\u00fcber")
    with pytest.raises(InputRejected):
        driver.hotkey(["hyper"])


def test_driver_versions_identify_the_implementation() -> None:
    assert PyAutoGUIDriver(":1").version.startswith("autocad-bench-input/1 pyautogui/0.9")
    assert RecordingDriver().version == "autocad-bench-input/1 recording"


# -- frames and PNG ---------------------------------------------------------------------------


def _frame(width: int = 64, height: int = 32, seed: int = 0) -> Frame:
    rgb = bytes((x * 7 + y * 3 + seed) % 256 for y in range(height) for x in range(width * 3))
    return Frame.from_rgb(width, height, rgb, captured_at=0.0)


def test_frame_digest_is_the_sha256_of_its_pixels() -> None:
    frame = _frame()
    assert frame.sha256 == hashlib.sha256(frame.rgb).hexdigest()
    with pytest.raises(ValueError, match="RGB bytes"):
        Frame.from_rgb(10, 10, b"\0" * 299)


@pytest.mark.parametrize("level", [0, 1, DEFAULT_PNG_COMPRESS_LEVEL, 9])
def test_png_round_trips_pixels_and_carries_its_own_digest(level: int) -> None:
    frame = _frame()
    png = encode_png(frame, level)
    assert png.sha256 == hashlib.sha256(png.data).hexdigest()
    assert png.frame_sha256 == frame.sha256
    assert (png.width, png.height, png.compress_level) == (64, 32, level)
    decoded = Image.open(io.BytesIO(png.data))
    assert decoded.format == "PNG"
    assert decoded.convert("RGB").tobytes() == frame.rgb


def test_png_rejects_an_invalid_compress_level() -> None:
    with pytest.raises(ValueError, match="compress_level"):
        encode_png(_frame(), 10)


# -- stability poll ---------------------------------------------------------------------------


class ScriptedCapture:
    """Returns scripted frames (or raises scripted errors) in order, then repeats the last."""

    def __init__(self, script: list[Frame | CaptureError]) -> None:
        self.script = script
        self.grabs = 0

    @property
    def size(self) -> tuple[int, int]:
        return (64, 32)

    def grab(self) -> Frame:
        item = self.script[min(self.grabs, len(self.script) - 1)]
        self.grabs += 1
        if isinstance(item, CaptureError):
            raise item
        return item

    def close(self) -> None:
        pass


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


POLICY = StabilityPolicy(window_s=1.5, interval_s=0.1, settle_s=0.1)


def test_stable_frame_returns_once_two_consecutive_grabs_match() -> None:
    clock = FakeClock()
    capture = ScriptedCapture([_frame(seed=1), _frame(seed=2), _frame(seed=3), _frame(seed=3)])
    frame, stable = stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    assert stable is True
    assert frame.sha256 == _frame(seed=3).sha256
    assert capture.grabs == 4
    assert clock.now == pytest.approx(0.4)


def test_stable_frame_gives_up_in_time_with_the_freshest_frame_and_never_raises() -> None:
    clock = FakeClock()
    frames: list[Frame | CaptureError] = [_frame(seed=i) for i in range(100)]
    capture = ScriptedCapture(frames)
    frame, stable = stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    assert stable is False
    assert frame.sha256 == frames[capture.grabs - 1].sha256  # type: ignore[union-attr]
    assert clock.now == pytest.approx(1.5)
    assert capture.grabs <= 16


def test_stable_frame_tolerates_grab_errors_inside_the_window() -> None:
    clock = FakeClock()
    error = CaptureError("transient")
    capture = ScriptedCapture([error, _frame(seed=5), error, _frame(seed=5), _frame(seed=5)])
    frame, stable = stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    assert stable is True
    assert frame.sha256 == _frame(seed=5).sha256


def test_stable_frame_raises_only_when_no_frame_at_all_was_grabbed() -> None:
    clock = FakeClock()
    capture = ScriptedCapture([CaptureError("display gone")])
    with pytest.raises(CaptureError, match="display gone"):
        stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    assert clock.now == pytest.approx(1.5)


# -- raw grabs: the poll converts only the frame it returns ------------------------------------


class CountingRawCapture:
    """Offers ``grab_raw`` like :class:`MssCapture`; counts raw grabs and conversions.

    ``script`` items are frame seeds (equal seeds, equal pixels) or errors; the last repeats.
    ``grab()`` must not be used by the polls (it would convert every grab).
    """

    def __init__(self, script: list[int | CaptureError]) -> None:
        self.script = script
        self.grabs = 0
        self.conversions: list[int] = []  # the grab number of each conversion

    @property
    def size(self) -> tuple[int, int]:
        return (64, 32)

    def grab(self) -> Frame:
        raise AssertionError("the poll must compare raw grabs, not convert each one")

    def grab_raw(self) -> RawGrab:
        item = self.script[min(self.grabs, len(self.script) - 1)]
        self.grabs += 1
        if isinstance(item, CaptureError):
            raise item
        number, captured_at = self.grabs, float(self.grabs)

        def unpack() -> Image.Image:
            self.conversions.append(number)
            return _frame(seed=item).to_image()

        return RawGrab(64, 32, item.to_bytes(4, "big"), captured_at, unpack)

    def close(self) -> None:
        pass


class InlineExecutor(ThreadPoolExecutor):
    """Runs each submitted call at once, so speculative encodes are deterministic."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_stable_frame_converts_only_the_returned_grab() -> None:
    clock = FakeClock()
    capture = CountingRawCapture([1, 2, 3, 3])
    frame, stable = stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    assert stable is True
    assert frame.sha256 == _frame(seed=3).sha256
    assert frame.captured_at == 4.0  # the later grab of the identical pair
    assert capture.grabs == 4
    assert capture.conversions == [4]
    assert clock.now == pytest.approx(0.4)


def test_stable_frame_timeout_converts_only_the_freshest_grab() -> None:
    clock = FakeClock()
    capture = CountingRawCapture(list(range(100)))
    frame, stable = stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    assert stable is False
    assert frame.sha256 == _frame(seed=capture.grabs - 1).sha256
    assert capture.conversions == [capture.grabs]
    assert clock.now == pytest.approx(1.5)


def test_stable_frame_raw_tolerates_errors_and_raises_only_without_any_grab() -> None:
    clock = FakeClock()
    error = CaptureError("transient")
    capture = CountingRawCapture([error, 5, error, 5, 5])
    frame, stable = stable_frame(capture, POLICY, clock=clock, sleep=clock.sleep)
    # An error between two identical grabs does not break the pair: as with grab().
    assert (stable, frame.sha256, capture.grabs, capture.conversions) == (True, _frame(seed=5).sha256, 4, [4])
    clock = FakeClock()
    with pytest.raises(CaptureError, match="display gone"):
        stable_frame(CountingRawCapture([CaptureError("display gone")]), POLICY, clock=clock, sleep=clock.sleep)


@pytest.mark.parametrize(
    ("script", "stable", "grabs"),
    [([1, 2, 3, 3], True, 4), ([7, 7], True, 2), (list(range(100)), False, None)],
)
def test_raw_and_converting_polls_agree(script: list[int], stable: bool, grabs: int | None) -> None:
    raw_clock, old_clock = FakeClock(), FakeClock()
    raw = CountingRawCapture(list(script))
    old = ScriptedCapture([_frame(seed=seed) for seed in script])
    raw_frame, raw_stable = stable_frame(raw, POLICY, clock=raw_clock, sleep=raw_clock.sleep)
    old_frame, old_stable = stable_frame(old, POLICY, clock=old_clock, sleep=old_clock.sleep)
    assert raw_stable is old_stable is stable
    assert raw_frame.sha256 == old_frame.sha256 and raw_frame.rgb == old_frame.rgb
    assert raw.grabs == old.grabs and (grabs is None or raw.grabs == grabs)
    assert raw_clock.now == pytest.approx(old_clock.now)
    assert len(raw.conversions) == 1


@pytest.mark.parametrize(
    ("script", "stable"),
    [([1, 2, 3, 3], True), ([4, 4], True), (list(range(1000)), False)],
)
def test_settle_and_encode_without_interval_converts_and_encodes_once(script: list[int], stable: bool) -> None:
    capture = CountingRawCapture(list(script))
    policy = StabilityPolicy(window_s=0.05, interval_s=0, settle_s=0)
    with ThreadPoolExecutor(1) as encoder:
        settled = settle_and_encode(capture, policy, encoder)
    assert settled.stable is stable
    assert capture.conversions == [capture.grabs]  # only the returned grab, never speculated
    assert settled.grabs == capture.grabs
    assert settled.png.data == encode_png(settled.frame).data
    assert settled.png.frame_sha256 == settled.frame.sha256 == _frame(seed=script[capture.grabs - 1]).sha256


def test_settle_and_encode_reuses_a_speculative_conversion_for_the_identical_grab() -> None:
    # interval_s > 0: each new grab is converted and encoded while the poll sleeps; the grab
    # that completes the identical pair is served by that work and never converted itself.
    clock = FakeClock()
    capture = CountingRawCapture([1, 2, 2])
    with InlineExecutor(1) as encoder:
        settled = settle_and_encode(capture, POLICY, encoder, clock=clock, sleep=clock.sleep)
    assert settled.stable is True and settled.grabs == 3
    assert capture.conversions == [1, 2]
    assert settled.frame.captured_at == 3.0 and settled.frame.sha256 == _frame(seed=2).sha256
    assert settled.png.data == encode_png(_frame(seed=2)).data


def test_settle_and_encode_reuse_skips_the_encode_of_unchanged_pixels() -> None:
    previous = encode_png(_frame(seed=9))
    capture = CountingRawCapture([9, 9])
    with ThreadPoolExecutor(1) as encoder:
        settled = settle_and_encode(
            capture, StabilityPolicy(window_s=1, interval_s=0, settle_s=0), encoder, reuse=previous
        )
    assert settled.png is previous and settled.stable
    assert capture.conversions == [2]


def test_settle_and_encode_knows_the_grab_behind_its_own_png() -> None:
    # The PNG a poll returns is handed back as ``reuse`` by the server: the next poll then
    # compares raw grabs with its source, so an unchanged screen needs no conversion at all.
    policy = StabilityPolicy(window_s=1, interval_s=0, settle_s=0)
    with ThreadPoolExecutor(1) as encoder:
        first_capture = CountingRawCapture([1, 1])
        first = settle_and_encode(first_capture, policy, encoder)
        same_capture = CountingRawCapture([1, 1])
        same = settle_and_encode(same_capture, policy, encoder, reuse=first.png)
        changed_capture = CountingRawCapture([1, 2, 2])
        changed = settle_and_encode(changed_capture, policy, encoder, reuse=first.png)
        level_capture = CountingRawCapture([1, 1])
        other_level = settle_and_encode(level_capture, policy, encoder, compress_level=1, reuse=first.png)
    assert first_capture.conversions == [2]
    assert same.png is first.png and same.stable and same_capture.conversions == []
    assert same.frame.rgb == first.frame.rgb and same.frame.captured_at == 2.0
    assert changed.png is not first.png and changed_capture.conversions == [3]
    assert changed.png.data == encode_png(_frame(seed=2)).data and changed.frame.sha256 == _frame(seed=2).sha256
    assert other_level.png.compress_level == 1 and other_level.png.data == encode_png(_frame(seed=1), 1).data


def test_frame_and_png_match_the_separate_conversion_and_encode() -> None:
    capture = CountingRawCapture([3, 3])
    fused, separate = capture.grab_raw(), capture.grab_raw()
    frame, png = fused.frame_and_png(1)
    assert capture.conversions == [1]
    assert frame == Frame.from_rgb(64, 32, _frame(seed=3).rgb, captured_at=1.0)
    assert png.data == encode_png(separate.frame(), 1).data and png.frame_sha256 == frame.sha256
    assert fused.frame() is frame and fused.png(1).data == png.data  # no second conversion
    assert capture.conversions == [1, 2]
    with pytest.raises(ValueError, match="compress_level"):
        fused.png(10)


def test_grab_raw_wraps_a_capture_that_only_converts() -> None:
    frame = _frame(seed=4)
    grab = grab_raw(ScriptedCapture([frame]))
    assert grab.converted and grab.frame() is frame
    assert grab.same_pixels(RawGrab.of_frame(_frame(seed=4)))
    assert not grab.same_pixels(RawGrab.of_frame(_frame(seed=5)))
    assert grab.png().data == encode_png(frame).data


class _FakeMss:
    """Stands in for an mss session: returns the scripted BGRX buffers in order."""

    def __init__(self, buffers: list[bytes]) -> None:
        self.buffers = buffers
        self.monitors = [{}, {"width": 2, "height": 1}]

    def grab(self, monitor: object) -> SimpleNamespace:
        return SimpleNamespace(width=2, height=1, raw=bytearray(self.buffers.pop(0)))

    def close(self) -> None:
        pass


def _mss_capture(buffers: list[bytes]) -> MssCapture:
    capture = MssCapture(":0")
    capture._mss = _FakeMss(buffers)
    return capture


def test_mss_raw_grabs_compare_rgb_only_and_convert_bgrx() -> None:
    # Two pixels, BGRX: the fourth byte differs (padding or a stray alpha), the colours do not.
    capture = _mss_capture([b"\x01\x02\x03\xff\x04\x05\x06\x00", b"\x01\x02\x03\x00\x04\x05\x06\x7f"])
    first, second = capture.grab_raw(), capture.grab_raw()
    assert first.same_pixels(second)
    frame = second.frame()
    assert frame.rgb == b"\x03\x02\x01\x06\x05\x04"
    assert frame.sha256 == hashlib.sha256(frame.rgb).hexdigest()
    assert second.png(1).data == encode_png(frame, 1).data
    other = _mss_capture([b"\x01\x02\x03\x00\x04\x05\x07\x00"]).grab_raw()
    assert not first.same_pixels(other)


def test_mss_raw_grab_of_the_wrong_size_is_a_capture_error() -> None:
    with pytest.raises(CaptureError, match="bytes for 2x1"):
        _mss_capture([b"\x00" * 7]).grab_raw()


# -- real input and capture on Xvfb (integration) ---------------------------------------------


def _pointer(display: str) -> tuple[int, int]:
    out = subprocess.run(
        ["xdotool", "getmouselocation", "--shell"],
        env={"DISPLAY": display},
        capture_output=True,
        text=True,
        check=True,
        timeout=5,
    ).stdout
    values = dict(line.split("=", 1) for line in out.split())
    return int(values["X"]), int(values["Y"])


@pytest.fixture
def second_xvfb() -> Iterator[XvfbDisplay]:
    with XvfbDisplay(800, 600) as display:
        yield display


@pytest.mark.integration
@needs_xvfb
def test_pyautogui_driver_moves_the_real_pointer_on_its_own_display(
    xvfb: XvfbDisplay, second_xvfb: XvfbDisplay
) -> None:
    first, second = PyAutoGUIDriver(xvfb.name), PyAutoGUIDriver(second_xvfb.name)
    try:
        assert first.screen_size() == (1920, 1080)
        assert second.screen_size() == (800, 600)
        first.move(111, 222)
        second.move(333, 444)
        first.click(500, 400, "left", 2)
        second.scroll(10, 20, 1, -2)
        assert _pointer(xvfb.name) == (500, 400)
        assert _pointer(second_xvfb.name) == (10, 20)
        first.drag([(100, 100), (150, 120), (200, 300)])
        assert _pointer(xvfb.name) == (200, 300)
        with pytest.raises(InputRejected, match="outside"):
            second.move(900, 10)  # inside the first display, outside the second
    finally:
        first.close()
        second.close()


@pytest.mark.integration
@needs_xvfb
def test_mss_capture_grabs_the_whole_display_and_an_idle_screen_is_stable(
    xvfb: XvfbDisplay,
) -> None:
    capture = MssCapture(xvfb.name)
    try:
        assert capture.size == (1920, 1080)
        frame = capture.grab()
        assert (frame.width, frame.height, len(frame.rgb)) == (1920, 1080, 1920 * 1080 * 3)
        settled, stable = stable_frame(capture, StabilityPolicy(window_s=2.0, interval_s=0.05))
        assert stable is True
        assert settled.sha256 == frame.sha256
        png = encode_png(settled)
        assert Image.open(io.BytesIO(png.data)).size == (1920, 1080)
    finally:
        capture.close()


@pytest.mark.integration
@needs_xvfb
def test_mss_raw_grabs_of_an_idle_screen_match_and_convert_like_grab(xvfb: XvfbDisplay) -> None:
    capture = MssCapture(xvfb.name)
    try:
        first, second = capture.grab_raw(), capture.grab_raw()
        assert first.same_pixels(second) and not first.converted
        assert isinstance(first.key, bytearray) and len(first.key) == 1920 * 1080 * 4
        assert not any(first.key[3::4])
        frame = second.frame()
        assert frame.rgb == capture.grab().rgb
        assert second.png().data == encode_png(frame).data
    finally:
        capture.close()


@pytest.mark.integration
def test_mss_capture_on_a_missing_display_raises_capture_error() -> None:
    capture = MssCapture(":65001")
    with pytest.raises(CaptureError):
        capture.grab()

"""Input and capture drivers: argument checks, action dispatch, PNG encoding, stability poll,
and (integration) real PyAutoGUI input and mss capture on private Xvfb displays."""

from __future__ import annotations

import hashlib
import io
import subprocess
from collections.abc import Iterator

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
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.drivers.capture import (
    DEFAULT_PNG_COMPRESS_LEVEL,
    Frame,
    MssCapture,
    StabilityPolicy,
    encode_png,
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
def test_mss_capture_on_a_missing_display_raises_capture_error() -> None:
    capture = MssCapture(":65001")
    with pytest.raises(CaptureError):
        capture.grab()

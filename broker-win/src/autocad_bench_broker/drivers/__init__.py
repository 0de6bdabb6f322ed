"""Input and capture drivers of the broker (the desktop-facing half of every action).

Importing this package loads neither PyAutoGUI nor mss: they are imported on first use,
against the display the driver was created for.
"""

from autocad_bench_broker.drivers.capture import (
    DEFAULT_PNG_COMPRESS_LEVEL,
    Frame,
    MssCapture,
    PngImage,
    ScreenCapture,
    StabilityPolicy,
    encode_png,
    stable_frame,
)
from autocad_bench_broker.drivers.dispatch import apply_action
from autocad_bench_broker.drivers.input import InputDriver, PyAutoGUIDriver, RecordedCall, RecordingDriver

__all__ = [
    "DEFAULT_PNG_COMPRESS_LEVEL",
    "Frame",
    "InputDriver",
    "MssCapture",
    "PngImage",
    "PyAutoGUIDriver",
    "RecordedCall",
    "RecordingDriver",
    "ScreenCapture",
    "StabilityPolicy",
    "apply_action",
    "encode_png",
    "stable_frame",
]

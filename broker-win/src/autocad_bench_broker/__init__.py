"""autocad-bench desktop broker: the trusted side of the desktop that injects input.

This distribution holds the pieces that run next to the CAD application: input drivers
(:mod:`autocad_bench_broker.drivers.input`), screen capture and PNG encoding
(:mod:`autocad_bench_broker.drivers.capture`), application adapters that launch, verify,
checkpoint and kill the CAD program (:mod:`autocad_bench_broker.apps`), and a private Xvfb
helper for Linux stand-in desktops (:mod:`autocad_bench_broker.display`). Heavy or
platform-only dependencies (pyautogui, mss, pywin32, python-xlib) are imported lazily inside
the classes that need them, so importing this package never touches a display.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

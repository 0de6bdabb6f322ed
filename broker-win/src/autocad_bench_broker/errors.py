"""Exceptions raised by the desktop side of the broker.

Each class names the layer that failed so the HTTP server can map it to one failure
classification without parsing messages. Validation problems that are detected *before* any
input reaches the desktop are :class:`InputRejected`; everything after injection is reported
in result objects instead of raised (an exception after input would be an ambiguous mutation).
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base class of every broker-side failure."""


class DisplayError(BrokerError):
    """A private X display could not be started, reached or stopped within its bound."""


class InputRejected(BrokerError):
    """An input request was refused before any event was injected (bad key, text, button)."""


class InputBindingError(BrokerError):
    """The input backend cannot be bound to the requested display (e.g. pyautogui missing)."""


class CaptureError(BrokerError):
    """No frame at all could be grabbed from the display (the display is gone or unreachable)."""


class AppError(BrokerError):
    """An application adapter operation failed."""


class AppLaunchError(AppError):
    """The application could not be started on the attempt file, or its window never appeared."""

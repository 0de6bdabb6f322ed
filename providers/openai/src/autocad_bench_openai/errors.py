"""Classification of OpenAI SDK exceptions into the core retry kinds.

SDK retries are off (``max_retries=0``), so the retry hints are read here from the raw
response headers: ``retry-after-ms`` (milliseconds, OpenAI's own), then ``retry-after``
(seconds or an HTTP date). Messages are the API's error text; the request (and its
``Authorization`` header) is never included.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping

from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError

_MESSAGE_LIMIT = 500


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``retry-after``; ``None`` if absent or junk."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        seconds = _number(raw_ms)
        if seconds is not None:
            return seconds / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None or parsed.tzinfo is None:
        return None
    return max(0.0, parsed.timestamp() - (time.time() if now is None else now))


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def kind_for_status(status: int) -> ProviderErrorKind:
    """The retry kind of an HTTP error status."""
    if status == 429:
        return ProviderErrorKind.RATE_LIMITED
    if status >= 500:
        return ProviderErrorKind.SERVER_ERROR
    if status in (408, 409):
        return ProviderErrorKind.TRANSIENT
    if status == 413:
        return ProviderErrorKind.REQUEST_TOO_LARGE
    return ProviderErrorKind.FATAL


def classify(error: BaseException, provider: str) -> ProviderRequestError | None:
    """A :class:`ProviderRequestError` for an SDK exception, or ``None`` if it is not one."""
    import openai

    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        kind = kind_for_status(status)
        headers = error.response.headers if error.response is not None else None
        retry_after = parse_retry_after(headers) if kind is not ProviderErrorKind.FATAL else None
        message = f"{provider} HTTP {status}: {_short(error.message)}"
        return ProviderRequestError(kind, message, status=status, retry_after_s=retry_after)
    if isinstance(error, openai.APITimeoutError):
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"{provider} request timed out")
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__
        detail = f": {type(cause).__name__}" if cause is not None else ""
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"{provider} connection failed{detail}")
    if isinstance(error, openai.APIResponseValidationError):
        # The API answered 2xx with a body the SDK cannot read: a broken response, retryable.
        return ProviderRequestError(ProviderErrorKind.SERVER_ERROR,
                                    f"{provider} returned an unreadable response", status=error.status_code)
    return None


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 3] + "..."


def failed_response(status: object, error: object, provider: str) -> ProviderRequestError | None:
    """The error of a 2xx response whose ``status`` is ``failed`` (an upstream failure), else ``None``.

    Nothing was consumed, so it is retried like a server error, or like a rate limit when
    the error code says so.
    """
    if status != "failed":
        return None
    code = str(getattr(error, "code", "") or (error.get("code", "") if isinstance(error, dict) else ""))
    message = str(getattr(error, "message", "") or (error.get("message", "") if isinstance(error, dict) else ""))
    kind = ProviderErrorKind.RATE_LIMITED if "rate" in code.lower() else ProviderErrorKind.SERVER_ERROR
    return ProviderRequestError(kind, f"{provider} response failed: {code or 'error'}: {_short(message)}")

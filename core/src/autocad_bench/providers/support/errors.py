"""HTTP error classification into the core retry kinds, without importing any SDK.

SDK retries are off (``max_retries=0``), so the retry hints are read here from the raw
response headers: ``retry-after-ms`` (milliseconds, OpenAI's own), then ``retry-after``
(seconds or an HTTP date). Exceptions of OpenAI-compatible SDKs are recognized by duck
typing, by the names of their classes (``APIStatusError``, ``APITimeoutError``,
``APIConnectionError``, ``APIResponseValidationError``, all ``APIError``), so this module
never imports the SDK it classifies. Messages are the API's error text; the request (and
its ``Authorization`` header) is never included.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any, Literal

from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError
from autocad_bench.providers.support.text import clip

MESSAGE_LIMIT = 500
"""Characters of an API error message kept by :func:`classify`."""

SdkErrorKind = Literal["status", "timeout", "connection", "validation"]


def parse_retry_after(headers: Mapping[str, Any] | None, *, now: float | None = None,
                      milliseconds: bool = True) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``retry-after``; ``None`` if absent or junk.

    Header names are matched case-insensitively. ``milliseconds=False`` ignores
    ``retry-after-ms`` (an OpenAI extension other services do not send).
    """
    if headers is None:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    if milliseconds:
        ms = _number(lowered.get("retry-after-ms"))
        if ms is not None:
            return ms / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
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


def _class_names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def is_api_error(error: BaseException) -> bool:
    """Whether ``error`` is an OpenAI-compatible SDK's ``APIError`` (of any subclass)."""
    return "APIError" in _class_names(error)


def sdk_error_kind(error: BaseException) -> SdkErrorKind | None:
    """Which OpenAI-compatible SDK failure ``error`` is, most specific first; ``None`` for others.

    ``APIStatusError`` (an HTTP error status), ``APITimeoutError`` (a subclass of
    ``APIConnectionError``), ``APIConnectionError``, ``APIResponseValidationError`` (a 2xx
    body the SDK could not read).
    """
    names = _class_names(error)
    if "APIStatusError" in names:
        return "status"
    if "APITimeoutError" in names:
        return "timeout"
    if "APIConnectionError" in names:
        return "connection"
    if "APIResponseValidationError" in names:
        return "validation"
    return None


def classify(error: BaseException, provider: str) -> ProviderRequestError | None:
    """A :class:`ProviderRequestError` for an SDK exception, or ``None`` if it is not one."""
    kind_of_error = sdk_error_kind(error)
    sdk: Any = error
    if kind_of_error == "status":
        status = sdk.status_code
        kind = kind_for_status(status)
        headers = sdk.response.headers if sdk.response is not None else None
        retry_after = parse_retry_after(headers) if kind is not ProviderErrorKind.FATAL else None
        message = f"{provider} HTTP {status}: {clip(sdk.message, MESSAGE_LIMIT)}"
        return ProviderRequestError(kind, message, status=status, retry_after_s=retry_after)
    if kind_of_error == "timeout":
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"{provider} request timed out")
    if kind_of_error == "connection":
        cause = error.__cause__
        detail = f": {type(cause).__name__}" if cause is not None else ""
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"{provider} connection failed{detail}")
    if kind_of_error == "validation":
        # The API answered 2xx with a body the SDK cannot read: a broken response, retryable.
        return ProviderRequestError(ProviderErrorKind.SERVER_ERROR,
                                    f"{provider} returned an unreadable response", status=sdk.status_code)
    return None


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
    return ProviderRequestError(kind, f"{provider} response failed: {code or 'error'}: {clip(message, MESSAGE_LIMIT)}")


def redacted(error: ProviderRequestError, secret: str | None) -> ProviderRequestError:
    """``error`` with every occurrence of ``secret`` (an API key) replaced; ``error`` itself if absent."""
    message = str(error)
    if secret and secret in message:
        message = message.replace(secret, "[redacted]")
        return ProviderRequestError(error.kind, message, status=error.status, retry_after_s=error.retry_after_s)
    return error

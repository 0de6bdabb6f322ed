"""Classify a failed Messages request into the core retry kinds.

=====================================  =======================================
failure                                kind
=====================================  =======================================
429                                    RATE_LIMITED (``retry-after`` parsed)
5xx, including 529 ``overloaded``      SERVER_ERROR (``retry-after`` parsed)
408, 409, connection error, timeout    TRANSIENT
413 ``request_too_large``              REQUEST_TOO_LARGE
any other status                       FATAL
=====================================  =======================================

The SDK's own retries are off (``max_retries=0``), so every failure reaches this module
exactly once. Error messages are built from the status and the API's error type/message
only; request headers (and so the API key) never appear in them.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any

from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError

_MESSAGE_LIMIT = 300


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (delta seconds or HTTP date).

    Returns ``None`` when neither header is present or parseable; never invents a value.
    """
    if headers is None:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if parsed is None:  # pragma: no cover - older Pythons returned None
            return None
        seconds = parsed.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def kind_for_status(status: int) -> ProviderErrorKind:
    """The retry kind of an HTTP error status."""
    if status == 429:
        return ProviderErrorKind.RATE_LIMITED
    if status == 413:
        return ProviderErrorKind.REQUEST_TOO_LARGE
    if status in (408, 409):
        return ProviderErrorKind.TRANSIENT
    if status >= 500:
        return ProviderErrorKind.SERVER_ERROR
    return ProviderErrorKind.FATAL


def _api_error_text(body: Any) -> str:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            kind = error.get("type")
            message = error.get("message")
            return f"{kind or 'error'}: {message or ''}".strip()
    if isinstance(body, str):
        return body
    return ""


def classify(error: BaseException) -> ProviderRequestError:
    """Turn an SDK exception into a :class:`ProviderRequestError` (``TypeError`` for anything else)."""
    import anthropic

    if isinstance(error, anthropic.APIStatusError):
        status = error.status_code
        kind = kind_for_status(status)
        retry_after = None
        if kind in (ProviderErrorKind.RATE_LIMITED, ProviderErrorKind.SERVER_ERROR, ProviderErrorKind.TRANSIENT):
            retry_after = parse_retry_after(error.response.headers)
        detail = _api_error_text(error.body)[:_MESSAGE_LIMIT]
        return ProviderRequestError(kind, f"Anthropic HTTP {status}: {detail or 'no error body'}",
                                    status=status, retry_after_s=retry_after)
    if isinstance(error, anthropic.APITimeoutError):
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, "Anthropic request timed out")
    if isinstance(error, anthropic.APIConnectionError):
        cause = error.__cause__ or error.__context__
        reason = type(cause).__name__ if cause is not None else "connection error"
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"Anthropic connection failed ({reason})")
    raise TypeError(f"not an Anthropic SDK error: {type(error).__name__}")

"""The SDK-independent provider helpers in core: exceptions are classified by duck typing."""

from __future__ import annotations

import email.utils

import httpx
import openai
import pytest

from autocad_bench.providers.chat.wire import classify_openai_error, classify_status
from autocad_bench.providers.models import ProviderErrorKind
from autocad_bench.providers.support.errors import classify, is_api_error, parse_retry_after, sdk_error_kind

REQUEST = httpx.Request("POST", "https://api.example.test/v1/responses")


def status_error(status: int, headers: dict[str, str], message: str = "boom") -> openai.APIStatusError:
    response = httpx.Response(status, headers=headers, request=REQUEST)
    return openai.APIStatusError(message, response=response, body={"error": {"message": message}})


class APIError(Exception):
    """Another OpenAI-compatible SDK's hierarchy: same class names, no ``openai`` import."""


class APIConnectionError(APIError):
    pass


class APITimeoutError(APIConnectionError):
    pass


def test_real_sdk_exceptions_are_classified_without_importing_the_sdk() -> None:
    limited = status_error(429, {"Retry-After-Ms": "1500"})
    assert sdk_error_kind(limited) == "status" and is_api_error(limited)
    error = classify(limited, "openai")
    assert error is not None
    assert (error.kind, error.status, error.retry_after_s) == (ProviderErrorKind.RATE_LIMITED, 429, 1.5)
    assert str(error) == "openai HTTP 429: boom"
    fatal = classify(status_error(400, {"retry-after": "3"}), "openai")
    assert fatal is not None and fatal.kind is ProviderErrorKind.FATAL and fatal.retry_after_s is None
    timeout = classify(openai.APITimeoutError(request=REQUEST), "openrouter")
    assert timeout is not None and timeout.kind is ProviderErrorKind.TRANSIENT
    assert str(timeout) == "openrouter request timed out"
    assert classify(ValueError("not an SDK error"), "openai") is None
    assert not is_api_error(ValueError("x"))


def test_other_sdks_with_the_same_class_names_are_recognized() -> None:
    assert sdk_error_kind(APITimeoutError()) == "timeout"
    assert sdk_error_kind(APIConnectionError()) == "connection"
    assert sdk_error_kind(APIError()) is None and is_api_error(APIError())
    try:
        raise APIConnectionError() from OSError("reset")
    except APIConnectionError as caught:
        error = classify(caught, "openai")
    assert error is not None and str(error) == "openai connection failed: OSError"


def test_chat_classification_keeps_its_own_rules() -> None:
    assert classify_status(425, "swapping", {}).kind is ProviderErrorKind.SERVER_ERROR
    too_large = classify_status(400, "the request body is too large", {"retry-after": "2"})
    assert too_large.kind is ProviderErrorKind.REQUEST_TOO_LARGE and too_large.retry_after_s is None
    assert classify_status(400, "unknown field", {}).kind is ProviderErrorKind.FATAL
    error = classify_openai_error(status_error(503, {"retry-after": "7"}, "overloaded"))
    assert error is not None
    assert (error.kind, error.retry_after_s) == (ProviderErrorKind.SERVER_ERROR, 7.0)
    assert str(error) == "HTTP 503: overloaded"
    assert classify_openai_error(openai.APITimeoutError(request=REQUEST)) is not None
    assert classify_openai_error(ValueError("x")) is None


@pytest.mark.parametrize(("headers", "expected"), [
    (None, None),
    ({}, None),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "junk", "retry-after": "4"}, 4.0),
    ({"Retry-After": " 12 "}, 12.0),
    ({"retry-after": "-1"}, None),
    ({"retry-after": "inf"}, None),
    ({"retry-after": "soon"}, None),
    ({"retry-after": email.utils.formatdate(1_000_030.0, usegmt=True)}, 30.0),
    ({"retry-after": email.utils.formatdate(999_000.0, usegmt=True)}, 0.0),
])
def test_parse_retry_after(headers: dict[str, str] | None, expected: float | None) -> None:
    assert parse_retry_after(headers, now=1_000_000.0) == expected


def test_retry_after_ms_can_be_ignored() -> None:
    headers = {"retry-after-ms": "250", "retry-after": "3"}
    assert parse_retry_after(headers, milliseconds=False) == 3.0

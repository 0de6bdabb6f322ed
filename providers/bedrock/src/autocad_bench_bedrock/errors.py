"""Retry classes of botocore failures (see docs/providers-chat-and-aws.md).

Error codes decide first, the HTTP status second: Bedrock answers ``ModelNotReadyException``
with 429 although it is a server-side state, and size rejections arrive as a 400
``ValidationException`` whose message names the limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError
from autocad_bench.providers.support.errors import parse_retry_after
from autocad_bench.providers.support.text import clip

_RATE_LIMITED = frozenset({"ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException",
                           "ThrottledException", "RequestLimitExceeded"})
_SERVER = frozenset({"ServiceUnavailableException", "InternalServerException", "ModelNotReadyException",
                     "InternalFailure", "ServiceUnavailable", "InternalServerError", "ModelErrorException"})
_TRANSIENT = frozenset({"ModelTimeoutException", "RequestTimeout", "RequestTimeoutException", "ConflictException"})
_TOO_LARGE = re.compile(
    r"(too (large|long|big)|exceed(s|ed|ing)?|maximum (request |input |payload )?(size|length)|payload size)",
    re.IGNORECASE,
)
_MESSAGE_LIMIT = 300


def classify_botocore(exc: BaseException) -> ProviderRequestError | None:
    """The retry class of a botocore exception; ``None`` for anything unexpected."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        HTTPClientError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")) or code
        status = meta.get("HTTPStatusCode")
        headers = meta.get("HTTPHeaders", {})
        return classify_client_error(code, message, status if isinstance(status, int) else None,
                                     headers if isinstance(headers, Mapping) else {})
    if isinstance(exc, (ReadTimeoutError, ConnectTimeoutError)):
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"request timed out ({type(exc).__name__})")
    if isinstance(exc, (EndpointConnectionError, ConnectionClosedError, HTTPClientError)):
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"connection error ({type(exc).__name__})")
    if isinstance(exc, NoCredentialsError):
        return ProviderRequestError(ProviderErrorKind.FATAL, "no AWS credentials found in the standard chain")
    return None


def classify_client_error(code: str, message: str, status: int | None,
                          headers: Mapping[str, Any]) -> ProviderRequestError:
    """A Bedrock error response as a :class:`ProviderRequestError`, by error code and then HTTP
    status; unknown errors are fatal, and fatal or too-large errors carry no retry-after.
    """
    # Only ``retry-after`` (seconds or an HTTP date): AWS sends no ``retry-after-ms``.
    retry_after = parse_retry_after(headers, milliseconds=False)
    text = f"{code or 'error'} (HTTP {status}): {clip(message, _MESSAGE_LIMIT)}"
    if code in _RATE_LIMITED:
        kind = ProviderErrorKind.RATE_LIMITED
    elif code in _SERVER:
        kind = ProviderErrorKind.SERVER_ERROR
    elif code in _TRANSIENT:
        kind = ProviderErrorKind.TRANSIENT
    elif status == 413 or (code == "ValidationException" and _TOO_LARGE.search(message)):
        kind = ProviderErrorKind.REQUEST_TOO_LARGE
    elif status == 429:
        kind = ProviderErrorKind.RATE_LIMITED
    elif status is not None and (status >= 500 or status == 425):
        kind = ProviderErrorKind.SERVER_ERROR
    elif status in (408, 409):
        kind = ProviderErrorKind.TRANSIENT
    else:
        kind = ProviderErrorKind.FATAL
    if kind in (ProviderErrorKind.REQUEST_TOO_LARGE, ProviderErrorKind.FATAL):
        retry_after = None
    return ProviderRequestError(kind, text, status=status, retry_after_s=retry_after)


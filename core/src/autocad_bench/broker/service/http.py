"""The HTTP side of a broker: bodies, answers, authentication, error mapping, listening.

Everything here is the wire format of ``docs/broker-protocol.md`` and nothing else: how a
request body is read and validated (413 above the cap, 400 for anything malformed, with
``path: message`` problems), how a 200 model, a binary body or an error body is written,
the bearer-token check that runs before routing and gives every failure the same 401, and
the mapping of exceptions to :class:`~autocad_bench.broker.protocol.ErrorResponse` bodies.
:class:`~autocad_bench.broker.service.app.BrokerService` builds its aiohttp application
from these pieces; test middlewares (fault injection) may use :func:`read_body` and
:func:`route_of` too.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from pydantic import BaseModel, ValidationError

from autocad_bench.broker.protocol import (
    AUTHORIZATION_HEADER,
    CONTENT_SHA256_HEADER,
    ERROR_STATUS,
    ErrorCode,
    ErrorResponse,
    Route,
)

_M = TypeVar("_M", bound=BaseModel)

_TOO_LARGE = web.RequestKey("autocad_bench_body_too_large", bool)
_HTTP_ERROR_CODES = {
    400: ErrorCode.BAD_REQUEST,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.BODY_TOO_LARGE,
}


class Abort(Exception):
    """Raised anywhere below a handler to answer with a protocol error body.

    The error middleware turns it into the status of its ``code`` (``ERROR_STATUS``); it is
    an answer, never logged as a fault. ``message`` must not contain secrets or paths.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        next_index: int | None = None,
        problems: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.error = ErrorResponse(code=code, message=message, next_index=next_index, problems=tuple(problems))

    @classmethod
    def of(cls, error: ErrorResponse) -> Abort:
        """The abort that answers ``error`` again (a cached error answer being replayed)."""
        return cls(error.code, error.message, next_index=error.next_index, problems=error.problems)


# Bodies ------------------------------------------------------------------------------------------


async def read_body(request: web.Request, limit: int) -> bytes:
    """The raw request body; :class:`Abort` 413 when it is larger than ``limit`` bytes.

    The refusal is remembered on the request, so a second call (a middleware that read the
    body first, then the handler) refuses again instead of reading the unread remainder.
    """
    too_large = Abort(ErrorCode.BODY_TOO_LARGE, f"request body above {limit} bytes")
    if request.get(_TOO_LARGE) or (request.content_length is not None and request.content_length > limit):
        request[_TOO_LARGE] = True
        raise too_large
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        request[_TOO_LARGE] = True
        raise too_large from None


async def parse_body(request: web.Request, model: type[_M], limit: int) -> _M:
    """Read and validate a JSON object body as ``model``.

    Raises :class:`Abort`: 413 above ``limit``; 400 ``bad_request`` for a body that is not
    JSON (``NaN`` and infinities included), not an object, or does not match ``model``
    (with one ``path: message`` problem per validation error; inputs are never echoed).
    """
    raw = await read_body(request, limit)
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise Abort(ErrorCode.BAD_REQUEST, "body is not JSON") from None
    if not isinstance(data, dict):
        raise Abort(ErrorCode.BAD_REQUEST, "body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}"
            for item in error.errors(include_url=False, include_input=False)
        ]
        raise Abort(ErrorCode.BAD_REQUEST, "body does not match the request schema", problems=problems) from None


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# Answers -----------------------------------------------------------------------------------------


def ok(model: BaseModel) -> web.Response:
    """A 200 answer carrying ``model`` as compact JSON."""
    return web.Response(body=model.model_dump_json().encode(), content_type="application/json")


def binary(data: bytes, content_type: str, sha256: str) -> web.Response:
    """A 200 binary answer (frame, artifact) with its ``X-Content-SHA256`` header."""
    return web.Response(body=data, content_type=content_type, headers={CONTENT_SHA256_HEADER: sha256})


def error_response(error: ErrorResponse, *, status: int | None = None) -> web.Response:
    """An error answer: ``error`` as JSON with the status of its code (or ``status``)."""
    return web.Response(
        body=error.model_dump_json().encode(),
        status=ERROR_STATUS[error.code] if status is None else status,
        content_type="application/json",
    )


_UNAUTHORIZED_BODY = ErrorResponse(code=ErrorCode.UNAUTHORIZED, message="unauthorized").model_dump_json().encode()


def unauthorized() -> web.Response:
    """The one 401 answer every authentication failure gets (fixed body, ``WWW-Authenticate``)."""
    return web.Response(
        body=_UNAUTHORIZED_BODY,
        status=401,
        content_type="application/json",
        headers={"WWW-Authenticate": "Bearer"},
    )


# Middlewares -------------------------------------------------------------------------------------


def auth_middleware(token: str | Callable[[], str]) -> Middleware:
    """Bearer-token check, in constant time, before anything else looks at the request.

    Any failure (missing header, other scheme, wrong token, unknown path without a token)
    gets :func:`unauthorized`; the token is kept only as the expected header bytes. A
    callable ``token`` is read on every request (a test broker whose token is re-armed);
    raises ``ValueError`` for an empty string token.
    """
    if isinstance(token, str) and not token:
        raise ValueError("the broker token must not be empty")
    read: Callable[[], str] = (lambda: token) if isinstance(token, str) else token

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        expected = f"Bearer {read()}".encode()
        supplied = request.headers.get(AUTHORIZATION_HEADER, "").encode("utf-8", "replace")
        if not hmac.compare_digest(supplied, expected):
            return unauthorized()
        return await handler(request)

    return authenticate


def error_middleware(on_fault: Callable[[web.Request, Exception], None]) -> Middleware:
    """Turn exceptions into protocol error bodies.

    :class:`Abort` answers its error; aiohttp's own HTTP errors (unknown route, wrong
    method, body too large) map to their codes; any other exception is a broker bug that
    still answers like a broker (500 ``internal error``) after ``on_fault`` recorded it.
    """

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except Abort as abort:
            return error_response(abort.error)
        except web.HTTPException as error:
            code = _HTTP_ERROR_CODES.get(error.status, ErrorCode.INTERNAL_ERROR)
            message = error.reason.lower() if code is not ErrorCode.INTERNAL_ERROR else "internal error"
            return error_response(ErrorResponse(code=code, message=message))
        except Exception as error:
            on_fault(request, error)
            return error_response(ErrorResponse(code=ErrorCode.INTERNAL_ERROR, message="internal error"))

    return errors


def route_of(request: web.Request) -> Route | None:
    """The protocol route a request was matched to, or ``None`` (unknown path or method)."""
    resource = request.match_info.route.resource
    if resource is None:
        return None
    try:
        return Route(f"{request.method} {resource.canonical}")
    except ValueError:
        return None


# Listening ---------------------------------------------------------------------------------------


class Listener:
    """An aiohttp application listening on one TCP address (``start`` / ``close``)."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def start(self, app: web.Application, host: str, port: int, *, shutdown_timeout: float) -> str:
        """Listen on ``host:port`` (0 picks a free port) and return :attr:`url`.

        Raises ``OSError`` if the address cannot be bound (nothing is left running) and
        ``RuntimeError`` if this listener is already running.
        """
        if self._runner is not None:
            raise RuntimeError("the broker is already listening")
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        return self.url

    @property
    def listening(self) -> bool:
        return self._runner is not None

    @property
    def port(self) -> int:
        """The bound port; ``RuntimeError`` before :meth:`start`."""
        if self._port is None:
            raise RuntimeError("the broker is not listening")
        return self._port

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` of the listener (loopback name for wildcard binds)."""
        if self._runner is None or not self._runner.addresses:
            raise RuntimeError("the broker is not listening")
        host = str(self._runner.addresses[0][0])
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        """Stop listening and close every connection (in-flight requests get the shutdown
        timeout given to :meth:`start`). Idempotent; :attr:`port` stays readable."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


__all__ = [
    "Abort",
    "Handler",
    "Listener",
    "Middleware",
    "auth_middleware",
    "binary",
    "error_middleware",
    "error_response",
    "ok",
    "parse_body",
    "read_body",
    "route_of",
    "unauthorized",
]

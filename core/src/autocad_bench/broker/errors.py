"""Exceptions raised by :class:`~autocad_bench.broker.client.BrokerClient`.

Two families never mix: :class:`BrokerHTTPError` means the broker received the request and
answered with an error status (never retried: retrying could not change the answer and
could hide a real conflict), :class:`BrokerTransportExhausted` means no answer arrived
within the operation's attempt and time bounds.
"""

from __future__ import annotations

from typing import Literal


class BrokerError(Exception):
    """Base class of every broker client failure."""


class BrokerHTTPError(BrokerError):
    """The broker answered with a 4xx/5xx status.

    ``code`` is the broker's :class:`~autocad_bench.broker.protocol.ErrorCode` value (or
    ``http_<status>`` when the body was not a protocol error body); ``problems`` carries the
    broker's validation lines for ``batch_rejected``/``bad_request``.
    """

    def __init__(self, status: int, code: str, message: str, *, problems: tuple[str, ...] = ()) -> None:
        super().__init__(f"broker answered HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.problems = problems


class BrokerConflict(BrokerHTTPError):
    """HTTP 409: the request contradicts the broker's state.

    For ``index_conflict`` ``next_index`` is the action index the broker expects; the other
    conflict codes (lease identity, reset key, request id reused with another body) leave
    it ``None``.
    """

    def __init__(self, code: str, message: str, *, next_index: int | None = None) -> None:
        super().__init__(409, code, message)
        self.next_index = next_index


class BrokerTransportExhausted(BrokerError):
    """No broker answer within the operation's bounds.

    ``operation`` is the route (``"POST /actions"``), ``attempts`` how many were made,
    ``bound`` which limit ended them (``"attempts"`` or ``"deadline"``), ``reason`` the
    same in words and ``last_error`` a one-line description of the last transport failure
    (the exception itself is chained as ``__cause__``, sanitised of request headers).
    """

    def __init__(
        self,
        operation: str,
        attempts: int,
        bound: Literal["attempts", "deadline"],
        reason: str,
        last_error: str,
    ) -> None:
        super().__init__(
            f"{operation}: broker unreachable after {attempts} attempt(s), {reason}"
            + (f"; last error: {last_error}" if last_error else "")
        )
        self.operation = operation
        self.attempts = attempts
        self.bound = bound
        self.reason = reason
        self.last_error = last_error


class BrokerProtocolError(BrokerError):
    """A complete 200 response that breaks the protocol (wrong schema, checksum header
    missing, bytes that differ from the advertised frame). Not retried."""

"""AWS clients and the one bounded way to call them.

Every client is built with SDK-internal retries switched off (``total_max_attempts=1``), so
the only retries are the counted ones of :func:`call` (the bounds table): a hidden SDK retry
would break the accounting of the retry matrix. :class:`AwsSession` also counts every
request it sends, which is how tests and the benchmark measure API calls per rollout.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from autocad_bench_aws.bounds import AWS_BACKOFF_BASE_S, AWS_BACKOFF_MAX_S, OTHER_CALL_REQUESTS, scaled

T = TypeVar("T")

THROTTLING = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "TooManyRequestsException",
    "RequestThrottled", "RequestThrottledException", "SlowDown", "PriorRequestNotComplete",
})
TRANSIENT = frozenset({
    "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "InternalServerError",
    "RequestTimeout", "RequestTimeoutException", "RequestExpired", "SignatureDoesNotMatch",
    "InvalidSignatureException", "IncompleteSignature", "AuthFailure.ClockSkew", "EC2ThrottledException",
})
"""Transient server and signing failures (clock skew, a signature computed from a rotating
credential at the wrong instant): safe to resend because the call is read-only or idempotent."""
QUOTA_RELEASE = frozenset({"VcpuLimitExceeded", "InstanceLimitExceeded"})
CAPACITY = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
                      "Unsupported"})
NOT_FOUND_SUFFIX = (".NotFound", ".Malformed")


NOT_SENT = frozenset({"NoCredentialsError", "PartialCredentialsError", "NoRegionError", "ProfileNotFound"})
"""botocore errors raised before any request leaves the machine: the configuration is
missing something, so retrying cannot help and no request is counted."""


class AwsCallError(Exception):
    """A bounded AWS call failed for good; ``code`` is the AWS error code (or the exception type).

    ``attempts`` counts the requests sent: 0 when the SDK refused before sending (missing
    credentials or region, an unknown profile).
    """

    def __init__(self, operation: str, code: str, message: str, attempts: int) -> None:
        sent = "no request was sent" if attempts == 0 else f"after {attempts} request(s)"
        super().__init__(f"{operation}: {code}: {message} ({sent})")
        self.operation = operation
        self.code = code
        self.attempts = attempts


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore error, else the exception type name."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
    return type(error).__name__


def is_throttle(code: str) -> bool:
    """Whether an AWS error code is a throttling code (the fleet poller doubles its interval on one)."""
    return code in THROTTLING


def is_transient(error: BaseException) -> bool:
    """Throttling, transient server/signing errors and connection failures."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(error, ClientError):
        code = error_code(error)
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return code in THROTTLING or code in TRANSIENT or status >= 500
    if type(error).__name__ in NOT_SENT:
        return False
    return isinstance(error, BotoCoreError | ConnectionError | TimeoutError)


def backoff(attempt: int, base: float = AWS_BACKOFF_BASE_S, cap: float = AWS_BACKOFF_MAX_S) -> float:
    """Full-jitter exponential backoff before request ``attempt + 1`` (scaled in tests)."""
    return scaled(random.uniform(0, min(cap, base * 2 ** max(0, attempt - 1))))


def call(
    operation: str,
    fn: Callable[[], T],
    *,
    requests: int = OTHER_CALL_REQUESTS,
    retry_on: Callable[[BaseException], bool] = is_transient,
    pause: Callable[[int, BaseException], float] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """Run ``fn`` up to ``requests`` times while it fails with a retryable error.

    Raises :class:`AwsCallError` naming the last error once the requests are used up or the
    error is not retryable. ``pause(attempt, error)`` overrides the backoff.
    """
    last: BaseException | None = None
    for attempt in range(1, requests + 1):
        try:
            return fn()
        except Exception as error:
            last = error
            if attempt == requests or not retry_on(error):
                break
            if on_retry is not None:
                on_retry(attempt, error)
            sleep(pause(attempt, error) if pause is not None else backoff(attempt))
    assert last is not None
    sent = attempt - 1 if type(last).__name__ in NOT_SENT else attempt
    raise AwsCallError(operation, error_code(last), _message(last), sent) from last


def _message(error: BaseException) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        message = response.get("Error", {}).get("Message")
        if message:
            return str(message)
    return str(error).splitlines()[0] if str(error) else type(error).__name__


@dataclass
class CallCounter:
    """Counts HTTP requests sent per ``service:Operation`` (thread-safe)."""

    counts: Counter[str]
    lock: threading.Lock

    @classmethod
    def new(cls) -> CallCounter:
        return cls(Counter(), threading.Lock())

    def add(self, name: str) -> None:
        with self.lock:
            self.counts[name] += 1

    @property
    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())


class AwsSession:
    """One boto3 session (profile or default chain, region) and its clients, built lazily.

    boto3 clients are thread-safe once created; creation is serialised here. ``counter``
    receives every request sent. ``clients`` lets tests inject stubbed clients by service
    name (for what moto lacks: SSM sessions and instance information, Service Quotas).
    """

    def __init__(self, region: str, profile: str | None = None, *, counter: CallCounter | None = None,
                 clients: dict[str, Any] | None = None) -> None:
        self.region = region
        self.profile = profile
        self.counter = counter or CallCounter.new()
        self._clients: dict[str, Any] = dict(clients or {})
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._make(service)
            return self._clients[service]

    def _make(self, service: str) -> Any:
        from botocore.config import Config

        with _BOTO_LOCK:
            # One boto3 session per profile and region in the process: clients share its loader
            # cache (service models load once) and its credential resolution.
            boto = _boto_session(self.profile, self.region)
            client = boto.client(service, config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=60,
                max_pool_connections=50, signature_version="s3v4" if service == "s3" else None))
        client.meta.events.register("before-call", self._count)
        return client

    def _count(self, event_name: str = "", **_: Any) -> None:
        # event_name is "before-call.<service>.<Operation>"; SDK retries are off, so one per request
        parts = event_name.split(".")
        self.counter.add(f"{parts[1]}:{parts[2]}" if len(parts) >= 3 else event_name)

    @property
    def ec2(self) -> Any:
        return self.client("ec2")

    @property
    def ssm(self) -> Any:
        return self.client("ssm")

    @property
    def s3(self) -> Any:
        return self.client("s3")


_BOTO_LOCK = threading.Lock()
_BOTO_SESSIONS: dict[tuple[str | None, str], Any] = {}


def _boto_session(profile: str | None, region: str) -> Any:
    import boto3

    key = (profile, region)
    if key not in _BOTO_SESSIONS:
        _BOTO_SESSIONS[key] = boto3.session.Session(profile_name=profile, region_name=region)
    return _BOTO_SESSIONS[key]


def chunks(items: Iterable[T], size: int) -> list[list[T]]:
    """``items`` in lists of at most ``size`` (the per-request id limits of the Describe calls)."""
    batch: list[T] = []
    out: list[list[T]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            out.append(batch)
            batch = []
    if batch:
        out.append(batch)
    return out

"""Talking to a freshly started broker: its ready file and its authenticated ``/health``.

The broker writes its ready file atomically once it listens. The backend trusts a broker
only after ``/health`` — asked with the rollout's token, over a direct loopback connection
(never a proxy) — names exactly the process the backend started, the startup id of the
ready file, the configured application and broker version, the X display it was given (as
its interactive session) and a 1920x1080 desktop; and
after the same route refused a request without the token.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autocad_bench.broker.protocol import HealthResponse
from autocad_bench_xvfb.bounds import HEALTH_REQUEST_TIMEOUT_S, HEALTH_RETRY_PAUSE_S, READY_POLL_S


class LaunchError(Exception):
    """A sandbox could not be brought to the verified handoff state (no model call happened)."""


class ReadyFile(BaseModel):
    """What the broker writes to ``--ready-file`` once it listens."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str
    port: int = Field(ge=1, le=65535)
    pid: int = Field(ge=1)
    startup_id: str = Field(min_length=1)


def wait_for_ready_file(path: Path, process: subprocess.Popen[bytes], timeout_s: float) -> ReadyFile:
    """Poll for the ready file until ``timeout_s``; fail at once if the broker exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        if path.exists():
            try:
                return ReadyFile.model_validate_json(path.read_bytes())
            except (OSError, ValidationError) as error:
                raise LaunchError(f"the broker's ready file is not valid: {_first_line(error)}") from None
        code = process.poll()
        if code is not None:
            raise LaunchError(f"the broker exited with status {code} before it was ready")
        if time.monotonic() >= deadline:
            raise LaunchError(f"the broker did not write its ready file within {timeout_s:.1f} s")
        time.sleep(READY_POLL_S)


def http_get(url: str, path: str, token: str | None, timeout_s: float) -> tuple[int, bytes]:
    """One GET on a loopback URL with a fresh connection; returns (status, body)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None or parts.port is None:
        raise LaunchError(f"the broker URL {url!r} is not an http URL with a port")
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        connection.request("GET", parts.path.rstrip("/") + path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def verify_health(
    ready: ReadyFile,
    token: str,
    *,
    expected_pid: int,
    app: str,
    broker_version: str,
    desktop: tuple[int, int],
    session_id: int,
    timeout_s: float,
) -> HealthResponse:
    """Check the broker's identity (see the module docstring); raise :class:`LaunchError` if it differs."""
    host = urlsplit(ready.url).hostname
    if host != "127.0.0.1":
        raise LaunchError(f"the broker listens on {host!r}, not on 127.0.0.1")
    if ready.pid != expected_pid:
        raise LaunchError(f"the ready file names PID {ready.pid}, but the backend started PID {expected_pid}")
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LaunchError(f"authenticated /health did not answer within {timeout_s:.1f} s ({last})")
        try:
            status, body = http_get(ready.url, "/health", token, min(remaining, HEALTH_REQUEST_TIMEOUT_S))
        except (OSError, http.client.HTTPException) as error:
            last = f"{type(error).__name__}: {error}"
            time.sleep(min(HEALTH_RETRY_PAUSE_S, max(0.0, deadline - time.monotonic())))
            continue
        if status != 200:
            raise LaunchError(f"authenticated /health answered {status}")
        try:
            health = HealthResponse.model_validate_json(body)
        except ValidationError as error:
            raise LaunchError(f"/health does not follow the broker protocol: {_first_line(error)}") from None
        break
    problems = _identity_problems(health, ready, expected_pid, app, broker_version, desktop, session_id)
    if problems:
        raise LaunchError("the broker is not the one this backend started: " + "; ".join(problems))
    status, _ = http_get(ready.url, "/health", None, min(HEALTH_REQUEST_TIMEOUT_S, timeout_s))
    if status != 401:
        raise LaunchError(f"/health without the token answered {status}, not 401: the broker is not protected")
    return health


def _identity_problems(health: HealthResponse, ready: ReadyFile, expected_pid: int, app: str,
                       broker_version: str, desktop: tuple[int, int], session_id: int) -> list[str]:
    expected: dict[str, Any] = {
        "pid": expected_pid, "startup_id": ready.startup_id, "app": app, "broker_version": broker_version,
        "desktop": desktop, "interactive_session_id": session_id,
    }
    actual: dict[str, Any] = {
        "pid": health.pid, "startup_id": health.startup_id, "app": health.app,
        "broker_version": health.broker_version, "desktop": (health.desktop_width, health.desktop_height),
        "interactive_session_id": health.interactive_session_id,
    }
    return [f"{key} is {json.dumps(actual[key])}, expected {json.dumps(expected[key])}"
            for key in expected if actual[key] != expected[key]]


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__

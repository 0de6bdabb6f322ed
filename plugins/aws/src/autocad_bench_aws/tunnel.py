"""The authenticated, exact-process SSM tunnel to the worker's broker, and its watchdog.

One stable local port per rollout: the child always talks to ``http://127.0.0.1:<port>``.
Each tunnel process is a fresh ``StartSession`` (``AWS-StartPortForwardingSession``) handed
to ``session-manager-plugin`` through ``AWS_SSM_START_SESSION_RESPONSE`` (never argv), in its
own process group. A process counts only once authenticated ``/health`` through it names
the exact broker process that passed readiness and the same route refuses a request
without the token. Startup tries at most three fresh processes; during the rollout the
watchdog restarts a dead or unresponsive tunnel on the same port at most eight times,
killing the whole process group each time. Broker calls in flight see a transport failure
and retry on a fresh connection with the same idempotency identity (core ``BrokerClient``).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from autocad_bench_aws.bounds import (
    TUNNEL_HEALTH_S,
    TUNNEL_RESTARTS,
    TUNNEL_START_PROCESSES,
    TUNNEL_WATCH_INTERVAL_S,
    scaled,
)
from autocad_bench_aws.calls import AwsCallError, AwsSession, call

PLUGIN = "session-manager-plugin"
SESSION_RESPONSE_ENV = "AWS_SSM_START_SESSION_RESPONSE"
DOCUMENT = "AWS-StartPortForwardingSession"


def stop_local_tunnels(instance_ids: set[str]) -> dict[str, list[int]]:
    """Kill the process groups of this host's tunnel processes to ``instance_ids`` (reap after a crash).

    A wrapper killed with SIGKILL leaves its tunnel process running in its own session; reaping
    the batch on the same host must not leave it. Found by argv (``StartSession`` and the
    request JSON naming the target) through ``/proc``; elsewhere this finds nothing. Returns
    the pids stopped per instance id.
    """
    stopped: dict[str, list[int]] = {}
    if not instance_ids or not os.path.isdir("/proc"):
        return stopped
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if "StartSession" not in argv:
            continue
        request = argv[argv.index("StartSession") + 2] if len(argv) > argv.index("StartSession") + 2 else ""
        try:
            target = json.loads(request).get("Target")
        except (ValueError, AttributeError):
            continue
        if target in instance_ids:
            try:
                os.killpg(int(entry), signal.SIGKILL)  # the tunnel leads its own process group
            except ProcessLookupError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry), signal.SIGKILL)
            except PermissionError:
                continue
            stopped.setdefault(target, []).append(int(entry))
    return stopped
_PLUGIN_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


class TunnelError(Exception):
    """No tunnel process passed authenticated /health within the startup bound."""


def free_port() -> int:
    """A loopback TCP port free right now (the rollout's stable tunnel port); it may be taken
    again before it is bound.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get_health(port: int, token: str | None, timeout_s: float) -> tuple[int, bytes]:
    """``GET /health`` through the tunnel on ``port``, with the bearer ``token`` when given;
    returns status and body. Connection errors and timeouts (``OSError``) propagate.
    """
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        connection.request("GET", "/health", headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def identity_problems(body: bytes, expected: Mapping[str, object]) -> list[str]:
    """How the ``/health`` body differs from the broker identity readiness reported (empty when
    it is the same process); a non-JSON or non-object body is itself a problem.
    """
    try:
        health = json.loads(body)
    except ValueError:
        return ["/health body is not JSON"]
    if not isinstance(health, dict):
        return ["/health body is not an object"]
    return [f"/health {key} is {health.get(key)!r}, readiness said {value!r}"
            for key, value in expected.items() if health.get(key) != value]


class Tunnel:
    """See the module docstring. ``expected`` is :func:`autocad_bench.infrastructure.readiness.health_identity`."""

    def __init__(self, session: AwsSession, instance_id: str, remote_port: int, token: str,
                 expected: Mapping[str, object], *, log: Callable[[str], None], profile: str | None = None,
                 plugin_log: TextIO | None = None, plugin: str = PLUGIN) -> None:
        self.session = session
        self.instance_id = instance_id
        self.remote_port = remote_port
        self.token = token
        self.expected = dict(expected)
        self.log = log
        self.profile = profile
        self.plugin_log = plugin_log
        self.plugin = plugin
        self.local_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.session_id: str | None = None
        self.started_processes = 0
        self.restarts = 0
        self.exhausted = False
        self._watchdog: asyncio.Task[None] | None = None
        # Process starts and kills run in worker threads; cancelling the watchdog does not stop
        # a restart already running in one. The lock orders such a restart before close()'s
        # kill, and ``_closing`` makes it give up, so no process outlives close().
        self._process_lock = threading.RLock()
        self._closing = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    # --- processes ---------------------------------------------------------------------------

    def _spawn(self) -> None:
        import shutil

        path = shutil.which(self.plugin)
        if path is None:
            raise TunnelError(f"{self.plugin} is not on PATH")
        parameters = {"portNumber": [str(self.remote_port)], "localPortNumber": [str(self.local_port)]}
        response: dict[str, Any] = call("StartSession", lambda: self.session.ssm.start_session(
            Target=self.instance_id, DocumentName=DOCUMENT, Parameters=parameters))
        response.pop("ResponseMetadata", None)
        self.session_id = str(response.get("SessionId", ""))
        env = {name: os.environ[name] for name in _PLUGIN_ENV if name in os.environ}
        env[SESSION_RESPONSE_ENV] = json.dumps(response)
        request = json.dumps({"Target": self.instance_id, "DocumentName": DOCUMENT, "Parameters": parameters})
        argv = [path, SESSION_RESPONSE_ENV, self.session.region, "StartSession", self.profile or "", request,
                str(self.session.ssm.meta.endpoint_url)]
        self.process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=self.plugin_log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if self.plugin_log else subprocess.DEVNULL, start_new_session=True)
        self.started_processes += 1

    def _kill(self) -> None:
        with self._process_lock:
            self._kill_locked()

    def _kill_locked(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        session_id, self.session_id = self.session_id, None
        if session_id:
            with contextlib.suppress(AwsCallError):
                call("TerminateSession", lambda: self.session.ssm.terminate_session(SessionId=session_id))

    def _healthy(self, timeout_s: float, *, check_refusal: bool) -> str | None:
        """None when authenticated /health names the expected process, else why not."""
        try:
            status, body = get_health(self.local_port, self.token, timeout_s)
        except (OSError, http.client.HTTPException) as error:
            return f"{type(error).__name__}: {error}"
        if status != 200:
            return f"authenticated /health answered {status}"
        problems = identity_problems(body, self.expected)
        if problems:
            return "; ".join(problems)
        if check_refusal:
            try:
                bare, _ = get_health(self.local_port, None, timeout_s)
            except (OSError, http.client.HTTPException) as error:
                return f"unauthenticated probe failed: {error}"
            if bare != 401:
                return f"/health without the token answered {bare}, not 401"
        return None

    def _open_one(self, bound_s: float) -> str | None:
        """Start one fresh process and wait for verified /health; None on success."""
        with self._process_lock:
            return self._open_one_locked(bound_s)

    def _open_one_locked(self, bound_s: float) -> str | None:
        if self._closing.is_set():
            return "the tunnel is closing"
        try:
            self._spawn()
        except AwsCallError as error:
            return str(error)
        deadline = time.monotonic() + bound_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self._closing.is_set():
                last = "the tunnel is closing"
                break
            if self.process is not None and self.process.poll() is not None:
                last = f"{self.plugin} exited with status {self.process.returncode}"
                break
            why = self._healthy(min(5.0, max(0.1, deadline - time.monotonic())), check_refusal=True)
            if why is None:
                return None
            last = why
            if "not 401" in why or "readiness said" in why:
                break  # a wrong process answers: waiting longer will not change it
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        self._kill_locked()
        return last

    # --- public ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Up to three fresh processes, each with its own /health bound; raise :class:`TunnelError`."""
        failures = []
        for attempt in range(1, TUNNEL_START_PROCESSES + 1):
            why = await asyncio.to_thread(self._open_one, scaled(TUNNEL_HEALTH_S))
            if why is None:
                self.log(f"tunnel to {self.instance_id} open on 127.0.0.1:{self.local_port} "
                         f"(process {attempt} of {TUNNEL_START_PROCESSES})")
                return
            failures.append(why)
            self.log(f"tunnel process {attempt} of {TUNNEL_START_PROCESSES} to {self.instance_id} failed: {why}")
        raise TunnelError(f"no tunnel process passed authenticated /health: {' | '.join(failures)}")

    def start_watchdog(self) -> None:
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        misses = 0
        interval = scaled(TUNNEL_WATCH_INTERVAL_S)
        while True:
            await asyncio.sleep(interval)
            process = self.process
            dead = process is None or process.poll() is not None
            if not dead:
                why = await asyncio.to_thread(self._healthy, max(1.0, interval * 2), check_refusal=False)
                misses = misses + 1 if why is not None else 0
                if misses < 2:
                    continue
            if self.restarts >= TUNNEL_RESTARTS:
                self.exhausted = True
                self.log(f"tunnel to {self.instance_id} lost and its {TUNNEL_RESTARTS} restarts are used up")
                await asyncio.to_thread(self._kill)
                return
            self.restarts += 1
            reason = "process exited" if dead else "/health stopped answering"
            self.log(f"tunnel to {self.instance_id}: {reason}; restart {self.restarts} of {TUNNEL_RESTARTS} "
                     f"on 127.0.0.1:{self.local_port}")
            await asyncio.to_thread(self._kill)
            why = await asyncio.to_thread(self._open_one, scaled(TUNNEL_HEALTH_S))
            if why is not None:
                self.log(f"tunnel restart {self.restarts} failed: {why}")
            misses = 0

    async def close(self) -> None:
        self._closing.set()
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
            self._watchdog = None
        await asyncio.to_thread(self._kill)

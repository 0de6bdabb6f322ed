"""The one interface through which the backend talks to a Hyper-V host, and its two implementations.

:class:`CommandRunner` runs a :class:`~autocad_bench_hyperv.commands.Script` and returns the
JSON objects it printed (``ConvertTo-Json``). :class:`LocalPowerShellRunner` starts
``powershell.exe -EncodedCommand`` per script when the controller runs on the host (the
script text is in argv, base64; the secrets are in the child's environment only and removed
from it by the script's first lines). :class:`PsrpRunner` keeps one PowerShell remoting
runspace pool (pypsrp over WinRM) open per host and sends each script as a pipeline whose
``param()`` block receives the secrets as parameters. Both raise :class:`HostCommandError`
with the error text scrubbed of every secret value.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from autocad_bench_hyperv.bounds import READ_CALL_ATTEMPTS, scaled
from autocad_bench_hyperv.commands import SECRET_PREFIX, Script
from autocad_bench_hyperv.settings import HostSettings, LocalConnection, PsrpConnection

SECRET_ENV_PREFIX = "AUTOCAD_BENCH_PS_SECRET_"
"""``powershell.exe`` receives secret ``i`` in ``AUTOCAD_BENCH_PS_SECRET_<i>`` (never in argv)."""

WINDOWS_ENVIRONMENT = (
    "SYSTEMROOT", "WINDIR", "SYSTEMDRIVE", "COMSPEC", "PATHEXT", "PSMODULEPATH", "USERPROFILE", "APPDATA",
    "LOCALAPPDATA", "TEMP", "TMP", "PROGRAMDATA", "PROGRAMFILES", "PROGRAMW6432", "COMPUTERNAME", "USERNAME",
    "USERDOMAIN", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE", "OS",
)
"""Non-secret variables a local ``powershell.exe`` needs; the subprocess wrapper inherits them by name."""

PRELUDE = ("$ErrorActionPreference = 'Stop'", "$ProgressPreference = 'SilentlyContinue'")


class HostCommandError(Exception):
    """A host script failed, timed out or printed something that is not JSON.

    ``transient`` is true for failures that say nothing about the host's state (a timeout or a
    lost connection); read-only scripts are retried on them.
    """

    def __init__(self, host: str, description: str, message: str, *, transient: bool = False) -> None:
        super().__init__(f"{host}: {description}: {message}")
        self.host = host
        self.description = description
        self.message = message
        self.transient = transient


class CommandRunner(Protocol):
    """Runs scripts on one Hyper-V host."""

    host: str

    def run(self, script: Script) -> list[Any]:
        """The JSON objects the script printed; raises :class:`HostCommandError`."""
        ...

    def close(self) -> None:
        """Release connections (idempotent)."""
        ...


def run_read(runner: CommandRunner, script: Script) -> list[Any]:
    """Run a read-only script, retrying transient failures (bounded)."""
    assert script.read_only, "only read-only scripts are retried"
    for attempt in range(1, READ_CALL_ATTEMPTS + 1):
        try:
            return runner.run(script)
        except HostCommandError as error:
            if not error.transient or attempt == READ_CALL_ATTEMPTS:
                raise
            time.sleep(scaled(1.0) * attempt)
    raise AssertionError("unreachable")


def parse_output(text: str) -> list[Any]:
    """``ConvertTo-Json -Compress`` output: nothing, one object or an array; always a list."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    value = json.loads(lines[-1])
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret value replaced, and cut to a readable length."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text[:800]


Executor = Callable[[Sequence[str], Mapping[str, str], float], tuple[int, str, str]]
"""``(argv, environment, timeout_s) -> (exit code, stdout, stderr)``; raises ``TimeoutError``."""


def subprocess_executor(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> tuple[int, str, str]:
    """The default :data:`Executor`: run ``argv`` with ``env`` and no stdin, decoding the output
    leniently; raises ``TimeoutError`` after ``timeout_s`` and ``OSError`` when it cannot start.
    """
    try:
        done = subprocess.run(list(argv), env=dict(env), capture_output=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as error:
        raise TimeoutError(f"no result within {timeout_s:.0f} s") from error
    return (done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


class LocalPowerShellRunner:
    """Runs each script in a fresh ``powershell.exe`` on this machine (the Hyper-V host)."""

    def __init__(self, host: str, connection: LocalConnection, *, environ: Mapping[str, str] | None = None,
                 executor: Executor | None = None) -> None:
        self.host = host
        self.powershell = connection.powershell
        self._environ = os.environ if environ is None else environ
        self._execute = executor or subprocess_executor

    @staticmethod
    def script_text(script: Script) -> str:
        """The whole text ``powershell.exe`` runs: prelude, secrets taken from (and removed from) env, body."""
        lines = list(PRELUDE)
        for index in range(len(script.secrets)):
            lines.append(f"${SECRET_PREFIX}{index} = $env:{SECRET_ENV_PREFIX}{index}")
            lines.append(f"Remove-Item -Path Env:{SECRET_ENV_PREFIX}{index}")
        lines.append(script.body())
        return "\n".join(lines)

    def command_line(self, script: Script) -> tuple[list[str], dict[str, str]]:
        """The argv (no secret) and the environment (with the secrets) of one invocation."""
        encoded = base64.b64encode(self.script_text(script).encode("utf-16-le")).decode("ascii")
        argv = [self.powershell, "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass",
                "-EncodedCommand", encoded]
        env = {k: v for k, v in self._environ.items() if not k.startswith(SECRET_ENV_PREFIX)}
        env.update({f"{SECRET_ENV_PREFIX}{i}": value for i, value in enumerate(script.secrets)})
        return argv, env

    def run(self, script: Script) -> list[Any]:
        argv, env = self.command_line(script)
        try:
            code, out, err = self._execute(argv, env, scaled(script.timeout_s))
        except TimeoutError as error:
            raise HostCommandError(self.host, script.description, str(error), transient=True) from None
        except OSError as error:
            raise HostCommandError(self.host, script.description,
                                   f"cannot run {self.powershell}: {error.strerror or error}") from None
        if code != 0:
            message = scrub(err or out or f"exit code {code}", script.secrets)
            raise HostCommandError(self.host, script.description, message)
        try:
            return parse_output(out)
        except ValueError:
            raise HostCommandError(self.host, script.description,
                                   "printed something that is not JSON: " + scrub(out, script.secrets)) from None

    def close(self) -> None:
        return None


class PsrpRunner:
    """Runs scripts through one PowerShell remoting session (pypsrp over WinRM) to a host.

    The runspace pool is opened on first use and reused; ``close`` closes it. The WinRM user
    and password are read from the variables the settings name, when the pool is opened.
    """

    def __init__(self, host: str, connection: PsrpConnection, *, environ: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.connection = connection
        self._environ = os.environ if environ is None else environ
        self._wsman: Any = None
        self._pool: Any = None

    @staticmethod
    def script_text(script: Script) -> str:
        params = ", ".join(f"${SECRET_PREFIX}{i}" for i in range(len(script.secrets)))
        return "\n".join([f"param({params})", *PRELUDE, script.body()])

    def pipeline(self, pool: Any, script: Script) -> Any:
        """The pypsrp ``PowerShell`` of ``script`` on ``pool`` (secrets bound as parameters)."""
        from pypsrp.powershell import PowerShell

        shell = PowerShell(pool)
        shell.add_script(self.script_text(script))
        for index, value in enumerate(script.secrets):
            shell.add_parameter(f"{SECRET_PREFIX}{index}", value)
        return shell

    def _open(self, timeout_s: float) -> Any:
        if self._pool is not None:
            return self._pool
        from pypsrp.powershell import RunspacePool
        from pypsrp.wsman import WSMan

        conn = self.connection
        username = self._environ.get(conn.username_env, "")
        password = self._environ.get(conn.password_env, "")
        if not username or not password:
            missing = [n for n in (conn.username_env, conn.password_env) if not self._environ.get(n)]
            raise HostCommandError(self.host, "connect", f"WinRM credentials not set: {', '.join(missing)}")
        seconds = max(5, int(timeout_s))
        self._wsman = WSMan(conn.server, port=conn.resolved_port, username=username, password=password,
                            ssl=conn.ssl, auth=conn.auth, cert_validation=conn.cert_validation,
                            connection_timeout=min(30, seconds), read_timeout=seconds + 10,
                            operation_timeout=min(20, seconds), reconnection_retries=0)
        pool = RunspacePool(self._wsman)
        pool.open()
        self._pool = pool
        return pool

    def run(self, script: Script) -> list[Any]:
        from pypsrp.complex_objects import PSInvocationState
        from pypsrp.exceptions import AuthenticationError, WinRMError, WinRMTransportError, WSManFaultError
        from requests.exceptions import RequestException

        timeout = scaled(script.timeout_s)
        deadline = time.monotonic() + timeout
        try:
            shell = self.pipeline(self._open(timeout), script)
            shell.begin_invoke()
            while shell.state == PSInvocationState.RUNNING:
                if time.monotonic() >= deadline:
                    shell.stop()
                    raise HostCommandError(self.host, script.description, f"no result within {timeout:.0f} s",
                                           transient=True)
                shell.poll_invoke(timeout=max(1, min(20, int(deadline - time.monotonic()) + 1)))
        except AuthenticationError as error:
            self.close()
            raise HostCommandError(self.host, script.description,
                                   "WinRM authentication failed: " + scrub(str(error), script.secrets)) from None
        except (WinRMTransportError, WSManFaultError, WinRMError, RequestException, OSError) as error:
            self.close()
            raise HostCommandError(self.host, script.description, scrub(str(error), script.secrets),
                                   transient=True) from None
        if shell.had_errors or shell.state == PSInvocationState.FAILED:
            errors = "; ".join(str(record) for record in shell.streams.error) or "the script failed"
            raise HostCommandError(self.host, script.description, scrub(errors, script.secrets))
        text = "\n".join(str(item) for item in shell.output if item is not None)
        try:
            return parse_output(text)
        except ValueError:
            raise HostCommandError(self.host, script.description,
                                   "printed something that is not JSON: " + scrub(text, script.secrets)) from None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        wsman, self._wsman = self._wsman, None
        for resource in (pool, wsman):
            if resource is None:
                continue
            # Closing a broken connection must never fail cleanup.
            with contextlib.suppress(Exception):
                resource.close()


RunnerFactory = Callable[[HostSettings], CommandRunner]
"""Builds the runner of one host (the plugin's default is :func:`default_runner`)."""


def default_runner(host: HostSettings, environ: Mapping[str, str] | None = None) -> CommandRunner:
    """A PSRP runner for a host reached over PSRP, else a local ``powershell.exe`` runner."""
    if isinstance(host.connection, PsrpConnection):
        return PsrpRunner(host.name, host.connection, environ=environ)
    return LocalPowerShellRunner(host.name, host.connection, environ=environ)

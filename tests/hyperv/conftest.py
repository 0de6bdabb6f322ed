"""Fixtures of the local-hyperv tests: fake Hyper-V hosts whose VMs run fake brokers on loopback."""

from __future__ import annotations

import http.server
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.broker.client import BrokerClient
from autocad_bench.infrastructure import (
    BROKER_TOKEN_ENV,
    BROKER_URL_ENV,
    EvaluationArguments,
    InfrastructureSpec,
    RolloutLaunchRequest,
)
from autocad_bench.providers.models import DisplaySize
from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench_hyperv.plugin import HyperVPlugin
from autocad_bench_hyperv.runner import CommandRunner, LocalPowerShellRunner
from autocad_bench_hyperv.settings import HostSettings, LocalConnection
from tests.harness.brokers import BrokerThread
from tests.hyperv.fakehyperv import FakeHyperVHost

VERSION = "windows-autocad-2019-v11"
GUEST_USER = "Administrator"
GUEST_PASSWORD = "guest-password-for-tests-4c1e"
SECRETS_ENV = {"HYPERV_GUEST_USER": GUEST_USER, "HYPERV_GUEST_PASSWORD": GUEST_PASSWORD}
TIME_SCALE = "0.05"
FAKE_POWERSHELL = Path(__file__).with_name("fake_powershell.py")
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Lab:
    """Fake Hyper-V hosts, a fake broker inside every VM, and the backend pointed at them."""

    tmp: Path
    brokers_thread: BrokerThread
    hosts: dict[str, FakeHyperVHost] = field(default_factory=dict)
    brokers: dict[str, FakeBroker] = field(default_factory=dict)
    server: http.server.ThreadingHTTPServer | None = None
    settings_overrides: dict[str, Any] = field(default_factory=dict)

    def add_host(self, name: str, vms: Sequence[str], **options: Any) -> FakeHyperVHost:
        for vm in vms:
            self.brokers[f"{name}/{vm}"] = self.brokers_thread.start(display=DisplaySize(width=1920, height=1080))
        host = FakeHyperVHost(name, vms, guest_username=GUEST_USER, guest_password=GUEST_PASSWORD,
                              brokers={vm: self.brokers[f"{name}/{vm}"] for vm in vms}, **options)
        self.hosts[name] = host
        return host

    def settings(self, *, subprocess: bool = False, **overrides: Any) -> dict[str, Any]:
        """Pool settings for the fake hosts; ``subprocess`` points each host at a fake ``powershell.exe``."""
        hosts = []
        for name, host in self.hosts.items():
            ports = {vm: int(self.brokers[f"{name}/{vm}"].url.rsplit(":", 1)[1]) for vm in host.vms}
            connection: dict[str, Any] = {"kind": "local"}
            if subprocess:
                connection["powershell"] = self.powershell_script(name)
            hosts.append({"name": name, "connection": connection, "vms": list(host.vms),
                          "broker": {"kind": "port_proxy", "address": "127.0.0.1", "ports": ports},
                          "hourly_usd": 0.5 + 0.25 * len(hosts)})
        return {"hosts": hosts, "guest_username_env": "HYPERV_GUEST_USER",
                "guest_password_env": "HYPERV_GUEST_PASSWORD", "licence_seats": 10, "boot_timeout_s": 2,
                "readiness_timeout_s": 3, "handoff_timeout_s": 3, "lease_wait_s": 3,
                **self.settings_overrides, **overrides}

    def spec(self, **overrides: Any) -> InfrastructureSpec:
        return InfrastructureSpec(backend="local-hyperv", broker_version=VERSION, settings=self.settings(**overrides))

    def runner(self, host: HostSettings) -> CommandRunner:
        fake = self.hosts[host.name]
        assert isinstance(host.connection, LocalConnection)
        return LocalPowerShellRunner(host.name, host.connection, environ={}, executor=fake.execute)

    def plugin(self) -> HyperVPlugin:
        """The backend talking to the fake hosts in this process (shared mode, direct hook calls)."""
        return HyperVPlugin(runner_factory=self.runner, environ={**os.environ, **SECRETS_ENV})

    def powershell_script(self, host: str) -> str:
        """An executable that plays ``powershell.exe`` on fake host ``host`` (for subprocesses)."""
        if self.server is None:
            self.server = _serve(self.hosts)
        url = f"http://127.0.0.1:{self.server.server_address[1]}/host/{host}"
        path = self.tmp / f"powershell-{host}"
        path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_POWERSHELL} {url} \"$@\"\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return str(path)

    def all_vms(self) -> list[tuple[FakeHyperVHost, str]]:
        return [(host, vm) for host in self.hosts.values() for vm in host.vms]

    def assert_pool_clean(self) -> None:
        """The invariant: every VM ends unleased, off and restored."""
        for host, vm in self.all_vms():
            machine = host.vms[vm]
            mark = host.mark(vm)
            assert mark is not None and mark["state"] in ("free", "quarantined"), (vm, machine.notes)
            assert machine.state == "Off", (vm, machine.state)
            assert not machine.dirty, f"{vm} was not restored after it last ran"

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        self.brokers_thread.close(*self.brokers.values())


def _serve(hosts: Mapping[str, FakeHyperVHost]) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            parts = self.path.split("/")  # /host/<name>/run
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            fake = hosts.get(parts[2]) if len(parts) == 4 and parts[1] == "host" and parts[3] == "run" else None
            if fake is None:
                code, out, err = 1, "", f"no fake host at {self.path}"
            else:
                code, out, err = fake.execute(request["argv"], request["env"])
            body = json.dumps({"code": code, "stdout": out, "stderr": err}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(autouse=True)
def _scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCAD_BENCH_HYPERV_TIME_SCALE", TIME_SCALE)
    for name, value in SECRETS_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path, BrokerThread())
    try:
        yield lab
    finally:
        lab.close()


def launch_request(tmp_path: Path, spec: InfrastructureSpec, *, rollout_id: str = "r1", batch_id: str = "batch-1",
                   child: tuple[str, ...] = ("true",), evaluation: EvaluationArguments | None = None
                   ) -> RolloutLaunchRequest:
    output = tmp_path / batch_id / "rollouts" / rollout_id
    output.mkdir(parents=True, exist_ok=True)
    return RolloutLaunchRequest(
        batch_id=batch_id, rollout_id=rollout_id, attempt_id=f"{batch_id}.{rollout_id}.1", task_id="line-and-circle",
        spec=spec, child_command=child, output_dir=output, log_path=tmp_path / batch_id / "logs" / f"{rollout_id}.log",
        evaluation=evaluation or EvaluationArguments(enabled=False, task_id="line-and-circle"))


class RecordingChild:
    """A shared-mode child that proves it holds a verified broker: health, lease, reset, release.

    Records ``(broker url, start, end)``; ``hold_s`` keeps the desktop busy for a while.
    """

    def __init__(self, hold_s: float = 0.0, code: int = 0) -> None:
        self.hold_s = hold_s
        self.code = code
        self.runs: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    async def run(self, environ: Mapping[str, str]) -> int:
        import asyncio

        start = time.monotonic()
        client = BrokerClient(environ[BROKER_URL_ENV], environ[BROKER_TOKEN_ENV], operation_deadline_s=10)
        await client.health()
        lease = await client.lease("line-and-circle", f"attempt-{id(self)}-{start}")
        await client.reset(lease.session_id)
        await asyncio.sleep(self.hold_s)
        await client.release(lease.session_id)
        with self.lock:
            self.runs.append((environ[BROKER_URL_ENV], start, time.monotonic()))
        return self.code


def log_text(request: RolloutLaunchRequest) -> str:
    return request.log_path.read_text() if request.log_path.exists() else ""

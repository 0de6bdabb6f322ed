"""The SSM tunnel: a real (fake) session-manager-plugin child that the test kills mid-rollout."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from autocad_bench.actions import action_request_id
from autocad_bench.actions.models import MoveAction
from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.errors import BrokerTransportExhausted
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV
from autocad_bench_aws.bounds import TUNNEL_RESTARTS
from autocad_bench_aws.plugin import AwsPlugin
from tests.aws.conftest import AwsEnv


def plugin_processes() -> list[int]:
    """PIDs of live session-manager-plugin processes started by the tunnel."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        zombie = stat.rsplit(")", 1)[1].split()[0] == "Z"
        if b"session-manager-plugin\0AWS_SSM_START_SESSION_RESPONSE" in cmdline and not zombie:
            found.append(int(entry.name))
    return found


class ActingChild:
    """Sends ``batches`` one-action batches through the tunnel, each exactly once."""

    def __init__(self, attempt_id: str, batches: int, pause_s: float) -> None:
        self.attempt_id = attempt_id
        self.batches = batches
        self.pause_s = pause_s
        self.sent = 0
        self.started = threading.Event()

    async def run(self, environ: Mapping[str, str]) -> int:
        client = BrokerClient(environ[BROKER_URL_ENV], environ[BROKER_TOKEN_ENV], operation_deadline_s=15,
                              wait_initial_s=0.05, wait_max_s=0.5, wait_jitter_s=0.05)
        lease = await client.lease("line-and-circle", self.attempt_id)
        reset = await client.reset(lease.session_id)
        index = reset.next_index
        self.started.set()
        try:
            for n in range(self.batches):
                done = await client.actions(lease.session_id, action_request_id(self.attempt_id, f"t{n}", 0), index,
                                            [MoveAction(x=10 + n, y=10)])
                index = done.next_index
                self.sent += 1
                await asyncio.sleep(self.pause_s)
        except BrokerTransportExhausted:
            return 3
        await client.release(lease.session_id)
        return 0


def kill_tunnels(child: ActingChild, times: int, every_s: float, stop: threading.Event) -> list[int]:
    """Kill the live tunnel ``times`` times; returns one entry per outage (a pass that killed something).

    One pass may hit more than one process of the same tunnel (the plugin and a child it
    spawned), so outages are counted per pass, not per process.
    """
    outages: list[int] = []
    child.started.wait(30)
    while len(outages) < times and not stop.is_set():
        time.sleep(every_s)
        hit = []
        for pid in plugin_processes():
            try:
                os.kill(pid, signal.SIGKILL)
                hit.append(pid)
            except ProcessLookupError:
                pass
        if hit:
            outages.append(hit[0])
    return outages


def test_the_watchdog_restarts_a_killed_tunnel_and_no_action_repeats(aws: AwsEnv) -> None:
    request = aws.request("tunnel")
    child = ActingChild(request.attempt_id, batches=40, pause_s=0.05)
    stop = threading.Event()
    killed: list[int] = []
    killer = threading.Thread(target=lambda: killed.extend(kill_tunnels(child, 4, 0.35, stop)))
    killer.start()
    code = AwsPlugin().run_shared(request, child)
    stop.set()
    killer.join()
    assert code == 0, request.log_path.read_text()
    assert len(killed) == 4
    host = next(h for h in aws.fake.hosts.values() if h.config.rollout_id == "tunnel")
    assert [i.index for i in host.broker.injected] == list(range(40))
    text = request.log_path.read_text()
    # Each kill costs one restart (a kill that lands on a restarting process may cost two).
    assert "restart 4 of 8" in text and "restarts are used up" not in text
    assert aws.live(request.batch_id) == []
    assert plugin_processes() == []


def test_a_tunnel_that_keeps_dying_exhausts_its_restarts_and_the_rollout_fails(aws: AwsEnv) -> None:
    request = aws.request("doomed")
    child = ActingChild(request.attempt_id, batches=100000, pause_s=0.02)
    stop = threading.Event()
    killer = threading.Thread(target=kill_tunnels, args=(child, 1000, 0.05, stop))
    killer.start()
    code = AwsPlugin().run_shared(request, child)
    stop.set()
    killer.join()
    assert code == 3
    text = request.log_path.read_text()
    assert f"its {TUNNEL_RESTARTS} restarts are used up" in text
    assert aws.live(request.batch_id) == []
    assert plugin_processes() == []


class _Ssm:
    """Just enough of an SSM client for a Tunnel: counts sessions started and terminated."""

    class meta:  # mirrors botocore's client.meta
        endpoint_url = "http://127.0.0.1:9"

    def __init__(self) -> None:
        self.started = 0
        self.terminated = 0

    def start_session(self, **_: object) -> dict[str, str]:
        self.started += 1
        return {"SessionId": f"s-{self.started}", "TokenValue": "t", "StreamUrl": "tcp://127.0.0.1:9"}

    def terminate_session(self, **_: object) -> dict[str, str]:
        self.terminated += 1
        return {}


class _Session:
    region = "us-east-1"

    def __init__(self) -> None:
        self.ssm = _Ssm()


def test_closing_during_a_restart_leaves_no_process_and_no_session(tmp_path: Path) -> None:
    """close() cancels the watchdog, but a restart already runs in a worker thread; close must
    wait for it and end what it started (it used to outlive close, up to its /health bound)."""
    from autocad_bench.infrastructure.processes import pid_exists
    from autocad_bench_aws.tunnel import Tunnel

    plugin = tmp_path / "silent-session-manager-plugin"
    plugin.write_text("#!/bin/sh\nexec sleep 60\n")
    plugin.chmod(0o755)
    session = _Session()
    tunnel = Tunnel(session, "i-0123456789abcdef0", 8765, "t" * 43, {}, log=lambda line: None,  # type: ignore[arg-type]
                    plugin=str(plugin))

    async def scenario() -> tuple[int, str | None, float]:
        restart = asyncio.create_task(asyncio.to_thread(tunnel._open_one, 60.0))
        while tunnel.process is None:
            await asyncio.sleep(0.01)
        pid = tunnel.process.pid
        started = time.monotonic()
        await tunnel.close()
        why = await restart
        return pid, why, time.monotonic() - started

    pid, why, took = asyncio.run(scenario())
    assert why == "the tunnel is closing"
    assert took < 10, "close() waited for the restart's whole /health bound"
    assert not pid_exists(pid) and tunnel.process is None
    assert session.ssm.started == session.ssm.terminated == 1

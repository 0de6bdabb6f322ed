"""The SSM tunnel: a real (fake) session-manager-plugin child that the test kills mid-rollout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path

from autocad_bench.actions import action_request_id
from autocad_bench.actions.models import MoveAction
from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.errors import BrokerTransportExhausted
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest
from autocad_bench_aws.bounds import TUNNEL_RESTARTS
from autocad_bench_aws.plugin import AwsPlugin
from tests.aws.conftest import AwsEnv


def plugin_processes(instance_ids: Collection[str]) -> list[int]:
    """PIDs of live session-manager-plugin processes the tunnel started to ``instance_ids``.

    Only this test's own: under pytest-xdist other workers' rollouts (and other test sessions
    on the machine) run tunnels of their own at the same time. Killing every plugin on the
    machine used to make their clones fail admission ("exited with status -9"), so a clone
    was replaced: RunInstances 9 times for 8 rollouts, or a third host in a two-rollout batch.
    """
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
        if b"session-manager-plugin\0AWS_SSM_START_SESSION_RESPONSE" not in cmdline or zombie:
            continue
        argv = cmdline.decode("utf-8", "replace").split("\0")
        try:  # argv: plugin, response env name, region, "StartSession", profile, request JSON, endpoint
            target = json.loads(argv[argv.index("StartSession") + 2]).get("Target")
        except (ValueError, IndexError, AttributeError):
            continue
        if target in instance_ids:
            found.append(int(entry.name))
    return found


def instances_of(aws: AwsEnv, request: RolloutLaunchRequest) -> set[str]:
    """Every instance launched for ``request`` so far (each clone's)."""
    return {host.instance_id for host in list(aws.fake.hosts.values())
            if (host.config.batch_id, host.config.rollout_id) == (request.batch_id, request.rollout_id)}


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


def kill_tunnels(aws: AwsEnv, request: RolloutLaunchRequest, child: ActingChild, times: int, every_s: float,
                 stop: threading.Event, *, recovered: bool = False) -> list[int]:
    """Kill the rollout's live tunnel ``times`` times; returns one entry per outage (a pass that killed something).

    With ``recovered``, each outage is separate: the next kill waits until an action batch got
    through the restarted tunnel (on a loaded machine a restart can take longer than
    ``every_s``, and a kill landing on it would make one long outage of two).

    One pass may hit more than one process of the same tunnel (the plugin and a child it
    spawned), so outages are counted per pass, not per process.
    """
    outages: list[int] = []
    child.started.wait(30)
    while len(outages) < times and not stop.is_set():
        time.sleep(every_s)
        hit = []
        for pid in plugin_processes(instances_of(aws, request)):
            try:
                os.kill(pid, signal.SIGKILL)
                hit.append(pid)
            except ProcessLookupError:
                pass
        if hit:
            outages.append(hit[0])
            sent = child.sent
            while recovered and child.sent == sent and not stop.is_set():
                time.sleep(0.01)
    return outages


def test_the_watchdog_restarts_a_killed_tunnel_and_no_action_repeats(aws: AwsEnv) -> None:
    request = aws.request("tunnel")
    child = ActingChild(request.attempt_id, batches=40, pause_s=0.05)
    stop = threading.Event()
    killed: list[int] = []
    killer = threading.Thread(
        target=lambda: killed.extend(kill_tunnels(aws, request, child, 4, 0.35, stop, recovered=True)))
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
    assert instances_of(aws, request) and plugin_processes(instances_of(aws, request)) == []


def test_a_tunnel_that_keeps_dying_exhausts_its_restarts_and_the_rollout_fails(aws: AwsEnv) -> None:
    request = aws.request("doomed")
    child = ActingChild(request.attempt_id, batches=100000, pause_s=0.02)
    stop = threading.Event()
    killer = threading.Thread(target=kill_tunnels, args=(aws, request, child, 1000, 0.05, stop))
    killer.start()
    code = AwsPlugin().run_shared(request, child)
    stop.set()
    killer.join()
    assert code == 3
    text = request.log_path.read_text()
    assert f"its {TUNNEL_RESTARTS} restarts are used up" in text
    assert aws.live(request.batch_id) == []
    assert instances_of(aws, request) and plugin_processes(instances_of(aws, request)) == []


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

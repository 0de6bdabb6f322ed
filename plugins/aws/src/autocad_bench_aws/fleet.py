"""One status poller for the whole batch, shared by every sandbox in every process.

Sandboxes waiting for their instance register its id in a directory of the batch. On each
tick a waiter tries to take a file lock; the holder polls *all* registered ids at once
(``DescribeInstanceStatus``, 100 ids per request, then ``DescribeInstanceInformation`` for the
running ones, 50 per request) if the last poll is older than the current interval, and writes
the result atomically to ``status.json``, which every waiter reads. So a batch makes one set
of status calls per interval, however many rollouts wait, in shared mode (threads) and in
subprocess mode (processes) alike, and a crashed poller simply lets the next waiter take over.

The interval adapts: it doubles on throttling (up to the bound) and halves back on success.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocad_bench.infrastructure.processes import pid_exists
from autocad_bench.storage import atomic_write_bytes, atomic_write_json
from autocad_bench_aws.bounds import POLL_INTERVAL_MAX_S, POLL_INTERVAL_S, scaled
from autocad_bench_aws.calls import AwsCallError, AwsSession, call, chunks, error_code, is_throttle

STATE_DIR_ENV = "AUTOCAD_BENCH_STATE_DIR"
TERMINAL_STATES = frozenset({"shutting-down", "terminated", "stopping", "stopped"})
_ID = re.compile(r"i-[0-9a-f]{8,17}")


def fleet_dir(batch_id: str, environ: dict[str, str] | None = None) -> Path:
    """``$AUTOCAD_BENCH_STATE_DIR/aws-fleet/<batch>`` (default state dir ``~/.local/state/autocad-bench``)."""
    env = os.environ if environ is None else environ
    root = Path(env.get(STATE_DIR_ENV) or Path.home() / ".local" / "state" / "autocad-bench")
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", batch_id)[:200]
    return root / "aws-fleet" / safe


@dataclass(frozen=True, slots=True)
class InstanceView:
    """One instance as the shared poller last saw it in ``status.json`` (``ssm`` is the SSM ping
    status, ``None`` until the agent is known).
    """

    instance_id: str
    state: str
    instance_ok: bool
    system_ok: bool
    ssm: str | None

    @property
    def checks_ok(self) -> bool:
        return self.state == "running" and self.instance_ok and self.system_ok


class WaitFailed(Exception):
    """The instance did not reach the awaited state within its bound (or died)."""


class FleetPoller:
    """See the module docstring. ``session`` makes the poll calls of whichever waiter polls."""

    def __init__(self, directory: Path, session: AwsSession, *, interval_s: float | None = None) -> None:
        self.directory = directory
        self.session = session
        self.base_interval = interval_s if interval_s is not None else scaled(POLL_INTERVAL_S)
        self.max_interval = max(self.base_interval, scaled(POLL_INTERVAL_MAX_S))
        (directory / "watch").mkdir(parents=True, exist_ok=True)

    # --- registration ------------------------------------------------------------------------

    def watch(self, instance_id: str) -> None:
        """Register ``instance_id`` for this process, atomically.

        The registration appears complete (name and PID) or not at all: another waiter's
        :meth:`watched` in another thread or process never reads it half-written. A plain
        ``write_text`` creates the file empty before writing the PID, and a poller reading it
        in between saw PID 0, took it for a dead registration and deleted it: the instance was
        then never polled and its waiter ran into its bound (a needless clone replacement).
        """
        atomic_write_bytes(self.directory / "watch" / instance_id, str(os.getpid()).encode(), durable=False)

    def unwatch(self, instance_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / "watch" / instance_id).unlink()

    def watched(self) -> list[str]:
        """Registered ids whose process lives; registrations of dead processes are removed."""
        ids = []
        for path in sorted((self.directory / "watch").iterdir()):
            if not _ID.fullmatch(path.name):
                continue
            try:
                pid = int(path.read_text())
            except (OSError, ValueError):
                continue  # gone meanwhile, or not a registration: never taken for a dead one
            if pid_exists(pid):
                ids.append(path.name)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        return ids

    # --- status ------------------------------------------------------------------------------

    @property
    def status_path(self) -> Path:
        return self.directory / "status.json"

    def status(self) -> dict[str, Any]:
        try:
            value = json.loads(self.status_path.read_text())
            return value if isinstance(value, dict) else {}
        except (OSError, ValueError):
            return {}

    def view(self, instance_id: str) -> InstanceView | None:
        item = self.status().get("instances", {}).get(instance_id)
        if not isinstance(item, dict):
            return None
        return InstanceView(instance_id, str(item.get("state", "unknown")), bool(item.get("instance_ok")),
                            bool(item.get("system_ok")), item.get("ssm"))

    def tick(self) -> bool:
        """Poll for everyone if this caller gets the lock and the interval passed; True if it polled."""
        lock_path = self.directory / "poller.lock"
        with open(lock_path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                status = self.status()
                interval = float(status.get("interval", self.base_interval))
                if time.time() - float(status.get("polled_at", 0)) < interval:
                    return False
                self._poll(status, interval)
                return True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _poll(self, status: dict[str, Any], interval: float) -> None:
        ids = self.watched()
        instances: dict[str, Any] = dict(status.get("instances", {}))
        throttled = False
        try:
            if ids:
                instances.update(self._describe(ids))
                running = [i for i in ids if instances.get(i, {}).get("state") == "running"]
                for instance_id, ping in self._ssm(running).items():
                    instances[instance_id] = {**instances[instance_id], "ssm": ping}
            interval = max(self.base_interval, interval / 2)
        except AwsCallError as error:
            throttled = is_throttle(error.code)
            interval = min(self.max_interval, interval * 2) if throttled else interval
        keep = set(ids)
        atomic_write_json(self.status_path, {
            "polled_at": time.time(), "interval": interval,
            "instances": {k: v for k, v in instances.items() if k in keep},
            "polls": int(status.get("polls", 0)) + 1,
            "throttled": int(status.get("throttled", 0)) + int(throttled),
        })

    def _describe(self, ids: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for batch in chunks(ids, 100):
            remaining = list(batch)
            # A brand-new instance may not be visible yet; EC2 then rejects the whole request
            # naming the ids it does not know. Drop those (they stay 'pending') and ask again.
            for _ in range(2):
                try:
                    response = call("DescribeInstanceStatus", functools.partial(
                        self.session.ec2.describe_instance_status, InstanceIds=remaining, IncludeAllInstances=True),
                        retry_on=_retry_unless_not_found)
                except AwsCallError as error:
                    if error.code != "InvalidInstanceID.NotFound":
                        raise
                    unknown = set(_ID.findall(str(error))) & set(remaining)
                    remaining = [i for i in remaining if i not in unknown] if unknown else []
                    for instance_id in unknown or batch:
                        found[instance_id] = {"state": "pending", "instance_ok": False, "system_ok": False, "ssm": None}
                    if not remaining:
                        break
                    continue
                for item in response.get("InstanceStatuses", []):
                    found[item["InstanceId"]] = {
                        "state": item["InstanceState"]["Name"],
                        "instance_ok": item.get("InstanceStatus", {}).get("Status") == "ok",
                        "system_ok": item.get("SystemStatus", {}).get("Status") == "ok",
                        "ssm": None,
                    }
                break
        return found

    def _ssm(self, running: list[str]) -> dict[str, str]:
        pings: dict[str, str] = {}
        for batch in chunks(running, 50):
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"Filters": [{"Key": "InstanceIds", "Values": batch}], "MaxResults": 50}
                if token:
                    kwargs["NextToken"] = token
                page = call("DescribeInstanceInformation",
                            functools.partial(self.session.ssm.describe_instance_information, **kwargs))
                for item in page.get("InstanceInformationList", []):
                    pings[item["InstanceId"]] = str(item.get("PingStatus", ""))
                token = page.get("NextToken")
                if not token:
                    break
        return pings

    # --- waiting -----------------------------------------------------------------------------

    async def wait_for(self, instance_id: str, ready: Callable[[InstanceView], bool], timeout_s: float,
                       what: str) -> InstanceView:
        """Tick until ``ready(view)``; raise :class:`WaitFailed` on a terminal state or the deadline."""
        self.watch(instance_id)
        deadline = time.monotonic() + timeout_s
        last: InstanceView | None = None
        try:
            while True:
                await asyncio.to_thread(self.tick)
                last = self.view(instance_id)
                if last is not None and ready(last):
                    return last
                if last is not None and last.state in TERMINAL_STATES:
                    raise WaitFailed(f"{instance_id} is {last.state} while waiting for {what}")
                if time.monotonic() >= deadline:
                    seen = (f"state {last.state}, checks {last.instance_ok}/{last.system_ok}, ssm {last.ssm}"
                            if last else "never seen")
                    raise WaitFailed(f"{instance_id}: no {what} within {timeout_s:.0f} s ({seen})")
                await asyncio.sleep(min(self.base_interval / 4, 1.0))
        finally:
            self.unwatch(instance_id)


def _retry_unless_not_found(error: BaseException) -> bool:
    from autocad_bench_aws.calls import is_transient

    return error_code(error) != "InvalidInstanceID.NotFound" and is_transient(error)

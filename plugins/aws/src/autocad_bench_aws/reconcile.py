"""The batch-exit reconciler (also ``autocad-bench reap``) and the recovery queries.

One pass: a tag-scoped ``DescribeInstances`` (``BatchId``, every non-terminated state,
paginated) and one ``TerminateInstances`` for everything it found, with the bounded retries
of the retry matrix and no polling afterwards; on this host it also kills the tunnel
processes that wrappers killed with their controller left to those instances. Running it
again finds only instances that are already shutting down or gone, so it is idempotent.
"""

from __future__ import annotations

import functools
import shutil
from typing import Any

from autocad_bench_aws.calls import AwsCallError, AwsSession, call, chunks
from autocad_bench_aws.fleet import fleet_dir
from autocad_bench_aws.launch import terminate
from autocad_bench_aws.tunnel import stop_local_tunnels
from autocad_bench_aws.worker import BATCH_TAG, ROLLOUT_TAG

LIVE_STATES = ["pending", "running", "stopping", "stopped"]


def batch_instances(session: AwsSession, batch_id: str, states: list[str] | None = None) -> list[dict[str, Any]]:
    """Instances tagged with ``batch_id`` in ``states`` (default: not terminated or terminating)."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"Filters": [{"Name": f"tag:{BATCH_TAG}", "Values": [batch_id]},
                                              {"Name": "instance-state-name", "Values": states or LIVE_STATES}],
                                  "MaxResults": 1000}
        if token:
            kwargs["NextToken"] = token
        page = call("DescribeInstances", functools.partial(session.ec2.describe_instances, **kwargs))
        for reservation in page.get("Reservations", []):
            found.extend(reservation.get("Instances", []))
        token = page.get("NextToken")
        if not token:
            return found


def reap(session: AwsSession, batch_id: str) -> tuple[list[str], list[str]]:
    """One reconciliation pass; returns (cleaned, errors)."""
    try:
        instances = batch_instances(session, batch_id)
    except AwsCallError as error:
        return [], [f"DescribeInstances for BatchId={batch_id}: {error}"]
    ids = [i["InstanceId"] for i in instances]
    terminated: list[str] = []
    errors: list[str] = []
    for batch in chunks(ids, 1000):
        try:
            terminate(session.ec2, batch)
            terminated.extend(batch)
        except AwsCallError as error:
            errors.append(f"TerminateInstances {', '.join(batch)}: {error}")
    # A crashed controller's wrappers leave their tunnel processes behind on this host.
    tunnels = stop_local_tunnels(set(ids))

    def tunnel_note(instance_id: str) -> str:
        pids = tunnels.get(instance_id)
        return f" and its local tunnel process {', '.join(map(str, pids))}" if pids else ""

    cleaned = [f"instance {instance_id}{tunnel_note(instance_id)}" for instance_id in terminated]
    cleaned += [f"local tunnel process {', '.join(map(str, pids))} to instance {instance_id}"
                for instance_id, pids in tunnels.items() if instance_id not in terminated]
    shutil.rmtree(fleet_dir(batch_id), ignore_errors=True)
    return cleaned, errors


def rollout_workers(session: AwsSession, batch_id: str) -> dict[str, str]:
    """Rollout id to its newest pending/running instance (recovery's durable worker index: the tags)."""
    newest: dict[str, tuple[str, str]] = {}
    for instance in batch_instances(session, batch_id, ["pending", "running"]):
        labels = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        rollout = labels.get(ROLLOUT_TAG)
        if not rollout:
            continue
        launched = str(instance.get("LaunchTime", ""))
        if rollout not in newest or launched > newest[rollout][1]:
            newest[rollout] = (instance["InstanceId"], launched)
    return {rollout: pair[0] for rollout, pair in newest.items()}

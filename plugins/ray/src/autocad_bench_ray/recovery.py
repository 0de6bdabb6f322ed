"""Reaping and the recovery protocol of the ``ray`` backend: the batch's named actors.

Every desktop actor is detached and named after its rollout in the batch's namespace
(``<namespace_prefix>-<batch key>``), so it outlives the controller that created it and any
process connected to the cluster finds it again with ``ray.get_actor``:

- :func:`reap` tears down and kills every desktop actor of a batch (``reap_batch``);
- ``list_active_workers`` maps the batch's actors to worker ids ``ray:<namespace>/<rollout>``;
- :func:`worker_status` asks the actor (read-only): a verified desktop whose broker runs is
  reconnectable; a dead or never-launched actor is not;
- the recovery command (``python -m autocad_bench_ray.wrapper recover SPEC``) re-attaches:
  it waits until the old driver's heartbeats stopped (a subprocess-mode wrapper that
  survived its controller finishes the rollout itself; the command then only reports and
  evaluates), gets the URL and token from the actor, runs the exact child command (the
  pilot continues from its last committed turn; the broker's replay cache keeps every
  action exactly-once), tears down and evaluates.

A desktop nobody re-attaches to reaps itself after ``desktop_ttl_s`` without heartbeats.
"""

from __future__ import annotations

import re
from typing import Any

from autocad_bench.infrastructure import WorkerStatus
from autocad_bench_ray.bounds import STATUS_CALL_S
from autocad_bench_ray.lifecycle import RayLog, find_actor, parse_worker_id, teardown_actor, worker_id
from autocad_bench_ray.settings import RaySettings

WORKER_ID_PATTERN = re.compile(r"ray:[A-Za-z0-9_-]+-[0-9a-f]{12}/[A-Za-z0-9][A-Za-z0-9._-]*")


class RecoverySession:
    """The control plane of Ray recovery: the settings and the address of a connected cluster."""

    def __init__(self, settings: RaySettings, address: str | None) -> None:
        self.settings = settings
        self.address = address


def batch_actors(settings: RaySettings, batch_id: str) -> list[str]:
    """Names of the live named actors in ``batch_id``'s namespace (Ray must be connected)."""
    import ray

    namespace = settings.namespace(batch_id)
    return sorted(entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)
                  if entry.get("namespace") == namespace)


def reap(settings: RaySettings, batch_id: str, log: RayLog | None) -> tuple[list[str], list[str]]:
    """Tear down and kill every desktop actor of the batch; returns (cleaned, errors). Idempotent."""
    cleaned: list[str] = []
    errors: list[str] = []
    namespace = settings.namespace(batch_id)
    for name in batch_actors(settings, batch_id):
        actor = find_actor(namespace, name)
        if actor is None:
            continue
        outcome, lost = teardown_actor(actor, namespace, name, log or _NullLog())
        cleaned.append(f"desktop actor {namespace}/{name}" + (f" ({lost})" if lost else ""))
        if outcome is not None and outcome.errors:
            errors.extend(f"desktop actor {namespace}/{name}: {error}" for error in outcome.errors)
    return cleaned, errors


class _NullLog(RayLog):
    def __init__(self) -> None:
        pass

    def line(self, message: str) -> None:
        return None

    def node_lines(self, text: str) -> None:
        return None


def list_active_workers(settings: RaySettings, batch_id: str) -> dict[str, str]:
    """Rollout id -> worker id for every desktop actor of the batch."""
    namespace = settings.namespace(batch_id)
    return {name: worker_id(namespace, name) for name in batch_actors(settings, batch_id)}


def worker_status(worker: str) -> WorkerStatus:
    """Whether the desktop actor ``worker`` can be re-attached (read-only: one ``status`` call)."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    try:
        namespace, name = parse_worker_id(worker)
    except ValueError as error:
        return WorkerStatus(worker_id=worker, state="unknown", reconnectable=False, detail=str(error))
    actor = find_actor(namespace, name)
    if actor is None:
        return WorkerStatus(worker_id=worker, state="terminated", reconnectable=False,
                            detail="no such desktop actor: it was torn down, its node died or its TTL expired")
    try:
        status: Any = ray.get(actor.status.remote(), timeout=STATUS_CALL_S)
    except (RayActorError, GetTimeoutError) as error:
        return WorkerStatus(worker_id=worker, state="unknown", reconnectable=False,
                            detail=f"the desktop actor does not answer ({type(error).__name__})")
    where = f"on node {status.node.node_id[:12]} ({status.node.node_ip})"
    if status.state != "ready" or not status.broker_alive:
        return WorkerStatus(worker_id=worker, state="stopped", reconnectable=False,
                            detail=f"desktop {status.worker_id} {where} is {status.state}, broker "
                            f"{'running' if status.broker_alive else 'gone'}; terminate_worker removes it")
    return WorkerStatus(worker_id=worker, state="running", reconnectable=True,
                        detail=f"desktop {status.worker_id} {where} is verified and its broker runs (last heartbeat "
                        f"{status.seconds_since_heartbeat or 0:.0f} s ago); the recovery command re-attaches")


def terminate_worker(worker: str) -> bool:
    """Tear down and kill the desktop actor ``worker``; True once it is gone (also when it never existed)."""
    try:
        namespace, name = parse_worker_id(worker)
    except ValueError:
        return False
    actor = find_actor(namespace, name)
    if actor is None:
        return True
    outcome, _ = teardown_actor(actor, namespace, name, _NullLog())
    return find_actor(namespace, name) is None and (outcome is None or not outcome.errors)


def worker_id_from_log(log_text: str) -> str | None:
    """The last ray worker id named in a rollout log."""
    found = WORKER_ID_PATTERN.findall(log_text)
    return found[-1] if found else None

"""Admission on the cluster: nodes, desktop slots, free slots and per-node readiness probes.

One small Ray task is pinned to every alive node that offers the desktop resource
(``NodeAffinitySchedulingStrategy``, zero CPUs) and runs :func:`probe_node` there: Xvfb,
LibreCAD and xdotool found, fonts installed (``fc-list``), the broker package importable,
its version and a digest of its source equal to the controller's, and the node work
directory creatable. The probes start no desktop and write nothing.

For a ``local_cluster`` that is not running yet (plan mode), the probe runs in this process:
every node of a local cluster is this machine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from autocad_bench.infrastructure import CheckResult, PreflightReport, PreflightRequest
from autocad_bench_ray.settings import RaySettings
from autocad_bench_xvfb.preflight import INSTALL_HINT, TOOLS
from autocad_bench_xvfb.settings import LocalXvfbSettings

FONT_HINT = "apt-get install -y fonts-dejavu-core fontconfig"


class NodeProbe(BaseModel):
    """What one node's readiness probe found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: str = ""
    problems: tuple[str, ...] = ()
    broker_version: str | None = None
    broker_digest: str | None = None
    fonts: int = 0

    @property
    def ready(self) -> bool:
        return not self.problems


def broker_fingerprint() -> tuple[str | None, str | None]:
    """(version, digest) of the installed broker: the distribution version and a SHA-256 over its
    package's ``.py`` files (relative path and content, sorted). (None, None) when not installed."""
    spec = importlib.util.find_spec("autocad_bench_broker")
    if spec is None or not spec.submodule_search_locations:
        return None, None
    try:
        version: str | None = importlib.metadata.version("autocad-bench-broker")
    except importlib.metadata.PackageNotFoundError:
        version = None
    digest = hashlib.sha256()
    for location in spec.submodule_search_locations:
        root = Path(location)
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return version, digest.hexdigest()


def probe_node(settings: LocalXvfbSettings, node_work_dir: str, expected: tuple[str | None, str | None]) -> NodeProbe:
    """The readiness probe of this machine (runs on the node; read-only, starts no desktop)."""
    problems = []
    for tool, label in TOOLS:
        if shutil.which(settings.executable(tool)) is None:
            problems.append(f"{label} not found ({settings.executable(tool)!r}): {INSTALL_HINT}")
    fonts = 0
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        problems.append(f"fontconfig (fc-list) not found: {FONT_HINT}")
    else:
        try:
            listing = subprocess.run([fc_list], capture_output=True, text=True, timeout=20, check=False)
            fonts = len([line for line in listing.stdout.splitlines() if line.strip()])
        except (OSError, subprocess.TimeoutExpired) as error:
            problems.append(f"fc-list failed: {error}")
        if fonts == 0 and not problems:
            problems.append(f"no fonts installed: {FONT_HINT}")
    version, digest = broker_fingerprint()
    if version is None and digest is None:
        problems.append('the broker package is not installed: pip install "autocad-bench[broker]"')
    elif (version, digest) != expected:
        problems.append(f"broker {version} (digest {str(digest)[:12]}) differs from the controller's "
                        f"{expected[0]} (digest {str(expected[1])[:12]}); install the same autocad-bench-broker")
    existing = Path(node_work_dir)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not (existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)):
        problems.append(f"cannot create {node_work_dir} ({existing} is not writable)")
    return NodeProbe(problems=tuple(problems), broker_version=version, broker_digest=digest, fonts=fonts)


def _remote_probe(settings: LocalXvfbSettings, node_work_dir: str, expected: tuple[str | None, str | None],
                  node_id: str) -> NodeProbe:
    return probe_node(settings, node_work_dir, expected).model_copy(update={"node_id": node_id})


def cluster_nodes(settings: RaySettings) -> list[dict[str, Any]]:
    """Alive nodes with their total and free desktop slots (Ray must be connected)."""
    import ray

    free = ray._private.state.available_resources_per_node()  # type: ignore[no-untyped-call]
    nodes = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if not node.get("Alive"):
            continue
        slots = int(node["Resources"].get(settings.desktop_resource, 0))
        nodes.append({"node_id": node["NodeID"], "address": node["NodeManagerAddress"],
                      "hostname": node.get("NodeManagerHostname", ""), "desktop_slots": slots,
                      "free_slots": int(free.get(node["NodeID"], {}).get(settings.desktop_resource, 0))})
    return nodes


def probe_cluster(settings: RaySettings, nodes: list[dict[str, Any]]) -> dict[str, NodeProbe]:
    """Run :func:`probe_node` on every node with desktop slots (bounded by ``probe_timeout_s``)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    expected = broker_fingerprint()
    task = ray.remote(num_cpus=0, max_retries=0)(_remote_probe)
    refs = {node["node_id"]: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id=node["node_id"], soft=False)).remote(settings.desktop, settings.node_work_dir, expected,
                                                     node["node_id"])
            for node in nodes if node["desktop_slots"] > 0}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=settings.probe_timeout_s)
    done = set(ready)
    results: dict[str, NodeProbe] = {}
    for node_id, ref in refs.items():
        if ref not in done:
            ray.cancel(ref, force=True)
            results[node_id] = NodeProbe(node_id=node_id, problems=(
                f"the readiness probe did not answer within {settings.probe_timeout_s:g} s",))
            continue
        try:
            results[node_id] = ray.get(ref)
        except Exception as error:
            results[node_id] = NodeProbe(node_id=node_id, problems=(f"the probe failed: {type(error).__name__}",))
    return results


def run_preflight(request: PreflightRequest, settings: RaySettings) -> PreflightReport:
    """The admission report of the ``ray`` backend (see the module docstring).

    Admits ``min(max_concurrency, assignments, desktop slots of ready nodes)``; fails when no
    slot is ready, or (``require_all_nodes_ready``) when any node with slots is not ready,
    because Ray would place desktops on it.
    """
    from autocad_bench_ray.connection import ClusterUnavailable, ensure_cluster

    checks: list[CheckResult] = []
    expected = broker_fingerprint()
    nodes: list[dict[str, Any]]
    probes: dict[str, NodeProbe]
    try:
        address = ensure_cluster(settings, request.batch_id, start=False)
    except ClusterUnavailable as error:
        checks.append(CheckResult(name="cluster", passed=False, reason=str(error)))
        return PreflightReport(checks=tuple(checks), admitted_wave=0)
    if address is None:
        local = settings.local_cluster
        assert local is not None
        probe = probe_node(settings.desktop, settings.node_work_dir, expected)
        nodes = [{"node_id": f"local-{index}", "address": "127.0.0.1", "hostname": "this machine",
                  "desktop_slots": local.desktop_slots, "free_slots": local.desktop_slots}
                 for index in range(local.nodes)]
        probes = {node["node_id"]: probe.model_copy(update={"node_id": node["node_id"]}) for node in nodes}
        checks.append(CheckResult(name="cluster", passed=True,
                                  reason=f"a local cluster of {local.nodes} nodes x {local.desktop_slots} desktop "
                                  "slots on 127.0.0.1 starts with the first rollout",
                                  details={"address": "local", "nodes": local.nodes}))
    else:
        nodes = cluster_nodes(settings)
        probes = probe_cluster(settings, nodes)
        checks.append(CheckResult(name="cluster", passed=bool(nodes),
                                  reason=f"connected to {address}: {len(nodes)} alive node(s)",
                                  details={"address": address, "nodes": len(nodes)}))
    table: list[dict[str, Any]] = []
    for node in nodes:
        found = probes.get(node["node_id"])
        table.append({**node, "ready": found.ready if found else None,
                      "problems": list(found.problems) if found else [], "fonts": found.fonts if found else 0,
                      "broker_version": found.broker_version if found else None,
                      "broker_digest": found.broker_digest if found else None})
    offering = [row for row in table if row["desktop_slots"] > 0]
    not_ready = [row for row in offering if not row["ready"]]
    ready_slots = sum(row["desktop_slots"] for row in offering if row["ready"])
    free_slots = sum(row["free_slots"] for row in offering if row["ready"])
    readiness_ok = bool(offering) and not (not_ready and settings.require_all_nodes_ready)
    reasons = "; ".join(f"node {row['node_id'][:12]} ({row['address']}): {', '.join(row['problems'])}"
                        for row in not_ready)
    checks.append(CheckResult(
        name="node_readiness", passed=readiness_ok,
        reason=(f"{len(offering) - len(not_ready)} of {len(offering)} node(s) with '{settings.desktop_resource}' "
                f"slots ready (Xvfb, LibreCAD, xdotool, fonts, broker {expected[0]} digest "
                f"{str(expected[1])[:12]})" + (f"; not ready: {reasons}" if reasons else "")
                if offering else f"no alive node declares the '{settings.desktop_resource}' resource "
                f"(start nodes with --resources='{{\"{settings.desktop_resource}\": N}}')"),
        details={"nodes": table}))
    wave = max(0, min(request.max_concurrency, len(request.assignments), ready_slots))
    checks.append(CheckResult(
        name="capacity", passed=ready_slots >= 1,
        reason=(f"{ready_slots} desktop slot(s) on ready nodes, {free_slots} free now; admitting {wave} "
                "desktop(s) at once (Ray queues the rest)" if ready_slots else
                "the cluster cannot hold any desktop of this batch"),
        details={"desktop_slots": ready_slots, "free_slots": free_slots, "admitted_wave": wave}))
    return PreflightReport(checks=tuple(checks), admitted_wave=wave)

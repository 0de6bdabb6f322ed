"""``infrastructure.settings`` of the ``ray`` backend (unknown keys are rejected).

Where the cluster is (``address``, or ``local_cluster`` for a cluster this process starts on
127.0.0.1), how desktops are placed (the custom resource), the per-rollout bounds of the
controller's side (placement, TTL, heartbeat) and the desktop settings that every actor
hands to local-xvfb's sandbox on its node (``desktop``).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from autocad_bench_xvfb.settings import LocalXvfbSettings

DEFAULT_NODE_WORK_DIR = "/tmp/autocad-bench-ray"
"""Where each node keeps worker records, runtime directories and templates (node-local)."""


class LocalClusterSettings(BaseModel):
    """A Ray cluster of ``nodes`` nodes on this machine (127.0.0.1), started by the controller.

    Started lazily by the first rollout of a batch (never by plan mode) and shut down by
    ``reap_batch`` at batch exit. Meant for a laptop or CI; a real cluster uses ``address``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: int = Field(default=2, ge=1, le=8, description="Ray nodes to start on this machine")
    desktop_slots: int = Field(default=2, ge=1, le=64, description="'desktop' resource declared by each node")
    cpus_per_node: float = Field(default=1.0, gt=0, le=64, description="CPUs each node declares to Ray")
    start_timeout_s: float = Field(default=120.0, gt=0, le=600, description="bound on starting every node")


class RaySettings(BaseModel):
    """``infrastructure.settings`` of the ``ray`` backend.

    Exactly one of ``address`` (an existing cluster: ``auto``, ``host:port`` or
    ``ray://host:10001``) and ``local_cluster`` must be given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = Field(default=None, min_length=1,
                                description="Ray cluster address (auto, host:port or ray://host:port)")
    local_cluster: LocalClusterSettings | None = Field(
        default=None, description="start a cluster on this machine instead of joining one")
    desktop_resource: str = Field(default="desktop", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                  description="the custom resource one desktop consumes (one unit)")
    namespace_prefix: str = Field(default="autocad-bench", pattern=r"^[A-Za-z0-9_-]{1,40}$",
                                  description="namespace of a batch's named actors: <prefix>-<batch key>")
    node_work_dir: str = Field(default=DEFAULT_NODE_WORK_DIR, min_length=1,
                               description="absolute, node-local directory for records, runtime dirs, templates")
    placement_timeout_s: float = Field(default=600.0, gt=0, le=86400,
                                       description="a desktop actor must be placed on a node within this")
    launch_attempts: int = Field(default=2, ge=1, le=3,
                                 description="fresh desktop actors tried before the rollout fails (no model call yet)")
    heartbeat_s: float = Field(default=10.0, gt=0, le=600, description="controller heartbeat period per desktop")
    desktop_ttl_s: float = Field(default=300.0, gt=0, le=86400,
                                 description="a desktop without a heartbeat for this long reaps itself")
    probe_timeout_s: float = Field(default=60.0, gt=0, le=600, description="readiness probe of every node")
    require_all_nodes_ready: bool = Field(
        default=True, description="refuse the batch when any node that offers desktop slots fails its probe")
    expose_broker: bool = Field(
        default=True, description="on a node whose address is not loopback, forward <node ip>:<port> to the "
        "broker (which listens on 127.0.0.1 only) so the controller can reach it")
    desktop: LocalXvfbSettings = Field(default_factory=LocalXvfbSettings,
                                       description="local-xvfb settings of each desktop (state_dir and "
                                       "runtime_dir are set by this backend)")

    @field_validator("node_work_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not Path(value).is_absolute():
            raise ValueError("must be an absolute path")
        return value

    @model_validator(mode="after")
    def _one_cluster(self) -> RaySettings:
        if (self.address is None) == (self.local_cluster is None):
            raise ValueError("give exactly one of 'address' (an existing Ray cluster) and 'local_cluster'")
        if self.desktop.state_dir is not None or self.desktop.runtime_dir is not None:
            raise ValueError("desktop.state_dir and desktop.runtime_dir are set by the ray backend "
                             "(under node_work_dir); leave them out")
        if self.desktop_ttl_s <= 2 * self.heartbeat_s:
            raise ValueError("desktop_ttl_s must exceed two heartbeat periods (heartbeat_s)")
        return self

    def namespace(self, batch_id: str) -> str:
        """The Ray namespace of ``batch_id``'s desktop actors (one per batch)."""
        from autocad_bench_xvfb.registry import batch_key

        return f"{self.namespace_prefix}-{batch_key(batch_id)}"

    def node_desktop_settings(self, batch_id: str) -> LocalXvfbSettings:
        """The local-xvfb settings a desktop actor uses on its node (records and runtime under node_work_dir)."""
        from autocad_bench_xvfb.registry import batch_key

        root = Path(self.node_work_dir)
        return self.desktop.model_copy(update={"state_dir": str(root / "state"),
                                               "runtime_dir": str(root / "runtime" / batch_key(batch_id))})


ACTOR_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

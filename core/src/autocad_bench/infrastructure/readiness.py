"""The Windows broker's readiness record and the handoff checks every Windows backend makes on it.

A Windows worker's start-up writes ``ready.json`` once the broker listens in the console
session. Each backend's image adds fields of its own (a subclass of :class:`BrokerReadiness`)
and checks the boot its own way; the checks here are the same for all of them, and
:func:`health_identity` is what authenticated ``/health`` must then report.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

REQUIRED_DESKTOP = (1920, 1080)


class BrokerReadiness(BaseModel):
    """The fields of the broker's readiness record that every Windows image writes."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    rollout_id: str
    boot_id: str
    startup_id: str
    pid: int = Field(ge=1)
    ready_at: datetime
    interactive_session_id: int
    console_user: str
    desktop_width: int
    desktop_height: int
    broker_version: str
    input_driver_version: str
    manifest_sha256: str
    broker_port: int


def broker_problems(ready: BrokerReadiness, *, rollout_id: str, broker_version: str, broker_port: int) -> list[str]:
    """Whether the broker was armed for this rollout, is the expected build and port, and is interactive."""
    problems = []
    if ready.rollout_id != rollout_id:
        problems.append(f"the broker was armed for rollout {ready.rollout_id!r}, not {rollout_id!r}")
    if ready.broker_version != broker_version:
        problems.append(f"broker version {ready.broker_version}, expected {broker_version}")
    if ready.broker_port != broker_port:
        problems.append(f"broker port {ready.broker_port}, expected {broker_port}")
    if ready.interactive_session_id <= 0:
        problems.append("the broker is not in an interactive Windows session")
    return problems


def desktop_problems(ready: BrokerReadiness) -> list[str]:
    """Whether the desktop has the size every task was made for."""
    if (ready.desktop_width, ready.desktop_height) != REQUIRED_DESKTOP:
        return [f"desktop is {ready.desktop_width}x{ready.desktop_height}, not 1920x1080"]
    return []


def health_identity(ready: BrokerReadiness) -> dict[str, object]:
    """What authenticated ``/health`` must report for the exact process that passed readiness."""
    return {
        "pid": ready.pid, "startup_id": ready.startup_id, "boot_id": ready.boot_id,
        "interactive_session_id": ready.interactive_session_id, "broker_version": ready.broker_version,
        "input_driver_version": ready.input_driver_version, "manifest_sha256": ready.manifest_sha256,
        "desktop_width": ready.desktop_width, "desktop_height": ready.desktop_height,
    }

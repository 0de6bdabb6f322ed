"""The durable mark on each pool VM: its Hyper-V ``Notes`` field, one line of JSON.

A pool VM's Notes belong to the backend. The operator writes the first *free* mark when a
clone joins the pool (``docs/hyperv.md``); from then on every change is a compare-and-set
under the host's pool lock, from the exact Notes text the controller read to the new one, so
two controllers never both lease a VM. The mark carries no secret: the broker token goes to
the guest through PowerShell Direct and nowhere else.

States: ``free`` (may be leased if its broker version is the batch's), ``leased`` (batch,
rollout and attempt ids, the controller, and when the lease may be taken over),
``quarantined`` (failed admission; never leased again until an operator writes a free mark).
Notes that are not a mark (empty, or an operator's text) mean the VM is not in the pool.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MarkState = Literal["free", "leased", "quarantined"]
MARK_KEY = "autocad_bench"


class VmMark(BaseModel):
    """The parsed Notes of a pool VM."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    autocad_bench: Literal[1] = 1
    state: MarkState
    broker_version: str = Field(min_length=1, max_length=100)
    batch_id: str | None = None
    rollout_id: str | None = None
    attempt_id: str | None = None
    controller: str | None = Field(default=None, description="host:pid of the controller process that leased it")
    since: datetime | None = None
    expires_at: datetime | None = None
    reason: str | None = Field(default=None, max_length=400)

    def render(self) -> str:
        """The exact Notes text (compact JSON; the key order is fixed)."""
        return json.dumps(self.model_dump(mode="json", exclude_none=True), separators=(",", ":"))

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC))

    def owned_by(self, batch_id: str, rollout_id: str | None = None) -> bool:
        return self.batch_id == batch_id and (rollout_id is None or self.rollout_id == rollout_id)


def parse_mark(notes: str | None) -> VmMark | None:
    """The mark in ``notes``, or None when they are not a mark."""
    text = (notes or "").strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get(MARK_KEY) != 1:
        return None
    try:
        return VmMark.model_validate(data)
    except ValidationError:
        return None


def controller_identity() -> str:
    """``host:pid`` of this controller process (recorded in the lease marks it writes)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def free_mark(broker_version: str) -> VmMark:
    """The mark of a free pool VM with broker ``broker_version`` (written when a VM is returned)."""
    return VmMark(state="free", broker_version=broker_version)


def lease_mark(broker_version: str, *, batch_id: str, rollout_id: str, attempt_id: str, ttl_minutes: int) -> VmMark:
    """The mark of a VM leased now by this controller for one rollout attempt, taken over
    when it expires in ``ttl_minutes``.
    """
    now = datetime.now(UTC).replace(microsecond=0)
    return VmMark(state="leased", broker_version=broker_version, batch_id=batch_id, rollout_id=rollout_id,
                  attempt_id=attempt_id, controller=controller_identity(), since=now,
                  expires_at=now + timedelta(minutes=ttl_minutes))


def quarantine_mark(previous: VmMark, reason: str) -> VmMark:
    """The mark of a VM taken out of the pool after a failed admission, keeping the previous
    mark's ids; ``reason`` is put on one line and cut to 400 characters.
    """
    return VmMark(state="quarantined", broker_version=previous.broker_version, batch_id=previous.batch_id,
                  rollout_id=previous.rollout_id, attempt_id=previous.attempt_id,
                  since=datetime.now(UTC).replace(microsecond=0), reason=" ".join(reason.split())[:400])

"""Durable worker records: which local desktop (processes, display, runtime directory) a rollout holds.

A record is written (atomically) before the first process of a rollout starts and rewritten
as processes appear; teardown removes it only after it proved that nothing of the rollout
is left. A record therefore outlives a crashed controller, which is what ``reap_batch`` and
the recovery hooks read. Records never hold the broker token.

Layout: ``<state_dir>/<batch key>/<rollout_id>.json``, directories ``0700``, files ``0600``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autocad_bench.storage import atomic_write_json
from autocad_bench_xvfb.procs import ProcessRef

WORKER_ID_PATTERN = re.compile(r"local-xvfb-[0-9a-f]{16}")


def new_worker_id() -> str:
    return f"local-xvfb-{secrets.token_hex(8)}"


class WorkerRecord(BaseModel):
    """One live (or not yet cleaned) local desktop of one rollout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_id: str
    rollout_id: str
    attempt_id: str
    worker_id: str
    mode: Literal["shared", "subprocess"]
    created_at: datetime
    hostname: str
    owner: ProcessRef = Field(description="the controller (shared) or wrapper (subprocess) running the lifecycle")
    runtime_dir: str
    processes: tuple[ProcessRef, ...] = ()
    display: str | None = None
    broker_url: str | None = None
    broker_startup_id: str | None = None

    def with_process(self, ref: ProcessRef) -> WorkerRecord:
        return self.model_copy(update={"processes": (*self.processes, ref)})

    def process(self, role: str) -> ProcessRef | None:
        for ref in self.processes:
            if ref.role == role:
                return ref
        return None


def batch_key(batch_id: str) -> str:
    """A directory name for ``batch_id``: readable prefix plus a digest, so any id is safe."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", batch_id)[:48].lstrip(".") or "batch"
    return f"{readable}-{hashlib.sha256(batch_id.encode()).hexdigest()[:12]}"


class WorkerRegistry:
    """The records under one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)

    def path(self, batch_id: str, rollout_id: str) -> Path:
        return self.state_dir / batch_key(batch_id) / f"{rollout_id}.json"

    def write(self, record: WorkerRecord) -> Path:
        path = self.path(record.batch_id, record.rollout_id)
        for directory in (self.state_dir, path.parent):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_json(path, record.model_dump(mode="json"))
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
        return path

    def read(self, path: Path) -> WorkerRecord | None:
        try:
            return WorkerRecord.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            return None

    def get(self, batch_id: str, rollout_id: str) -> WorkerRecord | None:
        return self.read(self.path(batch_id, rollout_id))

    def remove(self, record: WorkerRecord) -> None:
        """Delete the record (only if it still names this worker) and an emptied batch directory."""
        path = self.path(record.batch_id, record.rollout_id)
        current = self.read(path)
        if current is not None and current.worker_id != record.worker_id:
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()

    def batch(self, batch_id: str) -> list[tuple[Path, WorkerRecord | None]]:
        """Every record file of the batch, with its record (None when unreadable)."""
        directory = self.state_dir / batch_key(batch_id)
        if not directory.is_dir():
            return []
        return [(path, self.read(path)) for path in sorted(directory.glob("*.json"))]

    def all(self) -> Iterator[WorkerRecord]:
        if not self.state_dir.is_dir():
            return
        for path in sorted(self.state_dir.glob("*/*.json")):
            record = self.read(path)
            if record is not None:
                yield record

    def find(self, worker_id: str) -> WorkerRecord | None:
        for record in self.all():
            if record.worker_id == worker_id:
                return record
        return None


def utcnow() -> datetime:
    return datetime.now(UTC)

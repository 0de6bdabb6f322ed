"""Durable worker records: which local desktop (processes, display, runtime directory) a rollout holds.

A record is written (atomically) before the first process of a rollout starts and rewritten
as processes appear; teardown removes it only after it proved that nothing of the rollout
is left. A record therefore outlives a crashed controller, which is what ``reap_batch`` and
the recovery hooks read. Records never hold the broker token.

The token lives next to the record in its own file, ``<rollout_id>.token``, so that a new
controller of the same user can re-attach to the desktop after a crash (see
:mod:`autocad_bench_xvfb.recovery`). It is created ``0600`` from the first byte (a
temporary file opened with ``O_CREAT | O_EXCL`` and mode ``0600``, then renamed into
place), holds the worker id next to the token so that it is never paired with another
desktop, is read only through :meth:`WorkerRegistry.read_token` (which refuses a file that
is not ``0600``, not owned by this user or a symbolic link) and is deleted with the record.

Layout: ``<state_dir>/<batch key>/<rollout_id>.json`` and ``<rollout_id>.token``,
directories ``0700``, files ``0600``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autocad_bench.storage import atomic_write_bytes, atomic_write_json
from autocad_bench_xvfb.procs import ProcessRef

WORKER_ID_PATTERN = re.compile(r"local-xvfb-[0-9a-f]{16}")


def new_worker_id() -> str:
    """A fresh random worker id, ``local-xvfb-`` and 16 hex digits (matches :data:`WORKER_ID_PATTERN`)."""
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
    controller: ProcessRef | None = Field(
        default=None, description="subprocess mode: the controller that started the wrapper (its parent)")
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


class TokenFileError(Exception):
    """A worker's token file is missing, unsafe or does not belong to the worker."""


TOKEN_SUFFIX = ".token"


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

    def token_path(self, record: WorkerRecord) -> Path:
        return self.path(record.batch_id, record.rollout_id).with_suffix(TOKEN_SUFFIX)

    def write_token(self, record: WorkerRecord, token: str) -> Path:
        """Store the broker token of ``record``'s worker; the file is ``0600`` from its creation."""
        path = self.token_path(record)
        for directory in (self.state_dir, path.parent):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(path.parent.stat().st_mode) != 0o700:
            os.chmod(path.parent, 0o700)
        payload = json.dumps({"worker_id": record.worker_id, "token": token}).encode()
        # Exactly 0600 from the temporary file's creation, whatever the umask.
        atomic_write_bytes(path, payload, mode=0o600)
        return path

    def read_token(self, record: WorkerRecord) -> str:
        """The broker token of ``record``'s worker; raises :class:`TokenFileError` when it is unsafe."""
        path = self.token_path(record)
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            raise TokenFileError(f"no token file {path}: the worker was started without one") from None
        except OSError as error:
            raise TokenFileError(f"cannot open the token file {path} ({error.strerror or error}); "
                                 "it must be a regular file, not a symbolic link") from None
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                raise TokenFileError(f"the token file {path} is not a regular file")
            if info.st_uid != os.getuid():
                raise TokenFileError(f"refusing the token file {path}: it is owned by uid {info.st_uid}, "
                                     f"not by this user (uid {os.getuid()})")
            mode = stat.S_IMODE(info.st_mode)
            if mode != 0o600:
                raise TokenFileError(f"refusing the token file {path}: its mode is {mode:04o}, not 0600 "
                                     "(another user may have read the token; the worker cannot be trusted)")
            raw = b""
            while chunk := os.read(descriptor, 65536):
                raw += chunk
        finally:
            os.close(descriptor)
        try:
            data = json.loads(raw)
            worker_id, token = data["worker_id"], data["token"]
        except (ValueError, KeyError, TypeError):
            raise TokenFileError(f"the token file {path} is not valid") from None
        if worker_id != record.worker_id or not isinstance(token, str) or not token:
            raise TokenFileError(f"the token file {path} belongs to another worker, not {record.worker_id}")
        return token

    def read(self, path: Path) -> WorkerRecord | None:
        try:
            return WorkerRecord.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            return None

    def get(self, batch_id: str, rollout_id: str) -> WorkerRecord | None:
        return self.read(self.path(batch_id, rollout_id))

    def remove(self, record: WorkerRecord) -> None:
        """Delete the token file and the record (only if it still names this worker) and an
        emptied batch directory."""
        path = self.path(record.batch_id, record.rollout_id)
        current = self.read(path)
        if current is not None and current.worker_id != record.worker_id:
            return
        # The token first: a token never outlives its record.
        with contextlib.suppress(FileNotFoundError):
            self.token_path(record).unlink()
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
    """The current time, timezone-aware in UTC (what records store)."""
    return datetime.now(UTC)

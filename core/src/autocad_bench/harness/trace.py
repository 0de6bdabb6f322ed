"""Writing the rollout trace: frames, JSONL logs and atomic state files."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from autocad_bench.harness.checkpoints import CheckpointStore
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import ResumeCheckpoint, RolloutResult, RunState
from autocad_bench.models import ArtifactRef
from autocad_bench.storage import (
    JsonlAppender,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_model,
    read_jsonl,
)


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (the timestamp of every trace record)."""
    return datetime.now(UTC)


class TraceWriter:
    """All file output of one pilot; every method leaves the directory consistent."""

    def __init__(self, paths: RolloutPaths) -> None:
        self.paths = paths
        paths.frames.mkdir(parents=True, exist_ok=True)
        # Read once: a resumed pilot must not append what the crashed one already wrote,
        # and scanning the files again every turn would make each turn slower than the last.
        self._receipt_requests = {r.get("request_id") for r in read_jsonl(paths.input_receipts)}
        self._summarised = {r.get("tool_use_id") for r in read_jsonl(paths.turn_summaries)}
        self._model_turns = JsonlAppender(paths.model_turns)
        self._summaries = JsonlAppender(paths.turn_summaries)
        self._receipts = JsonlAppender(paths.input_receipts)
        self._checkpoints = CheckpointStore(paths)

    def close(self) -> None:
        """Close the open trace logs and the checkpoint journal (idempotent; a later write reopens them)."""
        for appender in (self._model_turns, self._summaries, self._receipts):
            appender.close()
        self._checkpoints.close()

    # --- images ---------------------------------------------------------------------------

    def save_frame(
        self, sequence: int, png: bytes | memoryview, sha256: str, width: int, height: int
    ) -> ArtifactRef:
        """Store a frame (already checksum-verified by the broker client) and reference it.

        Atomic but not fsynced: the broker keeps every frame of a session, so a frame lost
        or torn by a host crash is fetched again on resume (:meth:`frame_intact` finds it)
        instead of paying two fsyncs per turn for it.
        """
        atomic_write_bytes(self.paths.frame(sequence), png, durable=False)
        return self.frame_ref(sequence, sha256, width, height)

    def frame_ref(self, sequence: int, sha256: str, width: int, height: int) -> ArtifactRef:
        return ArtifactRef(path=self.paths.frame_ref(sequence), sha256=sha256, width=width, height=height)

    def frame_intact(self, sequence: int, sha256: str) -> bool:
        """Whether frame ``sequence`` is on disk with exactly the SHA-256 ``sha256``."""
        try:
            data = self.paths.frame(sequence).read_bytes()
        except OSError:
            return False
        return hashlib.sha256(data).hexdigest() == sha256

    def save_reference(self, source: Path) -> ArtifactRef:
        """Copy the task's fixed reference image into the rollout (once)."""
        data = source.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if not self.paths.reference.exists():
            atomic_write_bytes(self.paths.reference, data, durable=False)
        return ArtifactRef(path="reference.png", sha256=digest)

    def save_drawing(self, suffix: str, data: bytes, sha256: str) -> ArtifactRef:
        path = self.paths.drawing(suffix)
        atomic_write_bytes(path, data)
        return ArtifactRef(path=path.name, sha256=sha256, media_type="application/octet-stream")

    # --- logs -----------------------------------------------------------------------------

    def model_turn(self, record: dict[str, Any]) -> None:
        self._model_turns.append(record)

    def turn_summary(self, record: dict[str, Any]) -> None:
        """Append one summary line unless this tool use is already summarised."""
        key = record.get("tool_use_id")
        if key in self._summarised:
            return
        self._summarised.add(key)
        self._summaries.append(record)

    def receipts(self, request_id: str, records: list[dict[str, Any]]) -> None:
        """Append the receipts of one batch unless that request id is already recorded."""
        if request_id in self._receipt_requests:
            return
        self._receipt_requests.add(request_id)
        self._receipts.append_many([{"request_id": request_id, **record} for record in records])

    # --- state ----------------------------------------------------------------------------

    def load_checkpoint(self) -> ResumeCheckpoint | None:
        """The newest durable checkpoint (file or journal), or ``None`` for a fresh rollout."""
        return self._checkpoints.load()

    @property
    def checkpoint_journalled(self) -> bool:
        """Whether ``resume-checkpoint.json`` may be behind its journal (compact before leaving)."""
        return self._checkpoints.journalled

    def checkpoint(self, checkpoint: ResumeCheckpoint, *, compact: bool = True) -> ResumeCheckpoint:
        """Make ``checkpoint`` durable; ``compact=False`` appends it to the journal instead
        of rewriting ``resume-checkpoint.json`` (see :mod:`~autocad_bench.harness.checkpoints`).
        Returns it with its new revision."""
        return self._checkpoints.write(checkpoint, compact=compact)

    def run_state(self, state: RunState) -> None:
        # Progress only: resume trusts the checkpoint, so no fsync on this hot path.
        atomic_write_model(self.paths.run_state, state, durable=False)

    def result(self, result: RolloutResult) -> None:
        atomic_write_model(self.paths.result, result)

    def json(self, path: Path, value: Any) -> None:
        """Write ``value`` (a pydantic model or plain JSON data) atomically and durably."""
        if isinstance(value, BaseModel):
            atomic_write_model(path, value)
        else:
            atomic_write_json(path, value)

"""Writing the rollout trace: frames, JSONL logs and atomic state files."""

from __future__ import annotations

import hashlib
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import ResumeCheckpoint, RolloutResult, RunState
from autocad_bench.models import ArtifactRef
from autocad_bench.storage import (
    append_jsonl,
    append_jsonl_many,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_model,
    read_jsonl,
)


def utcnow() -> datetime:
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

    # --- images ---------------------------------------------------------------------------

    def save_frame(self, sequence: int, png: bytes, sha256: str, width: int, height: int) -> ArtifactRef:
        """Store a frame (already checksum-verified by the broker client) and reference it."""
        path = self.paths.frame(sequence)
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
            atomic_write_bytes(path, png)
        return ArtifactRef(path=self.paths.frame_ref(sequence), sha256=sha256, width=width, height=height)

    def save_reference(self, source: Path) -> ArtifactRef:
        """Copy the task's fixed reference image into the rollout (once)."""
        data = source.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if not self.paths.reference.exists():
            tmp = self.paths.reference.with_suffix(".png.tmp")
            shutil.copyfile(source, tmp)
            os.replace(tmp, self.paths.reference)
        return ArtifactRef(path="reference.png", sha256=digest)

    def save_drawing(self, suffix: str, data: bytes, sha256: str) -> ArtifactRef:
        path = self.paths.drawing(suffix)
        atomic_write_bytes(path, data)
        return ArtifactRef(path=path.name, sha256=sha256, media_type="application/octet-stream")

    # --- logs -----------------------------------------------------------------------------

    def model_turn(self, record: dict[str, Any]) -> None:
        append_jsonl(self.paths.model_turns, record)

    def turn_summary(self, record: dict[str, Any]) -> None:
        """Append one summary line unless this tool use is already summarised."""
        key = record.get("tool_use_id")
        if key in self._summarised:
            return
        self._summarised.add(key)
        append_jsonl(self.paths.turn_summaries, record)

    def receipts(self, request_id: str, records: list[dict[str, Any]]) -> None:
        """Append the receipts of one batch unless that request id is already recorded."""
        if request_id in self._receipt_requests:
            return
        self._receipt_requests.add(request_id)
        append_jsonl_many(self.paths.input_receipts, [{"request_id": request_id, **record} for record in records])

    # --- state ----------------------------------------------------------------------------

    def load_checkpoint(self) -> ResumeCheckpoint | None:
        if not self.paths.checkpoint.exists():
            return None
        return ResumeCheckpoint.model_validate_json(self.paths.checkpoint.read_bytes())

    def checkpoint(self, checkpoint: ResumeCheckpoint) -> None:
        atomic_write_model(self.paths.checkpoint, checkpoint)

    def run_state(self, state: RunState) -> None:
        # Progress only: resume trusts resume-checkpoint.json, so no fsync on this hot path.
        atomic_write_model(self.paths.run_state, state, durable=False)

    def result(self, result: RolloutResult) -> None:
        atomic_write_model(self.paths.result, result)

    def json(self, path: Path, value: Any) -> None:
        """Write ``value`` (a pydantic model or plain JSON data) atomically and durably."""
        if isinstance(value, BaseModel):
            atomic_write_model(path, value)
        else:
            atomic_write_json(path, value)

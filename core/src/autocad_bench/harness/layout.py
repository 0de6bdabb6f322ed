"""File names of a rollout directory (the trace layout every backend must preserve)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RolloutPaths:
    """Paths inside ``rollouts/<rollout_id>/``."""

    root: Path

    @property
    def assignment(self) -> Path:
        return self.root / "assignment.json"

    @property
    def run_state(self) -> Path:
        return self.root / "run-state.json"

    @property
    def checkpoint(self) -> Path:
        return self.root / "resume-checkpoint.json"

    @property
    def checkpoint_journal(self) -> Path:
        """Checkpoints written since ``resume-checkpoint.json`` was last rewritten (see
        :mod:`autocad_bench.harness.checkpoints`); gone once the rollout has finished."""
        return self.root / "resume-journal.jsonl"

    @property
    def reference(self) -> Path:
        return self.root / "reference.png"

    @property
    def frames(self) -> Path:
        return self.root / "frames"

    def frame(self, sequence: int) -> Path:
        return self.frames / f"{sequence:06d}.png"

    def frame_ref(self, sequence: int) -> str:
        """The frame's path relative to the rollout directory (used in artifact references)."""
        return f"frames/{sequence:06d}.png"

    @property
    def model_turns(self) -> Path:
        return self.root / "model_turns.jsonl"

    @property
    def turn_summaries(self) -> Path:
        return self.root / "model_turn_summaries.jsonl"

    @property
    def input_receipts(self) -> Path:
        return self.root / "input_receipts.jsonl"

    @property
    def events(self) -> Path:
        return self.root / "events.json"

    @property
    def frame_events(self) -> Path:
        return self.root / "frame_events.json"

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def evaluation(self) -> Path:
        return self.root / "evaluation"

    def drawing(self, suffix: str) -> Path:
        """``attempt.dwg`` or ``attempt.dxf``: the controller-owned checkpointed drawing."""
        return self.root / f"attempt{suffix}"

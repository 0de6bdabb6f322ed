"""File names of a batch directory and its rollout directories (the trace layout every
backend must preserve, and every reader uses instead of spelling names itself)."""

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

    @property
    def evaluation_status(self) -> Path:
        """The evaluator's ``status.json`` (state, history, outcome once terminal)."""
        return self.evaluation / "status.json"

    @property
    def evaluation_score(self) -> Path:
        return self.evaluation / "score.json"

    @property
    def judge_score(self) -> Path:
        """The vision judge's verdict, when a judge ran."""
        return self.evaluation / "vision-judge" / "score.json"

    @property
    def evaluation_diff(self) -> Path:
        return self.evaluation / "diff.png"

    @property
    def evaluation_render(self) -> Path:
        return self.evaluation / "render.png"

    def relative(self, path: Path) -> str:
        """``path`` as a name relative to the rollout directory (``evaluation/score.json``)."""
        return path.relative_to(self.root).as_posix()

    def drawing(self, suffix: str) -> Path:
        """``attempt.dwg`` or ``attempt.dxf``: the controller-owned checkpointed drawing."""
        return self.root / f"attempt{suffix}"


@dataclass(frozen=True, slots=True)
class BatchPaths:
    """Paths inside a batch output directory."""

    root: Path

    @property
    def state(self) -> Path:
        """``batch-state.json``: the controller's durable record of every rollout."""
        return self.root / "batch-state.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def summary_csv(self) -> Path:
        return self.root / "summary.csv"

    @property
    def admission(self) -> Path:
        return self.root / "admission.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def rollouts(self) -> Path:
        return self.root / "rollouts"

    def log(self, rollout_id: str) -> Path:
        """The controller's and backend's log of one rollout: ``logs/<rollout_id>.log``."""
        return self.logs / f"{rollout_id}.log"

    def rollout(self, rollout_id: str) -> RolloutPaths:
        """The paths of ``rollouts/<rollout_id>/`` (the id must already be validated)."""
        return RolloutPaths(self.rollouts / rollout_id)

"""The child harness ("pilot"): one rollout's model loop, traces and exact resume."""

from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import FailureClass, ResumeCheckpoint, RolloutResult, RunState

__all__ = ["FailureClass", "PilotAssignment", "ResumeCheckpoint", "RolloutPaths", "RolloutResult", "RunState"]

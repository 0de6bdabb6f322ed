"""Writing small batch output directories with known outcomes, for the metrics tests.

Only the files the metrics reader looks at are written (batch-state.json, result.json,
evaluation/score.json), in the shapes the controller and the evaluator write them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Trial:
    task: str
    passed: bool | None
    score: float | None = None
    family: str | None = None
    skill: str = "draft"
    difficulty: str = "easy"
    trial: int = 1
    state: str = "done"
    failure_class: str | None = None
    stop_reason: str | None = "done"
    turns: int = 4
    token_cost_usd: float = 0.0
    infrastructure_cost_usd: float = 0.0
    tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def write_run(directory: Path, model: str, trials: list[Trial], *, provider: str = "scripted",
              suite: str | None = "smoke", suite_sha256: str | None = "a" * 64, evaluator_version: str = "2026.12.2",
              step_budget: int | None = None, trials_setting: int = 3, tool_mode: str = "function",
              batch_id: str | None = None, models: dict[str, list[Trial]] | None = None,
              extra_state: dict[str, Any] | None = None, conditions: bool = True) -> Path:
    """A finished batch in ``directory`` holding ``trials`` of ``model`` (plus ``models``)."""
    everything = {model: trials, **(models or {})}
    entries = []
    for name, items in everything.items():
        for t in items:
            rollout_id = f"{name}-{t.task}.t{t.trial}"
            root = directory / "rollouts" / rollout_id
            (root / "evaluation").mkdir(parents=True, exist_ok=True)
            provenance = {"family": t.family, "skill": t.skill, "difficulty": t.difficulty}
            (root / "result.json").write_text(json.dumps({
                "task_provenance": provenance, "turns": t.turns, "usage": {"input_tokens": t.tokens},
                "token_cost_usd": t.token_cost_usd}))
            if t.passed is not None:
                score = t.score if t.score is not None else (1.0 if t.passed else 0.0)
                (root / "evaluation" / "score.json").write_text(json.dumps({"score": score, "passed": t.passed}))
            entries.append({
                "rollout_id": rollout_id, "assignment_id": f"{name}-{t.task}", "trial": t.trial,
                "task_id": t.task, "provider": provider, "model": name, "tool_mode": tool_mode,
                "attempt_id": f"b.{rollout_id}.1", "infrastructure_backend": "local-xvfb", "state": t.state,
                "started_at": "2026-12-02T10:00:00+00:00", "finished_at": "2026-12-02T10:00:10+00:00",
                "failure_class": t.failure_class, "stop_reason": t.stop_reason, "turns": t.turns,
                "token_cost_usd": t.token_cost_usd, "infrastructure_cost_usd": t.infrastructure_cost_usd,
                **t.extra})
    state = {
        "version": 1, "batch_id": batch_id or directory.name, "name": directory.name, "config_path": "x.json",
        "created_at": "2026-12-02T10:00:00+00:00", "updated_at": "2026-12-02T10:00:00+00:00",
        "status": "finished", "execution_mode": "shared", "max_concurrency": 1, "admitted_wave": 1,
        "infrastructure_backend": "local-xvfb", "infrastructure": {}, "evaluation": {"enabled": True},
        "budgets": {"max_actions": 5000, "max_turns": step_budget},
        "conditions": {"suite": suite, "suite_sha256": suite_sha256, "evaluator_version": evaluator_version,
                       "step_budget": step_budget, "max_actions": 5000, "trials": trials_setting},
        "rollouts": entries, **(extra_state or {}),
    }
    if not conditions:
        del state["conditions"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "batch-state.json").write_text(json.dumps(state))
    return directory


def pattern(passes: list[int], *, k: int = 3, fail_score: float = 0.0, prefix: str = "task",
            families: list[str] | None = None, cost: float = 0.0) -> list[Trial]:
    """Task i passes its first ``passes[i]`` of ``k`` trials; failures score ``fail_score``."""
    out = []
    for i, c in enumerate(passes):
        family = families[i] if families else f"fam-{i}"
        for n in range(1, k + 1):
            ok = n <= c
            out.append(Trial(task=f"{prefix}-{i}", passed=ok, score=1.0 if ok else fail_score, family=family,
                             trial=n, token_cost_usd=cost))
    return out

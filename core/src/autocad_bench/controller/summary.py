"""The batch summary: per-rollout outcomes and per-model metrics (summary.json, .csv, table).

The per-model part is :func:`autocad_bench.metrics.model_rows`: every figure carries its
95% interval, its flags and the conditions it was measured under.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from autocad_bench.controller.state import BatchState
from autocad_bench.harness.layout import BatchPaths, RolloutPaths
from autocad_bench.storage import atomic_write_bytes, atomic_write_json


def read_scores(rollout_dir: Path) -> tuple[float | None, bool | None, float | None]:
    """Deterministic score, pass flag and (separately) the judge's score, when present."""
    score = passed = judge = None
    try:
        data = json.loads(RolloutPaths(rollout_dir).evaluation_score.read_text())
        score, passed = float(data["score"]), bool(data["passed"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        judge = float(json.loads(RolloutPaths(rollout_dir).judge_score.read_text())["score"])
    return score, passed, judge


def build_summary(output_dir: Path, state: BatchState) -> dict[str, Any]:
    """Read every rollout's result and evaluation; aggregate per (provider, model)."""
    rollouts = []
    for entry in state.rollouts:
        rollout_dir = BatchPaths(output_dir).rollout(entry.rollout_id).root
        score, passed, judge = read_scores(rollout_dir)
        tokens = 0
        try:
            usage = json.loads((rollout_dir / "result.json").read_text()).get("usage", {})
            tokens = sum(int(v) for k, v in usage.items() if k != "reasoning_tokens")
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        # One definition of a rollout's wall time everywhere: the sandbox's lifetime as the
        # controller measured it (provisioning, the pilot, evaluation, release). result.json's
        # wall_seconds is the pilot's own share of it (see docs/harness.md).
        wall = entry.infrastructure_seconds
        if wall is None and entry.started_at and entry.finished_at:
            wall = (entry.finished_at - entry.started_at).total_seconds()
        rollouts.append({
            "rollout_id": entry.rollout_id, "task_id": entry.task_id, "provider": entry.provider,
            "model": entry.model, "assignment_id": entry.assignment_id or entry.rollout_id,
            "trial": entry.trial, "tool_mode": entry.tool_mode, "state": entry.state,
            "failure_class": entry.failure_class, "stop_reason": entry.stop_reason, "score": score,
            "passed": passed, "judge_score": judge,
            # Spend of every attempt: an interrupted attempt that resume ran again still cost.
            "tokens": tokens, "token_cost_usd": entry.total_token_cost_usd,
            "infrastructure_cost_usd": entry.total_infrastructure_cost_usd,
            "attempts": 1 + len(entry.earlier_attempts),
            "wall_seconds": round(wall, 3) if wall is not None else None,
        })
    # Per-model figures come from the metrics module, with their intervals and conditions;
    # the state is on disk already (the store writes every change), so read it back from there.
    from autocad_bench.metrics import model_rows, read_run  # numpy and scipy: only when summarising

    rows, notes = model_rows([read_run(output_dir)])
    return {"batch_id": state.batch_id, "name": state.name, "counts": dict(state.counts),
            "conditions": state.conditions.model_dump(mode="json") if state.conditions else None,
            "models": [row.model_dump(mode="json") for row in rows], "notes": notes, "rollouts": rollouts}


def compact_models(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The model rows without their per-skill/family/difficulty breakdowns (for one-line output)."""
    return [{k: v for k, v in m.items() if k not in ("by_skill", "by_family", "by_difficulty")}
            for m in summary["models"]]


def write_summary(output_dir: Path, summary: dict[str, Any]) -> None:
    """``summary.json`` and ``summary.csv`` (one row per rollout), both atomic."""
    atomic_write_json(BatchPaths(output_dir).summary, summary)
    buffer = io.StringIO()
    fields = list(summary["rollouts"][0]) if summary["rollouts"] else ["rollout_id"]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(summary["rollouts"])
    atomic_write_bytes(BatchPaths(output_dir).summary_csv, buffer.getvalue().encode())


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """The per-model table (intervals, budgets, cost) and every row's flags, on stderr."""
    if console is None:
        console = Console(stderr=True)
        if not console.is_terminal:
            # Logs and CI captures are not 80 columns wide: never truncate model names there.
            console = Console(stderr=True, width=220)
    from autocad_bench.metrics import ModelRow
    from autocad_bench.metrics.tables import print_rows

    rows = [ModelRow.model_validate(m) for m in summary["models"]]
    print_rows(rows, title=f"batch {summary['batch_id']}", notes=summary.get("notes", []), console=console)

"""The batch summary: per-rollout outcomes and per-model aggregates (summary.json, .csv, table)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from autocad_bench.controller.state import BatchState
from autocad_bench.storage import atomic_write_bytes, atomic_write_json


def read_scores(rollout_dir: Path) -> tuple[float | None, bool | None, float | None]:
    """Deterministic score, pass flag and (separately) the judge's score, when present."""
    score = passed = judge = None
    try:
        data = json.loads((rollout_dir / "evaluation" / "score.json").read_text())
        score, passed = float(data["score"]), bool(data["passed"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        judge = float(json.loads((rollout_dir / "evaluation" / "vision-judge" / "score.json").read_text())["score"])
    return score, passed, judge


def build_summary(output_dir: Path, state: BatchState) -> dict[str, Any]:
    """Read every rollout's result and evaluation; aggregate per (provider, model)."""
    rollouts = []
    for entry in state.rollouts:
        rollout_dir = output_dir / "rollouts" / entry.rollout_id
        score, passed, judge = read_scores(rollout_dir)
        tokens = 0
        try:
            usage = json.loads((rollout_dir / "result.json").read_text()).get("usage", {})
            tokens = sum(int(v) for k, v in usage.items() if k != "reasoning_tokens")
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        wall = None
        if entry.started_at and entry.finished_at:
            wall = (entry.finished_at - entry.started_at).total_seconds()
        rollouts.append({
            "rollout_id": entry.rollout_id, "task_id": entry.task_id, "provider": entry.provider,
            "model": entry.model, "state": entry.state, "failure_class": entry.failure_class,
            "stop_reason": entry.stop_reason, "score": score, "passed": passed, "judge_score": judge,
            "tokens": tokens, "token_cost_usd": entry.token_cost_usd or 0.0,
            "infrastructure_cost_usd": entry.infrastructure_cost_usd or 0.0,
            "wall_seconds": round(wall, 3) if wall is not None else None,
        })
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rollouts:
        groups[(str(row["provider"]), str(row["model"]))].append(row)
    models = []
    for (provider, model), rows in sorted(groups.items()):
        scored = [r["score"] for r in rows if r["score"] is not None]
        models.append({
            "provider": provider, "model": model, "rollouts": len(rows),
            "completed": sum(r["state"] == "done" for r in rows),
            "pass_rate": round(sum(bool(r["passed"]) for r in rows) / len(rows), 4),
            "mean_score": round(sum(scored) / len(scored), 4) if scored else None,
            "tokens": sum(r["tokens"] for r in rows),
            "token_cost_usd": round(sum(r["token_cost_usd"] for r in rows), 6),
            "infrastructure_cost_usd": round(sum(r["infrastructure_cost_usd"] for r in rows), 6),
            "wall_seconds": round(sum(r["wall_seconds"] or 0.0 for r in rows), 3),
        })
    return {"batch_id": state.batch_id, "name": state.name, "counts": dict(state.counts),
            "models": models, "rollouts": rollouts}


def write_summary(output_dir: Path, summary: dict[str, Any]) -> None:
    """``summary.json`` and ``summary.csv`` (one row per rollout), both atomic."""
    atomic_write_json(output_dir / "summary.json", summary)
    buffer = io.StringIO()
    fields = list(summary["rollouts"][0]) if summary["rollouts"] else ["rollout_id"]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(summary["rollouts"])
    atomic_write_bytes(output_dir / "summary.csv", buffer.getvalue().encode())


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """A per-model table: rollouts, pass rate, mean score, tokens, costs, wall time."""
    if console is None:
        console = Console(stderr=True)
        if not console.is_terminal:
            # Logs and CI captures are not 80 columns wide: never truncate model names there.
            console = Console(stderr=True, width=200)
    table = Table(title=f"batch {summary['batch_id']}")
    for column in ("provider/model", "rollouts", "done", "pass rate", "mean score", "tokens",
                   "token $", "infra $", "wall s"):
        table.add_column(column, justify="left" if column == "provider/model" else "right")
    for m in summary["models"]:
        table.add_row(f"{m['provider']}/{m['model']}", str(m["rollouts"]), str(m["completed"]),
                      f"{m['pass_rate']:.0%}", "-" if m["mean_score"] is None else f"{m['mean_score']:.3f}",
                      f"{m['tokens']:,}", f"{m['token_cost_usd']:.4f}", f"{m['infrastructure_cost_usd']:.4f}",
                      f"{m['wall_seconds']:.1f}")
    console.print(table)

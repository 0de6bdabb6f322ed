"""Synthetic output trees for the dashboard tests (the layout of docs/harness.md)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

NOW = "2026-11-30T06:00:00+00:00"


def png(width: int = 64, height: int = 36, rgb: tuple[int, int, int] = (30, 30, 40)) -> bytes:
    """A valid solid-colour RGB PNG (no Pillow needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height, 9)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def entry(rollout_id: str, state: str = "queued", *, model: str = "m-1", provider: str = "scripted",
          task_id: str = "line-and-circle", **extra: Any) -> dict[str, Any]:
    return {"rollout_id": rollout_id, "task_id": task_id, "provider": provider, "model": model,
            "attempt_id": f"b.{rollout_id}.1", "infrastructure_backend": "example-pool", "state": state, **extra}


def batch_state(rollouts: list[dict[str, Any]], *, name: str = "synthetic", evaluation: bool = False,
                config_path: str | None = None, status: str = "running") -> dict[str, Any]:
    return {
        "version": 1, "batch_id": f"{name}-id", "name": name, "config_path": config_path or "/nonexistent.json",
        "created_at": NOW, "updated_at": NOW, "finished_at": None, "status": status, "execution_mode": "shared",
        "max_concurrency": 2, "admitted_wave": 2, "infrastructure_backend": "example-pool",
        "infrastructure": {"backend": "example-pool", "settings": {"token_env": "EXAMPLE_POOL_TOKEN"}},
        "evaluation": {"enabled": evaluation}, "budgets": {"max_actions": 5000, "max_cost_usd": 2.0},
        "counts": {}, "rollouts": rollouts, "disabled_rollouts": [],
    }


def write_batch(directory: Path, state: dict[str, Any]) -> Path:
    (directory / "rollouts").mkdir(parents=True, exist_ok=True)
    (directory / "batch-state.json").write_text(json.dumps(state))
    return directory


def run_state(phase: str = "running", *, turns: int = 0, actions: int = 0, cost: float = 0.0,
              elapsed: float = 1.0) -> dict[str, Any]:
    return {"rollout_id": "r", "attempt_id": "a", "phase": phase, "pid": 1, "attempts": 1, "turns": turns,
            "actions": actions, "next_index": actions, "invalid_streak": 0, "invalid_total": 0, "cost_usd": cost,
            "elapsed_s": elapsed, "counters": {"responses": turns}, "stop_reason": None, "updated_at": NOW}


CLICK = {"type": "click", "x": 100, "y": 200, "button": "left", "count": 1}
DRAG = {"type": "drag", "path": [[10, 10], [40, 30], [60, 20]], "button": "left"}
TYPE = {"type": "type", "text": "line"}
KEY = {"type": "key", "keys": ["enter"]}


def turn_record(index: int, frame: int, actions: list[dict[str, Any]], *, valid: bool = True,
                cost: float = 0.01, width: int = 64, height: int = 36) -> dict[str, Any]:
    return {"turn_index": index, "attempt": 1, "tool_use_id": f"t{index}", "response_id": f"r{index}",
            "action_input": {"actions": actions}, "malformed": None, "text": f"thinking about turn {index}",
            "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}, "cost_usd": cost,
            "observation": {"frame": {"path": f"frames/{frame:06d}.png", "sha256": "0" * 64, "width": width,
                                      "height": height, "media_type": "image/png"},
                            "feedback": "", "remaining_actions": 5000},
            "validation": {"valid": valid, "problems": [] if valid else ["x is off the display"]},
            "retries": [], "at": NOW}


def rollout_dir(batch: Path, rollout_id: str, *, turns: int = 3, phase: str = "running",
                torn: bool = False, frames: int | None = None) -> Path:
    """A rollout with ``turns`` executed turns (click, drag, type, key each) and their frames."""
    root = batch / "rollouts" / rollout_id
    (root / "frames").mkdir(parents=True, exist_ok=True)
    image = png()
    count = turns + 1 if frames is None else frames
    for sequence in range(count):
        (root / "frames" / f"{sequence:06d}.png").write_bytes(image)
    (root / "reference.png").write_bytes(png(rgb=(255, 255, 255)))
    lines, summaries, receipts = [], [], []
    for i in range(turns):
        actions = [CLICK, DRAG, TYPE, KEY]
        lines.append(json.dumps(turn_record(i, i, actions)))
        summaries.append(json.dumps({"turn_index": i, "tool_use_id": f"t{i}", "valid": True, "actions": 4,
                                     "next_index": 4 * (i + 1), "cost_usd": 0.01 * (i + 1), "elapsed_s": i + 1.0}))
        for k, action in enumerate(actions):
            receipts.append(json.dumps({"request_id": f"req{i}", "index": 4 * i + k, "type": action["type"],
                                        "ok": True, "error": None, "injected_at": NOW, "replayed": False,
                                        "turn_index": i}))
    body = "\n".join(lines) + ("\n" if lines else "")
    if torn:
        body += '{"turn_index": 99, "action_inp'
    (root / "model_turns.jsonl").write_text(body)
    (root / "model_turn_summaries.jsonl").write_text("".join(s + "\n" for s in summaries))
    (root / "input_receipts.jsonl").write_text("".join(r + "\n" for r in receipts))
    (root / "frame_events.json").write_text(json.dumps({"frame_events": [
        {"request_id": f"req{i}", "sequence": i + 1, "first_index": 4 * i, "next_index": 4 * (i + 1)}
        for i in range(turns)]}))
    (root / "events.json").write_text(json.dumps({"events": [{"seq": 0, "kind": "lease", "at": NOW, "detail": {}}]}))
    (root / "run-state.json").write_text(json.dumps(run_state(phase, turns=turns, actions=4 * turns,
                                                              cost=0.01 * turns)))
    (root / "assignment.json").write_text(json.dumps({"budgets": {"max_actions": 5000, "max_cost_usd": 2.0},
                                                      "credential_names": ["OPENAI_API_KEY"]}))
    return root


def evaluation_dir(rollout: Path, *, score: float | None = 0.8, judge: float | None = 0.7, state: str = "done",
                   images: bool = True) -> Path:
    folder = rollout / "evaluation"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "status.json").write_text(json.dumps({"state": state, "task_id": "t", "evaluator_version": "v",
                                                    "updated_at": NOW, "history": [{"state": state, "at": NOW}]}))
    if score is not None:
        (folder / "score.json").write_text(json.dumps({
            "kind": "deterministic", "score": score, "passed": score >= 0.75, "pass_threshold": 0.75, "valid": True,
            "components": {"lines": {"score": 1.0, "weight": 1.0, "applicable": True, "gold": 1, "candidate": 1,
                                     "matched": 1.0},
                           "circles": {"score": 0.6, "weight": 1.0, "applicable": True, "gold": 1, "candidate": 1,
                                       "matched": 0.6}}}))
    if judge is not None:
        (folder / "vision-judge").mkdir(exist_ok=True)
        (folder / "vision-judge" / "score.json").write_text(json.dumps({
            "kind": "vision-judge", "model": "judge-model", "score": judge, "passed": judge >= 0.5,
            "rationale": "the circle is slightly off"}))
    if images:
        (folder / "render.png").write_bytes(png(rgb=(250, 250, 250)))
        (folder / "gold-render.png").write_bytes(png(rgb=(240, 240, 240)))
        (folder / "diff.png").write_bytes(png(rgb=(200, 60, 60)))
    return folder


def scored_rollout(batch: Path, rollout_id: str, score: float | None, *, passed: bool | None = None,
                   provenance: dict[str, str] | None = None, usage: dict[str, int] | None = None) -> Path:
    """The files the metrics read for one rollout: ``evaluation/score.json`` (when ``score``
    is not None), ``result.json`` with its usage and ``assignment.json`` with its task
    provenance (family, skill, difficulty)."""
    root = batch / "rollouts" / rollout_id
    (root / "evaluation").mkdir(parents=True, exist_ok=True)
    if score is not None:
        (root / "evaluation" / "score.json").write_text(json.dumps({
            "kind": "deterministic", "score": score, "passed": score >= 0.75 if passed is None else passed,
            "pass_threshold": 0.75, "valid": True, "components": {}}))
    (root / "result.json").write_text(json.dumps({"usage": usage or {"input_tokens": 1000, "output_tokens": 100}}))
    (root / "assignment.json").write_text(json.dumps({"task_provenance": provenance or {}}))
    return root


# --- runs for the leaderboard -------------------------------------------------------------------

SCRIPT_MODEL = "<script>alert('x')</script>&"


def metrics_batch(directory: Path, name: str, rollouts: list[dict[str, Any]], *, suite: str = "core",
                  evaluator: str = "eval-1", step_budget: int | None = 50, trials: int = 1) -> Path:
    """A finished batch whose rollouts carry exactly what :func:`autocad_bench.metrics.read_run`
    reads. Each rollout spec: model, task, score (None: unscored), and optionally provider,
    trial, cost, infra, family, skill, difficulty, state, failure_class, turns, passed."""
    entries = []
    for i, spec in enumerate(rollouts):
        rollout_id = f"{name}-{i:04d}"
        state = spec.get("state", "done")
        entries.append(entry(
            rollout_id, state, provider=spec.get("provider", "scripted"), model=spec["model"],
            task_id=spec["task"], assignment_id=f"{name}-{spec['model']}-{spec['task']}",
            trial=spec.get("trial", 1), token_cost_usd=spec.get("cost", 0.1),
            infrastructure_cost_usd=spec.get("infra", 0.0), turns=spec.get("turns", 10),
            failure_class=spec.get("failure_class"), stop_reason=None,
            started_at="2026-11-30T06:00:00+00:00", finished_at="2026-11-30T06:01:30+00:00"))
        provenance = {k: spec[k] for k in ("family", "skill", "difficulty") if spec.get(k)}
        scored_rollout(directory, rollout_id, spec.get("score"), passed=spec.get("passed"), provenance=provenance)
    state = batch_state(entries, name=name, evaluation=True, status="finished")
    state["conditions"] = {"suite": suite, "evaluator_version": evaluator, "step_budget": step_budget,
                           "max_actions": 5000, "trials": trials}
    return write_batch(directory, state)


def leaderboard_runs(root: Path) -> list[Path]:
    """Three batches under ``root`` (and one unreadable directory):

    - ``alpha`` (suite core, eval-1, 50 steps, 2 trials): ``strong`` (high score, $0.50 per
      rollout, 40 tasks in 20 families: narrow intervals), ``cheap`` ($0.10, middling) and
      ``dominated`` (worse and dearer than ``strong``); skills ``lines`` and ``circles``;
    - ``beta`` (same conditions): a model named like a script tag with one task (so no
      interval: wide), plus one rollout lost to an infrastructure failure (unscored);
    - ``gamma`` (100 steps): ``strong`` again, which therefore splits into two rows;
    - ``broken``: a batch-state.json that is not JSON.
    """
    alpha: list[dict[str, Any]] = []
    for t in range(40):
        common = {"task": f"t{t:02d}", "family": f"fam{t // 2:02d}", "skill": "lines" if t % 2 else "circles",
                  "difficulty": "easy" if t < 20 else "hard"}
        for trial in (1, 2):
            strong = 1.0 if t % 2 else 0.9  # always passes: narrow enough not to be wide
            alpha.append({**common, "model": "strong", "trial": trial, "score": strong, "cost": 0.5})
            alpha.append({**common, "model": "cheap", "trial": trial, "score": 0.3 + 0.5 * ((t + trial) % 3 == 0),
                          "cost": 0.1})
            alpha.append({**common, "model": "dominated", "trial": trial, "score": 0.2 + 0.6 * (t % 5 == 0),
                          "cost": 0.6})
    beta: list[dict[str, Any]] = [
        {"model": SCRIPT_MODEL, "task": "t00", "family": "fam00", "skill": "lines", "score": 0.4, "cost": 0.3},
        {"model": SCRIPT_MODEL, "task": "t01", "family": "fam00", "skill": "lines", "score": None,
         "state": "failed", "failure_class": "infrastructure_error", "cost": 0.0, "infra": 0.05}]
    gamma: list[dict[str, Any]] = [
        {"model": "strong", "task": f"t{t:02d}", "family": f"fam{t:02d}", "skill": "lines", "score": 0.9,
         "cost": 0.7, "turns": 80} for t in range(3)]
    dirs = [metrics_batch(root / "alpha", "alpha", alpha, trials=2), metrics_batch(root / "beta", "beta", beta),
            metrics_batch(root / "gamma", "gamma", gamma, step_budget=100)]
    (root / "broken").mkdir(parents=True)
    (root / "broken" / "batch-state.json").write_text('{"torn": ')
    return dirs

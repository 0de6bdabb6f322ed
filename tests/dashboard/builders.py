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

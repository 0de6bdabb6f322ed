"""Checking a finished batch directory against the documented output layout.

Backend authors run :func:`check_batch_layout` on a batch their backend produced to prove
it preserved the layout (see docs/harness.md); the project's own tests use it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ROLLOUT_FILES = ("assignment.json", "run-state.json", "resume-checkpoint.json", "reference.png",
                 "model_turns.jsonl", "model_turn_summaries.jsonl", "input_receipts.jsonl",
                 "events.json", "frame_events.json", "result.json")
EVALUATION_FILES = ("status.json", "metadata.json", "score.json")


def check_batch_layout(root: Path, *, secrets: Iterable[str] = (), evaluation: bool = True) -> list[str]:
    """Every problem found in the batch directory ``root`` (an empty list when it conforms).

    Checks the batch-level files, every rollout's files, that frames are PNGs, that JSON
    parses and JSONL parses except for a torn last line, and that no ``secrets`` value
    appears in any file.
    """
    problems: list[str] = []
    for name in ("batch-state.json", "trace-publisher.json", "summary.json"):
        if not (root / name).is_file():
            problems.append(f"missing {name}")
    rollouts = sorted(p for p in (root / "rollouts").glob("*") if p.is_dir())
    if not rollouts:
        problems.append("no rollout directories under rollouts/")
    for rollout in rollouts:
        rid = rollout.name
        if not (root / "logs" / f"{rid}.log").is_file():
            problems.append(f"missing logs/{rid}.log")
        problems += [f"{rid}: missing {name}" for name in ROLLOUT_FILES if not (rollout / name).is_file()]
        frames = sorted((rollout / "frames").glob("*.png"))
        if not frames:
            problems.append(f"{rid}: frames/ holds no PNG")
        for frame in [*frames, rollout / "reference.png"]:
            if frame.is_file() and frame.read_bytes()[:8] != PNG_SIGNATURE:
                problems.append(f"{rid}: {frame.name} is not a PNG")
        if not any((rollout / f"attempt{suffix}").is_file() for suffix in (".dwg", ".dxf")):
            problems.append(f"{rid}: no attempt drawing")
        if evaluation:
            problems += [f"{rid}: missing evaluation/{name}" for name in EVALUATION_FILES
                         if not (rollout / "evaluation" / name).is_file()]
    needles = [s.encode() for s in secrets if s]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        relative = path.relative_to(root)
        problems += [f"a secret value appears in {relative}" for needle in needles if needle in data]
        if path.suffix == ".json":
            try:
                json.loads(data)
            except ValueError:
                problems.append(f"{relative} is not JSON")
        elif path.suffix == ".jsonl":
            lines = [line for line in data.split(b"\n") if line.strip()]
            for index, line in enumerate(lines):
                try:
                    json.loads(line)
                except ValueError:
                    if index != len(lines) - 1:
                        problems.append(f"{relative} line {index + 1} is not JSON")
    return problems

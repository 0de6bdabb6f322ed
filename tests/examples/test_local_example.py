"""The README's main job: the local LibreCAD example batch, end to end with real scores."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from autocad_bench.testing.layout import check_batch_layout

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "local-librecad.json"


def test_the_example_config_plans_cleanly() -> None:
    result = subprocess.run(["autocad-bench-batch", "--config", str(CONFIG)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["infrastructure_backend"] == "local-xvfb" and report["admitted_wave"] == 2
    assert next(c for c in report["checks"] if c["name"] == "gold_cache")["passed"] is True


@pytest.mark.integration
def test_the_example_batch_scores_every_reference_solution(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = subprocess.run(["autocad-bench-batch", "--config", str(CONFIG), "--execute", "--output-dir", str(out)],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "CI": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["task_id"], r["score"], r["passed"]) for r in summary["rollouts"]] == [
        ("prim-rectangle", 1.0, True), ("prim-circle-concentric", 1.0, True), ("part-plate-four-holes", 1.0, True)]
    for rollout in summary["rollouts"]:
        evaluation = out / "rollouts" / rollout["rollout_id"] / "evaluation"
        assert json.loads((evaluation / "status.json").read_text())["state"] == "done"
        assert (evaluation / "render.png").is_file() and (evaluation / "diff.png").is_file()
    assert check_batch_layout(out) == []
    for rollout in summary["rollouts"]:
        result_json = json.loads((out / "rollouts" / rollout["rollout_id"] / "result.json").read_text())
        provenance = result_json["task_provenance"]
        assert provenance["seed"] is None and provenance["split"] == "dev" and provenance["family"].startswith("draft-")


@pytest.mark.integration
def test_a_freshly_generated_set_runs_end_to_end(tmp_path: Path) -> None:
    """``tasks generate --seed`` writes a set whose own batch replays every reference solution on
    real LibreCAD desktops, all 1.0, and every result records the instance's seed and family."""
    out = tmp_path / "set"
    families = "draft-flange,reproduce-l-bracket,edit-move,edit-erase-small,annotate-text,draft-rel-hole-row"
    generated = subprocess.run(
        ["autocad-bench", "tasks", "generate", "--seed", "4242", "--families", families, "--count", "1",
         "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert generated.returncode == 0, generated.stderr
    run = tmp_path / "run"
    result = subprocess.run(
        ["autocad-bench-batch", "--config", str(out / "batch.json"), "--execute", "--output-dir", str(run)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    expected = [f"{family}-s4242-00" for family in families.split(",")]
    assert [(r["task_id"], r["score"], r["passed"]) for r in summary["rollouts"]] == [
        (task_id, 1.0, True) for task_id in expected]
    for rollout in summary["rollouts"]:
        provenance = json.loads((run / "rollouts" / rollout["rollout_id"] / "result.json").read_text())[
            "task_provenance"]
        assert provenance["seed"] == 4242 and rollout["task_id"].startswith(str(provenance["family"]))
        assert provenance["family_version"] == 1 and provenance["split"] in ("dev", "test")
    assert check_batch_layout(run) == []

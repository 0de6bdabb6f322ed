"""Aggregation: what the dashboard derives from a batch's output tree, at every stage of a run."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from autocad_bench.dashboard.charts import batch_charts
from autocad_bench.dashboard.overlay import overlay_svg
from autocad_bench.dashboard.reader import NotFound, PathRefused, RunsRoot, effective_state
from autocad_bench.metrics import model_rows, read_run
from tests.dashboard.builders import (
    CLICK,
    DRAG,
    batch_state,
    entry,
    evaluation_dir,
    rollout_dir,
    run_state,
    scored_rollout,
    write_batch,
)


def test_queued_assignments_are_shown_before_their_directories_exist(tmp_path: Path) -> None:
    write_batch(tmp_path / "b", batch_state([entry(f"r{i}") for i in range(5)]))
    root = RunsRoot(tmp_path)
    [summary] = root.registry()
    assert summary.key == "b" and summary.total == 5
    assert summary.counts["queued"] == 5
    batch = root.batch("b")
    assert [r.state for r in batch.rollouts] == ["queued"] * 5
    assert not any(r.has_dir for r in batch.rollouts)
    detail = root.rollout("b", "r3")
    assert detail.row.state == "queued" and detail.steps == () and detail.evaluation is None


def test_a_launched_sandbox_without_a_pilot_trace_is_starting(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([
        entry("no-dir", "starting"), entry("empty-dir", "starting"), entry("pilot-starting", "starting"),
        entry("handed-off", "starting"), entry("running-no-trace", "running")]))
    (batch / "rollouts" / "empty-dir").mkdir()
    for name, phase in (("pilot-starting", "starting"), ("handed-off", "running")):
        (batch / "rollouts" / name).mkdir()
        (batch / "rollouts" / name / "run-state.json").write_text(json.dumps(run_state(phase)))
    states = {r.rollout_id: r.state for r in RunsRoot(tmp_path).batch("b").rollouts}
    assert states == {"no-dir": "starting", "empty-dir": "starting", "pilot-starting": "starting",
                      "handed-off": "running", "running-no-trace": "starting"}
    assert RunsRoot(tmp_path).registry()[0].counts == {"queued": 0, "starting": 4, "running": 1, "evaluating": 0,
                                                       "done": 0, "failed": 0}


def test_effective_state_rules() -> None:
    assert effective_state("done", None, has_result=True, evaluation_enabled=True) == "done"
    assert effective_state("failed", None, has_result=False, evaluation_enabled=False) == "failed"
    assert effective_state("running", {"phase": "running"}, has_result=True, evaluation_enabled=True) == "evaluating"
    assert effective_state("running", {"phase": "finished"}, has_result=True, evaluation_enabled=False) == "running"
    assert effective_state("bogus", None, has_result=False, evaluation_enabled=False) == "queued"


def test_torn_and_corrupt_jsonl_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r", "running")]))
    rollout = rollout_dir(batch, "r", turns=3, torn=True)
    detail = RunsRoot(tmp_path).rollout("b", "r")
    assert [s.turn_index for s in detail.steps if s.kind == "turn"] == [0, 1, 2]
    assert detail.skipped_lines == {"model_turns.jsonl": 1}
    # A corrupt line in the middle (not only a torn last one) must not break the page either.
    lines = (rollout / "input_receipts.jsonl").read_text().splitlines()
    lines.insert(2, "{not json")
    (rollout / "input_receipts.jsonl").write_text("\n".join(lines) + "\n")
    detail = RunsRoot(tmp_path).rollout("b", "r")
    assert detail.skipped_lines["input_receipts.jsonl"] == 1
    assert detail.receipts == 12


def test_files_appearing_mid_run(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r", "running")]))
    root = RunsRoot(tmp_path)
    rollout = batch / "rollouts" / "r"
    rollout.mkdir()
    assert root.rollout("b", "r").steps == ()
    (rollout / "frames").mkdir()
    (rollout / "frames" / "000000.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    [step] = root.rollout("b", "r").steps
    assert step.kind == "frame" and step.frame == "frames/000000.png"
    (rollout / "run-state.json").write_text('{"phase": "runn')  # mid-rename garbage counts as absent
    assert root.batch("b").rollouts[0].state == "starting"
    (rollout / "run-state.json").write_text(json.dumps(run_state("running", turns=1, actions=4, cost=0.5)))
    row = root.batch("b").rollouts[0]
    assert (row.state, row.turns, row.actions, row.token_cost_usd) == ("running", 1, 4, 0.5)


def test_partial_evaluation(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state(
        [entry("scoring", "evaluating"), entry("scored", "evaluating"), entry("judged", "done", score=0.8,
                                                                              passed=True)], evaluation=True))
    for name in ("scoring", "scored", "judged"):
        rollout_dir(batch, name, phase="finished")
    evaluation_dir(batch / "rollouts" / "scoring", score=None, judge=None, state="scoring", images=False)
    evaluation_dir(batch / "rollouts" / "scored", score=0.5, judge=None, state="rendering", images=False)
    evaluation_dir(batch / "rollouts" / "judged", score=0.8, judge=0.3)
    rows = {r.rollout_id: r for r in RunsRoot(tmp_path).batch("b").rollouts}
    assert (rows["scoring"].evaluation_state, rows["scoring"].score) == ("scoring", None)
    assert (rows["scored"].score, rows["scored"].passed, rows["scored"].judge_score) == (0.5, False, None)
    assert (rows["judged"].score, rows["judged"].judge_score, rows["judged"].judge_passed) == (0.8, 0.3, False)
    detail = RunsRoot(tmp_path).rollout("b", "scoring")
    assert detail.evaluation is not None and detail.evaluation.score is None and detail.evaluation.images == {}
    judged = RunsRoot(tmp_path).rollout("b", "judged").evaluation
    assert judged is not None and judged.judge is not None and judged.judge["score"] == 0.3
    assert judged.score is not None and judged.score["score"] == 0.8  # kept separate from the judge
    assert set(judged.images) == {"gold-render", "render", "diff"}
    assert [name for name, _ in judged.components] == ["circles", "lines"]


def test_steps_pair_each_batch_with_the_frame_it_acted_on(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r", "done")]))
    rollout_dir(batch, "r", turns=3)
    steps = RunsRoot(tmp_path).rollout("b", "r").steps
    assert [(s.kind, s.frame, s.result_frame) for s in steps] == [
        ("turn", "frames/000000.png", "frames/000001.png"), ("turn", "frames/000001.png", "frames/000002.png"),
        ("turn", "frames/000002.png", "frames/000003.png"), ("frame", "frames/000003.png", None)]
    assert [a["type"] for a in steps[0].actions] == ["click", "drag", "type", "key"]
    assert steps[0].receipts and all(r["turn_index"] == 0 for r in steps[0].receipts)


def test_tier_comes_from_the_task_json_under_the_configs_tasks_dir(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    (tasks / "t-hard").mkdir(parents=True)
    (tasks / "t-hard" / "task.json").write_text(json.dumps({"task_id": "t-hard", "tier": "assemblies"}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"tasks_dir": "tasks"}))
    write_batch(tmp_path / "runs" / "b", batch_state([entry("a", task_id="t-hard"), entry("b", task_id="missing")],
                                                     config_path=str(config)))
    write_batch(tmp_path / "runs" / "c", batch_state([entry("a", task_id="t-hard")]))
    root = RunsRoot(tmp_path / "runs")
    assert [r.tier for r in root.batch("b").rollouts] == ["assemblies", "unknown"]
    assert [r.tier for r in root.batch("c").rollouts] == ["unknown"]


def test_tier_of_a_batch_that_names_a_packaged_suite(tmp_path: Path) -> None:
    """``"task_suite": "smoke"`` has no tasks_dir in the file: the tier comes from the pack's tasks."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task_suite": "smoke"}))
    write_batch(tmp_path / "runs" / "b", batch_state([entry("a", task_id="prim-rectangle")], config_path=str(config)))
    config.with_name("other.json").write_text(json.dumps({"task_suite": "no-such-suite"}))
    write_batch(tmp_path / "runs" / "c", batch_state([entry("a", task_id="prim-rectangle")],
                                                     config_path=str(config.with_name("other.json"))))
    root = RunsRoot(tmp_path / "runs")
    assert [r.tier for r in root.batch("b").rollouts] == ["primitives"]
    assert [r.tier for r in root.batch("c").rollouts] == ["unknown"]


def test_discovery_finds_nested_batches_and_skips_trace_directories(tmp_path: Path) -> None:
    write_batch(tmp_path / "a", batch_state([]))
    write_batch(tmp_path / "deep" / "er" / "b", batch_state([]))
    # A batch-state.json inside a batch's rollouts is not another batch.
    write_batch(tmp_path / "a" / "rollouts" / "x", batch_state([]))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "batch-state.json").write_text("{torn")
    root = RunsRoot(tmp_path)
    keys = [b.key for b in root.registry()]
    assert keys == ["a", "c", "deep/er/b"]
    assert root.registry()[1].status == "unreadable"


def test_paths_outside_the_root_are_refused(tmp_path: Path) -> None:
    root_dir = tmp_path / "root"
    batch = write_batch(root_dir / "b", batch_state([entry("r", "done")]))
    rollout_dir(batch, "r")
    outside = write_batch(tmp_path / "outside", batch_state([entry("r", "done")]))
    (outside / "secret.png").write_bytes(b"x")
    (root_dir / "link").symlink_to(outside)
    (batch / "rollouts" / "r" / "frames" / "evil.png").symlink_to(outside / "secret.png")
    root = RunsRoot(root_dir)
    for key in ("../outside", "/etc", str(outside), "b/../../outside", "link", "b/..\\..\\outside", "C:/x", "b\x00"):
        with pytest.raises(PathRefused):
            root.batch_dir(key)
    for relative in ("../../../outside/secret.png", "/etc/passwd", "frames/evil.png", "run-state.json",
                     "frames/../../../../outside/secret.png", "", "."):
        with pytest.raises(PathRefused):
            root.rollout_file("b", "r", relative)
    for rollout in ("../r", "..", "r/../../b", ""):
        with pytest.raises((PathRefused, NotFound)):
            root.rollout_file("b", rollout, "reference.png")
    with pytest.raises(NotFound):
        root.rollout("b", "not-in-batch-state")
    assert root.rollout_file("b", "r", "frames/000000.png").is_file()


def test_charts_are_valid_svg_and_aggregate_every_rollout(tmp_path: Path) -> None:
    rows = []
    batch = write_batch(tmp_path / "b", batch_state(
        [entry(f"r{i}", "done", model=f"m{i % 3}", task_id=f"t{i}", score=i / 10, passed=i >= 5,
               token_cost_usd=0.1 * i) for i in range(10)] + [entry("q", "queued")]))
    for i in range(10):
        scored_rollout(batch, f"r{i}", i / 10, passed=i >= 5)
    rows = list(RunsRoot(tmp_path).batch("b").rollouts)
    models, _ = model_rows([read_run(batch)], breakdowns=False)
    charts = batch_charts(rows, models)
    for svg in charts.values():
        ET.fromstring(svg)
    assert charts["cost_vs_score"].count("<circle") == 10
    by_id = {m.row_id: m.metrics for m in models}
    assert by_id["scripted/m0"].rollouts == 4 and by_id["scripted/m2"].pass_at_1.value == pytest.approx(2 / 3)
    # Every model's two bars carry their interval whiskers (three models with an interval each).
    assert charts["per_model"].count('class="ci-whisker"') == 6
    m2 = by_id["scripted/m2"].mean_score
    assert f"[{m2.low:.3f}, {m2.high:.3f}]" in charts["per_model"]


def test_overlay_draws_every_action_kind() -> None:
    svg = overlay_svg([CLICK, DRAG, {"type": "type", "text": "<script>"}, {"type": "key", "keys": ["ctrl", "s"]},
                       {"type": "scroll", "x": 5, "y": 5, "dx": 0, "dy": -2}, {"type": "move", "x": 1, "y": 1},
                       {"type": "wait", "seconds": 1.0}, {"type": "done"}], 1920, 1080)
    tree = ET.fromstring(svg)
    kinds = [g.get("class") for g in tree.iter("{http://www.w3.org/2000/svg}g")]
    for kind in ("click", "drag", "type", "key", "scroll", "move", "wait", "done"):
        assert f"ov ov-{kind}" in kinds
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_reads_are_cached_until_a_file_changes(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r", "running")]))
    rollout = rollout_dir(batch, "r", turns=2)
    root = RunsRoot(tmp_path)
    first = root.rollout("b", "r")
    assert len(first.steps) == 3
    with (rollout / "model_turns.jsonl").open("a") as handle:
        handle.write(json.dumps({"turn_index": 2, "observation": {"frame": {"path": "frames/000002.png"}},
                                 "validation": {"valid": True}, "action_input": {"actions": [CLICK]}}) + "\n")
    os.utime(rollout / "model_turns.jsonl", ns=(1, 10**18))
    assert [s.kind for s in root.rollout("b", "r").steps] == ["turn", "turn", "turn"]

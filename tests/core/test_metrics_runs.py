"""Metrics over batch directories: hand-computed values, honest rows, compare and leaderboard.

Every expected number here is worked out by hand in the test (or, for intervals, by an
independent plain-numpy percentile bootstrap), never by calling the code under test twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as scipy_stats

from autocad_bench.cli.main import cli
from autocad_bench.metrics import compare_runs, model_rows, read_run
from autocad_bench.metrics.schema import schema_text
from autocad_bench.metrics.stats import SEED
from tests.core.metrics_runs import Trial, pattern, write_run

REPO = Path(__file__).resolve().parents[2]


def _naive_percentile_interval(values: list[float], seed: int = 5, resamples: int = 20_000) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    data = np.asarray(values)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def test_hand_computed_metrics(tmp_path: Path) -> None:
    # Eight tasks, eight families, three trials; passes per task:
    passes = [3, 3, 3, 2, 1, 0, 3, 2]
    run = write_run(tmp_path / "run", "good", pattern(passes, fail_score=0.3, cost=0.01))
    (row,) = model_rows([read_run(run)])[0]
    m = row.metrics
    assert (m.rollouts, m.scored, m.unscored, m.tasks, m.clusters, m.k) == (24, 24, 0, 8, 8, 3)
    # pass@1: mean of c/3.
    assert m.pass_at_1.value == pytest.approx(sum(c / 3 for c in passes) / 8)
    # pass@3 with n = 3: 1 when any trial passed.
    assert m.pass_at_k.value == pytest.approx(7 / 8)
    # pass^3 with n = 3: 1 only when all three passed.
    assert m.pass_hat_k.value == pytest.approx(4 / 8)
    # mean score: per task (c * 1 + (3 - c) * 0.3) / 3.
    per_task = [(c + (3 - c) * 0.3) / 3 for c in passes]
    assert m.mean_score.value == pytest.approx(sum(per_task) / 8)
    # Cost: 24 rollouts at $0.01; solved = 17 passes.
    assert m.cost_per_task_usd == pytest.approx(0.01)
    assert m.cost_per_solved_usd == pytest.approx(0.24 / 17, abs=1e-6)
    # Intervals: with one task per family the clustered ratio reduces to scipy's BCa bootstrap
    # of the plain mean over tasks (same seed, same numbers), and lands near an independent
    # percentile bootstrap (BCa corrects for skew, so the two differ by more than noise).
    # Pass rates are never narrower than the exact binomial interval over the families
    # (x = 5.67 "passes" of 8 here).
    x = sum(c / 3 for c in passes)
    floor = (scipy_stats.beta.ppf(0.025, x, 8 - x + 1), scipy_stats.beta.ppf(0.975, x + 1, 8 - x))
    for estimate, values, binary in ((m.pass_at_1, [c / 3 for c in passes], True), (m.mean_score, per_task, False)):
        direct = scipy_stats.bootstrap((np.asarray(values),), np.mean, n_resamples=9999, method="BCa",
                                       rng=np.random.default_rng(SEED)).confidence_interval
        low, high = float(direct.low), float(direct.high)
        if binary:
            low, high = min(low, floor[0]), max(high, floor[1])
        assert estimate.low == pytest.approx(low, abs=1e-6)
        assert estimate.high == pytest.approx(high, abs=1e-6)
        naive_low, naive_high = _naive_percentile_interval(values)
        assert estimate.low <= naive_low + 0.1 and estimate.high >= naive_high - 0.1
        assert estimate.low < estimate.value < estimate.high
    # Eight tasks cannot give a tight interval: the row says so.
    assert m.wide and any(flag.startswith("wide") for flag in row.flags)


def test_families_are_the_unit_of_the_interval(tmp_path: Path) -> None:
    passes = [3, 3, 0, 0, 3, 0, 3, 0]
    independent = read_run(write_run(tmp_path / "a", "m", pattern(passes)))
    grouped = read_run(write_run(tmp_path / "b", "m", pattern(passes, families=["x"] * 4 + ["y"] * 4)))
    (row_i,), _ = model_rows([independent])
    (row_g,), _ = model_rows([grouped])
    assert row_i.metrics.pass_at_1.value == row_g.metrics.pass_at_1.value == 0.5
    assert (row_i.metrics.clusters, row_g.metrics.clusters) == (8, 2)
    width_i = row_i.metrics.pass_at_1.high - row_i.metrics.pass_at_1.low  # type: ignore[operator]
    width_g = row_g.metrics.pass_at_1.high - row_g.metrics.pass_at_1.low  # type: ignore[operator]
    assert width_g >= width_i


def test_which_rollouts_count(tmp_path: Path) -> None:
    trials = [
        Trial(task="a", passed=True, family="f1"),
        # The model broke the contract: a failed task, score 0, even without a drawing.
        Trial(task="b", passed=None, family="f2", state="failed", failure_class="model_contract_error"),
        # The desktop never came up: not the model's doing, left out and reported.
        Trial(task="c", passed=None, family="f3", state="failed", failure_class="admission_failed",
              infrastructure_cost_usd=0.5),
        # Still running: left out.
        Trial(task="d", passed=None, family="f4", state="running", stop_reason=None),
    ]
    (row,), _ = model_rows([read_run(write_run(tmp_path / "r", "m", trials, trials_setting=1))])
    m = row.metrics
    assert (m.rollouts, m.scored, m.unscored, m.tasks) == (4, 2, 2, 2)
    assert m.pass_at_1.value == pytest.approx(0.5)
    assert m.failure_classes == {"admission_failed": 1, "model_contract_error": 1}
    assert m.infrastructure_cost_usd == pytest.approx(0.5)  # spend of unscored rollouts still counts
    assert any(flag.startswith("unscored: 2 of 4") for flag in row.flags)


def test_turn_budgets_measured_or_lower_bound(tmp_path: Path) -> None:
    trials = [
        Trial(task="a", passed=True, family="f1", turns=10),
        Trial(task="b", passed=True, family="f2", turns=40),
        Trial(task="c", passed=True, family="f3", turns=90),
        Trial(task="d", passed=False, family="f4", turns=100, stop_reason="turns"),
    ]
    (row,), _ = model_rows([read_run(write_run(tmp_path / "r", "m", trials, step_budget=100, trials_setting=1))])
    within = {b.budget: b for b in row.metrics.success_within}
    assert [within[b].mode for b in (15, 50, 100)] == ["lower_bound", "lower_bound", "measured"]
    assert [within[b].estimate.value for b in (15, 50, 100)] == [0.25, 0.5, 0.75]
    # A 15-turn run cannot say anything about 50 or 100 turns.
    (short,), _ = model_rows([read_run(write_run(tmp_path / "s", "m", trials[:1], step_budget=15,
                                                 trials_setting=1))])
    assert [b.mode for b in short.metrics.success_within] == ["measured", "unavailable", "unavailable"]
    # A pass the turn cap cut short is not credited to a smaller budget.
    capped = [Trial(task="a", passed=True, family="f1", turns=12, stop_reason="turns")]
    (row,), _ = model_rows([read_run(write_run(tmp_path / "c", "m", capped, step_budget=None, trials_setting=1))])
    assert row.metrics.success_within[0].estimate.value == 0.0


def test_different_conditions_are_never_merged(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", "m", pattern([3, 0]), evaluator_version="2026.12.2", batch_id="a")
    b = write_run(tmp_path / "b", "m", pattern([3, 3]), evaluator_version="2026.12.1", batch_id="b")
    c = write_run(tmp_path / "c", "m", pattern([0, 0]), evaluator_version="2026.12.2", batch_id="c")
    rows, notes = model_rows([read_run(a), read_run(b), read_run(c)])
    assert len(rows) == 2
    by_version = {r.conditions.evaluator_version: r for r in rows}
    # a and c share every condition: pooled (their trials add up per task).
    assert by_version["2026.12.2"].runs == ["a", "c"]
    assert by_version["2026.12.2"].metrics.rollouts == 12
    assert by_version["2026.12.2"].metrics.pass_at_1.value == pytest.approx(0.25)
    assert by_version["2026.12.1"].runs == ["b"]
    for row in rows:
        assert "evaluator_version=" in row.row_id
        assert any(flag.startswith("split:") and "evaluator_version" in flag for flag in row.flags)
    assert notes and "2 different conditions" in notes[0]
    # Step budget and tool mode split too.
    d = write_run(tmp_path / "d", "m", pattern([3, 0]), step_budget=15, batch_id="d")
    e = write_run(tmp_path / "e", "m", pattern([3, 0]), tool_mode="native", batch_id="e")
    rows, _ = model_rows([read_run(a), read_run(d), read_run(e)])
    assert len(rows) == 3


def test_compare_reports_a_significant_difference(tmp_path: Path) -> None:
    good = pattern([3, 3, 3, 3, 2, 3, 3, 3])
    bad = pattern([0, 1, 0, 0, 0, 0, 0, 0])
    run = write_run(tmp_path / "r", "reference", good, models={"wrong": bad})
    result = CliRunner().invoke(cli, ["compare", str(run), str(run), "--model-a", "wrong",
                                      "--model-b", "scripted/reference", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["shared_tasks"] == 8 and data["shared_clusters"] == 8
    # Pass rates: B = 23/24 (mean over tasks of c/3), A = 1/24.
    assert data["pass_rate"]["b"] == pytest.approx(23 / 24, abs=1e-6)
    assert data["pass_rate"]["a"] == pytest.approx(1 / 24, abs=1e-6)
    assert data["pass_rate"]["difference"]["value"] == pytest.approx(22 / 24, abs=1e-6)
    # Every family moved the same way: exact two-sided p = 2 / 2^8.
    assert data["pass_rate"]["p_value"] == pytest.approx(2 / 256, abs=1e-6)
    assert data["pass_rate"]["significant"] is True
    assert len(data["changed"]) == 8 and all(c["flipped"] for c in data["changed"])
    text = CliRunner().invoke(cli, ["compare", str(run), str(run), "--model-a", "wrong", "--model-b", "reference"])
    assert text.exit_code == 0
    assert "significant at 0.05" in text.output and "not significant" not in text.output
    assert "tasks that flipped: 8 (8 gained by B, 0 lost by B)" in text.output


def test_compare_with_too_few_families_is_not_significant(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "a", pattern([3, 3, 3]), models={"b": pattern([0, 0, 0])})
    result = compare_runs(read_run(run), read_run(run), model_a="a", model_b="b")
    assert result.pass_rate.p_value == pytest.approx(0.25)
    assert not result.pass_rate.significant


@pytest.mark.parametrize(("change", "message"), [
    ({"evaluator_version": "2026.12.1"}, "different evaluator versions"),
    ({"suite_sha256": "b" * 64}, "different task suites"),
])
def test_compare_refuses_runs_on_different_scales(tmp_path: Path, change: dict[str, str], message: str) -> None:
    a = write_run(tmp_path / "a", "m", pattern([3, 0]))
    b = write_run(tmp_path / "b", "m", pattern([3, 3]), **change)  # type: ignore[arg-type]
    result = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_compare_refusals_name_the_problem(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", "m", pattern([3, 0], prefix="x"))
    b = write_run(tmp_path / "b", "m", pattern([3, 3], prefix="y"))
    runner = CliRunner()
    result = runner.invoke(cli, ["compare", str(a), str(b)])
    assert result.exit_code == 2 and "no task was scored on both sides" in result.output
    two = write_run(tmp_path / "two", "m1", pattern([3]), models={"m2": pattern([0])})
    result = runner.invoke(cli, ["compare", str(two), str(two)])
    assert result.exit_code == 2 and "holds 2 models" in result.output and "--model-a" in result.output
    result = runner.invoke(cli, ["compare", str(two), str(tmp_path)])
    assert result.exit_code == 2 and "no readable batch-state.json" in result.output


def test_leaderboard_json_follows_the_published_schema(tmp_path: Path) -> None:
    published = (REPO / "docs" / "schemas" / "leaderboard-1.schema.json").read_text()
    assert published == schema_text(), "run: uv run python -m autocad_bench.metrics.schema > " \
                                       "docs/schemas/leaderboard-1.schema.json"
    cheap = pattern([3, 2, 3, 1], cost=0.01)
    pricey = pattern([3, 3, 3, 3], cost=0.05)
    worse = pattern([1, 0, 0, 1], cost=0.02)
    run = write_run(tmp_path / "r", "cheap", cheap, models={"pricey": pricey, "worse": worse})
    out = tmp_path / "board"
    result = CliRunner().invoke(cli, ["leaderboard", str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    board = json.loads((out / "leaderboard.json").read_text())
    jsonschema.validate(board, json.loads(published))
    assert board["schema_version"] == "autocad-bench.leaderboard/1"
    rows = {r["model"]: r for r in board["rows"]}
    assert [r["model"] for r in board["rows"]] == ["pricey", "cheap", "worse"]  # best mean score first
    # Frontier: pricey (best score) and cheap (cheapest); worse costs more than cheap and scores less.
    assert (rows["pricey"]["pareto"], rows["cheap"]["pareto"], rows["worse"]["pareto"]) == (True, True, False)
    assert rows["cheap"]["metrics"]["pass_hat_k"]["value"] == pytest.approx(0.5)
    assert rows["cheap"]["metrics"]["pass_at_k"]["value"] == pytest.approx(1.0)
    assert set(rows["cheap"]["by_skill"]) == {"draft"}
    html = (out / "leaderboard.html").read_text()
    assert "cheap" in html and "pricey" in html
    # A document that breaks the schema is caught by it.
    board["rows"][0]["metrics"]["pass_at_1"]["value"] = "high"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(board, json.loads(published))


def test_metrics_command_prints_intervals_and_flags(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "m", pattern([3, 2, 0]))
    result = CliRunner().invoke(cli, ["metrics", str(run)])
    assert result.exit_code == 0, result.output
    assert "[" in result.output and "wide:" in result.output
    bad = CliRunner().invoke(cli, ["metrics", str(tmp_path)])
    assert bad.exit_code == 2 and "no readable batch-state.json" in bad.output


def test_a_run_given_twice_counts_once(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "m", pattern([3, 0]))
    (tmp_path / "link").symlink_to(run)
    rows, notes = model_rows([read_run(run), read_run(tmp_path / "link")])
    assert rows[0].metrics.rollouts == 6 and rows[0].metrics.k == 3
    assert any("given more than once" in note for note in notes)


def test_reruns_count_each_trial_once(tmp_path: Path) -> None:
    """``--rerun-failed-from`` runs the same trial ids again. Pooled with the batch it reran,
    a rerun replaces an attempt without a verdict and never a counted one."""
    original = [
        Trial(task="t0", passed=True, family="f0", trial=1),
        Trial(task="t0", passed=None, family="f0", trial=2, state="failed", failure_class="model_contract_error"),
        Trial(task="t1", passed=None, family="f1", trial=1, state="failed", failure_class="admission_failed"),
        Trial(task="t1", passed=False, family="f1", trial=2),
    ]
    old = write_run(tmp_path / "old", "m", original, trials_setting=2, batch_id="old")
    rerun = [Trial(task="t0", passed=True, family="f0", trial=2), Trial(task="t1", passed=True, family="f1", trial=1)]
    new = write_run(tmp_path / "new", "m", rerun, trials_setting=2, batch_id="new", extra_state={"rerun_of": "old"})
    (row,), notes = model_rows([read_run(old), read_run(new)])
    m = row.metrics
    # t0: pass + model failure (the rerun pass is ignored); t1: the rerun pass replaces the
    # infrastructure failure, plus the original fail.
    assert (m.rollouts, m.scored, m.unscored, m.k) == (4, 4, 0, 2)
    assert m.pass_at_1.value == pytest.approx(0.5)
    assert any("1 rollout(s) without a verdict were replaced" in n for n in notes)
    assert any("1 rerun rollout(s) were ignored" in n for n in notes)
    # Without the rerun marker the second batch is an independent repeat and pools.
    independent = write_run(tmp_path / "ind", "m", rerun, trials_setting=2, batch_id="ind")
    (row,), _ = model_rows([read_run(old), read_run(independent)])
    assert row.metrics.rollouts == 6


def test_invalid_scores_are_not_scores(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "m", pattern([1, 1, 1, 1, 1, 1], k=1), trials_setting=1)
    for index, bad in enumerate(('{"score": NaN, "passed": true}', '{"score": 9.0, "passed": true}',
                                 '{"score": 0.5}')):
        (run / "rollouts" / f"m-task-{index}.t1" / "evaluation" / "score.json").write_text(bad)
    (row,), _ = model_rows([read_run(run)])
    assert (row.metrics.scored, row.metrics.unscored, row.metrics.invalid_scores) == (3, 3, 3)
    assert row.metrics.mean_score.value == 1.0
    assert any(flag.startswith("invalid scores: 3") for flag in row.flags)
    result = CliRunner().invoke(cli, ["metrics", str(run), "--json"])
    assert result.exit_code == 0

    def strict(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    json.loads(result.output, parse_constant=strict)


def test_live_batches_are_not_cheap_and_not_on_the_frontier(tmp_path: Path) -> None:
    live = pattern([3, 3, 3, 3, 3, 3], cost=1.0)[:6] + [
        Trial(task=f"task-{i}", passed=None, family=f"fam-{i}", trial=n, state="queued", stop_reason=None)
        for i in range(6) for n in (2, 3)]
    done = pattern([3, 3, 3, 3, 3, 3], cost=0.5)
    run = write_run(tmp_path / "r", "live", live, models={"done": done})
    rows = {r.model: r for r in model_rows([read_run(run)])[0]}
    assert rows["live"].metrics.cost_per_task_usd == pytest.approx(1.0)  # spend over finished rollouts
    assert rows["live"].metrics.pending == 12
    assert (rows["live"].pareto, rows["done"].pareto) == (False, True)
    assert any(flag.startswith("in progress: 12") for flag in rows["live"].flags)


def test_rows_over_different_task_sets_are_flagged(tmp_path: Path) -> None:
    a = pattern([3, 3, 3, 3, 3, 3, 0, 0])
    b = pattern([3, 3, 3, 3, 3, 3]) + [
        Trial(task=f"task-{i}", passed=None, family=f"fam-{i}", trial=n, state="failed",
              failure_class="admission_failed") for i in (6, 7) for n in (1, 2, 3)]
    rows, notes = model_rows([read_run(write_run(tmp_path / "r", "a", a, models={"b": b}))])
    by_model = {r.model: r for r in rows}
    assert by_model["b"].metrics.mean_score.value == 1.0 and by_model["b"].metrics.tasks == 6
    assert any(flag.startswith("covers 6 of the 8 tasks") for flag in by_model["b"].flags)
    assert by_model["b"].pareto is False and by_model["a"].pareto is True
    assert any("cover different task sets" in note for note in notes)


def test_one_task_short_of_trials_does_not_turn_pass_at_k_into_pass_at_1(tmp_path: Path) -> None:
    trials = pattern([1] * 8)
    for t in trials:
        if t.task == "task-0" and t.trial > 1:
            t.passed, t.state, t.failure_class = None, "failed", "transport_exhausted"
    (row,), _ = model_rows([read_run(write_run(tmp_path / "r", "m", trials))])
    m = row.metrics
    assert (m.k, m.k_excluded) == (3, 1)
    assert m.pass_at_k.value == pytest.approx(1.0) and m.pass_at_k.tasks == 7
    assert m.pass_hat_k.value == pytest.approx(0.0)
    assert any(flag.startswith("pass@3 and pass^3 leave out 1 task") for flag in row.flags)
    assert row.by_family["fam-1"].k == 3


def test_unknown_conditions_are_never_pooled_or_compared(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", "m", pattern([3, 0]), batch_id="a", conditions=False)
    b = write_run(tmp_path / "b", "m", pattern([3, 3]), batch_id="b", conditions=False)
    rows, _ = model_rows([read_run(a), read_run(b)])
    assert len(rows) == 2 and all("conditions not recorded" in " ".join(r.flags) for r in rows)
    result = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert result.exit_code == 2 and "did not record its conditions" in result.output
    # A field a newer version adds is ignored, not a reason to forget the suite.
    c = write_run(tmp_path / "c", "m", pattern([3]), batch_id="c")
    state = json.loads((c / "batch-state.json").read_text())
    state["conditions"]["temperature"] = 0.7
    (c / "batch-state.json").write_text(json.dumps(state))
    assert read_run(c).conditions.suite == "smoke" and read_run(c).conditions.recorded


def test_compare_refuses_a_model_against_itself_and_empty_batches(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "m", pattern([3, 0]))
    result = CliRunner().invoke(cli, ["compare", str(run), str(run)])
    assert result.exit_code == 2 and "same batch" in result.output
    empty = write_run(tmp_path / "e", "m", [])
    result = CliRunner().invoke(cli, ["compare", str(empty), str(run)])
    assert result.exit_code == 2 and "has no rollouts" in result.output


def test_compare_calls_a_disagreement_borderline(tmp_path: Path) -> None:
    # Five families, all gaining a little: permutation p = 2/32 = 0.0625, yet the bootstrap
    # interval of the difference excludes 0.
    a = [Trial(task=f"t{i}", passed=False, score=0.5, family=f"f{i}") for i in range(5)]
    b = [Trial(task=f"t{i}", passed=False, score=0.5 + 0.05 * (i + 1), family=f"f{i}") for i in range(5)]
    run = write_run(tmp_path / "r", "a", a, models={"b": b}, trials_setting=1)
    result = compare_runs(read_run(run), read_run(run), model_a="a", model_b="b")
    d = result.mean_score
    assert d.p_value == pytest.approx(0.0625, abs=1e-6)
    assert d.difference.low is not None and d.difference.low > 0
    assert (d.significant, d.borderline) == (False, True)
    text = CliRunner().invoke(cli, ["compare", str(run), str(run), "--model-a", "a", "--model-b", "b"])
    assert "borderline" in text.output
    # The other way round: six families each exactly 0.5 better. The test says p = 2/64, but
    # a constant difference has no spread to build an interval from: not established either.
    a = [Trial(task=f"t{i}", passed=False, score=0.2, family=f"f{i}") for i in range(6)]
    b = [Trial(task=f"t{i}", passed=False, score=0.7, family=f"f{i}") for i in range(6)]
    run = write_run(tmp_path / "c", "a", a, models={"b": b}, trials_setting=1)
    d = compare_runs(read_run(run), read_run(run), model_a="a", model_b="b").mean_score
    assert d.p_value == pytest.approx(2 / 64, abs=1e-6) and d.difference.low is None
    assert (d.significant, d.borderline) == (False, True)


def test_leaderboard_out_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "m", pattern([3]))
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(cli, ["leaderboard", str(run), "--out", str(tmp_path / "file" / "sub")])
    assert result.exit_code == 2 and "cannot write" in result.output and "Traceback" not in result.output


def test_models_missing_from_the_price_table_are_flagged(tmp_path: Path) -> None:
    trials = [Trial(task=f"t{i}", passed=True, family=f"f{i}", tokens=1000, token_cost_usd=0.2) for i in range(2)]
    run = write_run(tmp_path / "r", "m", trials, trials_setting=1)
    ledger = {"budget": {"ledger": {"fallback_priced_responses": 3, "fallback_priced_models": ["m"]}}}
    (run / "rollouts" / "m-t0.t1" / "resume-checkpoint.json").write_text(json.dumps(ledger))
    (row,), _ = model_rows([read_run(run)])
    assert row.metrics.fallback_priced == 1
    assert any(flag.startswith("priced by fallback: 1 rollout(s)") for flag in row.flags)
    # A scripted model bills no tokens: being unlisted costs nothing and is not flagged.
    free = write_run(tmp_path / "s", "m", [Trial(task="t0", passed=True, family="f0")], trials_setting=1)
    (free / "rollouts" / "m-t0.t1" / "resume-checkpoint.json").write_text(json.dumps(ledger))
    (row,), _ = model_rows([read_run(free)])
    assert row.metrics.fallback_priced == 0

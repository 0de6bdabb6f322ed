"""End-to-end evaluation: status states, outputs, determinism, failures, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from autocad_bench_evaluator.cli import main
from autocad_bench_evaluator.evaluate import (
    EXIT_FAILED,
    EXIT_OK,
    EvaluationState,
    evaluate,
    evaluate_rollout,
    rollout_candidate,
)
from autocad_bench_evaluator.judge import (
    JUDGE_TOOL_NAME,
    JudgeError,
    JudgeSettings,
    VisionJudge,
    judge_from_environment,
)
from autocad_bench_evaluator.spec import ScoringSpec

from autocad_bench.testing.wire import Reply, ResponsesWire
from tests.evaluator.support import SECRET, all_bytes, gold_cache, write_dxf


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    gold_cache(root, spec=ScoringSpec(task_id="plate", required_layers=("HOLES",)))
    return root


def status(out: Path) -> dict[str, object]:
    return json.loads((out / "status.json").read_text())  # type: ignore[no-any-return]


def states(out: Path) -> list[str]:
    return [h["state"] for h in status(out)["history"]]  # type: ignore[index, union-attr]


def moved(msp: object) -> None:
    for e in msp:  # type: ignore[attr-defined]
        e.translate(250, -75, 0)


def test_done_with_deterministic_byte_identical_score(tmp_path: Path, cache: Path) -> None:
    candidate = write_dxf(tmp_path / "attempt.dxf", mutate=moved)
    out1, out2 = tmp_path / "r1" / "evaluation", tmp_path / "r2" / "evaluation"
    first = evaluate(candidate, "plate", cache, "v1", out1)
    assert evaluate(candidate, "plate", cache, "v1", out2).state is EvaluationState.DONE
    assert first.state is EvaluationState.DONE and first.exit_code == EXIT_OK
    assert first.report is not None and first.report.score == 1.0 and first.report.passed
    assert first.report.translation == (-250.0, 75.0)
    assert states(out1) == ["pending", "reading", "scoring", "rendering", "done"]
    for name in ("score.json", "metadata.json", "render.png", "diff.png", "gold-render.png"):
        assert (out1 / name).read_bytes() == (out2 / name).read_bytes(), name
    assert b"_at" not in (out1 / "score.json").read_bytes()  # no timestamps inside score.json
    score = json.loads((out1 / "score.json").read_text())
    assert list(score) == sorted(score) and score["kind"] == "deterministic"
    assert status(out1)["score"] == 1.0 and status(out1)["exit_code"] == 0


def test_imperfect_candidate_scores_lower_and_fails_requirements(tmp_path: Path, cache: Path) -> None:
    def drop_holes(msp: object) -> None:
        for e in list(msp.query("CIRCLE")):  # type: ignore[attr-defined]
            msp.delete_entity(e)  # type: ignore[attr-defined]

    outcome = evaluate(write_dxf(tmp_path / "attempt.dxf", mutate=drop_holes), "plate", cache, "v1", tmp_path / "ev")
    assert outcome.state is EvaluationState.DONE and outcome.report is not None
    assert outcome.report.score < 0.8 and not outcome.report.passed
    assert outcome.report.required_layers == {"HOLES": False}
    assert (tmp_path / "ev" / "diff.png").is_file()


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage" * 100, None])
def test_invalid_or_missing_drawing_is_a_zero_result_without_render(
    tmp_path: Path, cache: Path, content: bytes | None
) -> None:
    out = tmp_path / "evaluation"
    candidate: Path | None = None
    if content is not None:
        candidate = tmp_path / "attempt.dxf"
        candidate.write_bytes(content)
    outcome = evaluate(candidate, "plate", cache, "v1", out)
    assert outcome.state is EvaluationState.INVALID and outcome.exit_code == EXIT_OK
    score = json.loads((out / "score.json").read_text())
    assert score["valid"] is False and score["score"] == 0.0 and score["passed"] is False and score["reason"]
    assert json.loads((out / "metadata.json").read_text())["valid"] is False
    assert not (out / "render.png").exists() and not (out / "diff.png").exists()
    assert states(out) == ["pending", "reading", "invalid"]
    again = tmp_path / "again"
    evaluate(candidate, "plate", cache, "v1", again)
    assert (again / "score.json").read_bytes() == (out / "score.json").read_bytes()


def test_stale_outputs_of_a_previous_run_are_removed(tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "evaluation"
    evaluate(write_dxf(tmp_path / "attempt.dxf"), "plate", cache, "v1", out)
    assert (out / "render.png").exists()
    (tmp_path / "attempt.dxf").write_bytes(b"")
    evaluate(tmp_path / "attempt.dxf", "plate", cache, "v1", out)
    assert not (out / "render.png").exists() and status(out)["state"] == "invalid"


def test_cache_problems_fail_the_evaluation(tmp_path: Path, cache: Path) -> None:
    candidate = write_dxf(tmp_path / "attempt.dxf")
    missing = evaluate(candidate, "other-task", cache, "v1", tmp_path / "a")
    assert missing.state is EvaluationState.FAILED and missing.exit_code == EXIT_FAILED
    assert "other-task" in str(status(tmp_path / "a")["error"])
    (cache / "v1" / "plate" / "gold.dxf").write_bytes(b"tampered")
    tampered = evaluate(candidate, "plate", cache, "v1", tmp_path / "b")
    assert tampered.exit_code == EXIT_FAILED and "gold.dxf" in str(tampered.error)
    assert states(tmp_path / "b") == ["pending", "reading", "failed"]


def test_dwg_without_reader_fails_clearly(tmp_path: Path, cache: Path) -> None:
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(b"AC1032" + b"\x00" * 1000)
    outcome = evaluate(dwg, "plate", cache, "v1", tmp_path / "evaluation")
    assert outcome.state is EvaluationState.FAILED and outcome.exit_code == EXIT_FAILED
    assert str(status(tmp_path / "evaluation")["error"]).startswith("cannot read DWG here: ")
    assert not (tmp_path / "evaluation" / "score.json").exists()


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire() as server:
        yield server  # type: ignore[misc]


def _verdict(wire: ResponsesWire) -> Reply:
    args = json.dumps({"score": 0.9, "pass": True, "rationale": "same plate"})
    return Reply.json(wire.response_body([wire.function_call_item(args, call_id="c1", name=JUDGE_TOOL_NAME)]))


def test_judge_score_is_separate_and_its_failure_fails_the_evaluation(
    tmp_path: Path, cache: Path, wire: ResponsesWire
) -> None:
    judge = VisionJudge(JudgeSettings(model="m", base_url=wire.url + "/v1"), SECRET, sleep=lambda s: None)
    candidate = write_dxf(tmp_path / "attempt.dxf")
    wire.push(wire.error_reply(503, "busy"), _verdict(wire))
    out = tmp_path / "ok" / "evaluation"
    outcome = evaluate(candidate, "plate", cache, "v1", out, judge=judge, task_prompt="Draw the plate")
    assert outcome.state is EvaluationState.DONE and outcome.judge is not None and outcome.judge.score == 0.9
    assert states(out) == ["pending", "reading", "scoring", "rendering", "judging", "done"]
    assert status(out)["judge_score"] == 0.9 and status(out)["score"] == 1.0
    assert "judge" not in json.loads((out / "score.json").read_text())["components"]
    assert {"request.json", "responses.json", "score.json"} <= {p.name for p in (out / "vision-judge").iterdir()}
    body = wire.model_requests()[-1].json()
    assert "Draw the plate" in body["input"][0]["content"][0]["text"]

    wire.push(wire.error_reply(400, "bad request"))
    failed_out = tmp_path / "bad" / "evaluation"
    failed = evaluate(candidate, "plate", cache, "v1", failed_out, judge=judge)
    assert failed.state is EvaluationState.FAILED and failed.exit_code == EXIT_FAILED
    assert (failed_out / "score.json").is_file() and status(failed_out)["score"] == 1.0
    assert states(failed_out)[-2:] == ["judging", "failed"]
    for directory in (out, failed_out):
        for name, data in all_bytes(directory).items():
            assert SECRET.encode() not in data, name


def test_cli_exit_codes_and_key_from_environment_only(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate = write_dxf(tmp_path / "attempt.dxf")
    base = ["--task", "plate", "--gold-cache", str(cache), "--evaluator-version", "v1"]
    assert main(["--candidate", str(candidate), *base, "--out", str(tmp_path / "e1")]) == 0
    assert "done: task plate score 1.000000 passed" in capsys.readouterr().out
    empty = tmp_path / "empty.dxf"
    empty.write_bytes(b"")
    assert main(["--candidate", str(empty), *base, "--out", str(tmp_path / "e2")]) == 0
    assert "invalid" in capsys.readouterr().out
    assert (
        main(
            [
                "--candidate",
                str(candidate),
                *base[:2],
                "--gold-cache",
                str(tmp_path / "none"),
                "--evaluator-version",
                "v1",
                "--out",
                str(tmp_path / "e3"),
            ]
        )
        == 1
    )
    assert capsys.readouterr().err.count("\n") == 1
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["--candidate", str(candidate), *base, "--out", str(tmp_path / "e4"), "--judge-model", "m"]) == 1
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["--candidate", str(candidate)])
    assert usage.value.code == 2
    with pytest.raises(SystemExit):
        main(["--candidate", str(candidate), *base, "--out", str(tmp_path / "e5"), "--api-key", "x"])


def test_cli_runs_as_a_process(tmp_path: Path, cache: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autocad_bench_evaluator.cli",
            "--candidate",
            str(write_dxf(tmp_path / "a.dxf")),
            "--task",
            "plate",
            "--gold-cache",
            str(cache),
            "--evaluator-version",
            "v1",
            "--out",
            str(tmp_path / "ev"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "ev" / "status.json").read_text())["state"] == "done"


def test_evaluate_rollout_finds_the_attempt_drawing(tmp_path: Path, cache: Path) -> None:
    rollout = tmp_path / "rollouts" / "r1"
    rollout.mkdir(parents=True)
    none = evaluate_rollout(rollout, "plate", cache, "v1")
    assert none.state is EvaluationState.INVALID and (rollout / "evaluation" / "status.json").is_file()
    write_dxf(rollout / "attempt.dxf")
    done = evaluate_rollout(rollout, "plate", cache, "v1")
    assert done.state is EvaluationState.DONE and (rollout / "evaluation" / "render.png").is_file()
    assert rollout_candidate(rollout) == rollout / "attempt.dxf"


def test_judge_from_environment_never_takes_the_key_from_anywhere_else(tmp_path: Path) -> None:
    missing = judge_from_environment("m", {})
    with pytest.raises(JudgeError, match="OPENAI_API_KEY is not set"):
        missing.run(tmp_path, gold_png=b"", candidate_png=b"")
    present = judge_from_environment("m", {"OPENAI_API_KEY": SECRET}, base_url="http://127.0.0.1:9/v1")
    assert isinstance(present, VisionJudge) and SECRET not in repr(present.settings)

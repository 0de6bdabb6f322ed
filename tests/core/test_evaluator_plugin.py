"""Core reaches the evaluator only through the ``autocad_bench.evaluators`` plugin contract."""

from __future__ import annotations

import ast
import json
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import ClassVar

import click
import pytest

from autocad_bench.errors import MissingExtraError, PluginError
from autocad_bench.evaluation import evaluate_rollout
from autocad_bench.evaluators import (
    DrawingEvaluationRequest,
    EvaluatorPlugin,
    GoldCacheCheckRequest,
    select_evaluator,
)
from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest
from autocad_bench.plugins import PluginHost, PluginRegistry

CORE = Path(__file__).resolve().parents[2] / "core" / "src" / "autocad_bench"
ABOVE_CORE = ("autocad_bench_evaluator", "autocad_bench_broker", "autocad_bench_xvfb", "autocad_bench_aws",
              "autocad_bench_hyperv", "autocad_bench_openai", "autocad_bench_anthropic")
JUDGE_KEY = "judge-key-value-that-must-not-leak-41d2"


class Recording(EvaluatorPlugin):
    name: ClassVar[str] = "recording"

    def __init__(self) -> None:
        self.requests: list[DrawingEvaluationRequest] = []

    def evaluate_drawing(self, request: DrawingEvaluationRequest) -> int:
        self.requests.append(request)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        (request.output_dir / "status.json").write_text(json.dumps({"state": "done"}))
        return 0

    def check_gold_cache(self, request: GoldCacheCheckRequest) -> list[str]:
        return [f"missing {t}" for t in request.task_ids]


def _host(*plugins: object, entry_points: list[EntryPoint] | None = None) -> PluginHost:
    registry = PluginRegistry()
    for plugin in plugins:
        registry.register("evaluators", plugin)
    eps = entry_points or []
    return PluginHost(registry=registry, environ={},
                      entry_point_source=lambda group: [e for e in eps if e.group == group])


def _request(tmp_path: Path, **evaluation: object) -> RolloutLaunchRequest:
    spec = InfrastructureSpec.model_validate({"backend": "b", "broker_version": "v"})
    arguments = {"task_id": "t1", "evaluator": "recording", "evaluator_version": "1", "gold_cache": str(tmp_path),
                 **evaluation}
    return RolloutLaunchRequest(batch_id="b", rollout_id="r", attempt_id="a", task_id="t1", spec=spec,
                                child_command=("true",), output_dir=tmp_path / "r", log_path=tmp_path / "r.log",
                                evaluation=EvaluationArguments.model_validate(arguments))


def test_core_never_imports_a_distribution_above_it() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(CORE)}: {n}" for n in names if n.split(".")[0] in ABOVE_CORE]
    assert offenders == []


def test_the_installed_standard_evaluator_is_found_by_name() -> None:
    handle = select_evaluator()
    assert handle.name == "standard"
    commands = handle.call("evaluator_commands")
    assert [c.name for c in commands] == ["tasks"] and isinstance(commands[0], click.Group)


def test_a_missing_standard_evaluator_names_the_extra() -> None:
    with pytest.raises(MissingExtraError) as info:
        select_evaluator("standard", _host())
    assert str(info.value) == ("evaluator 'standard' is not installed: pip install \"autocad-bench[evaluator]\" "
                               "(installed: none)")


def test_an_unknown_evaluator_is_a_plugin_error_listing_the_installed_ones() -> None:
    with pytest.raises(PluginError, match=r"evaluator 'nope' is not installed \(installed: recording\)"):
        select_evaluator("nope", _host(Recording()))


def test_an_evaluator_without_the_required_hooks_is_refused() -> None:
    class Half(EvaluatorPlugin):
        name: ClassVar[str] = "half"

        def evaluate_drawing(self, request: DrawingEvaluationRequest) -> int:
            return 0

    with pytest.raises(PluginError, match="does not implement check_gold_cache"):
        select_evaluator("half", _host(Half()))


def test_evaluate_rollout_calls_the_configured_evaluator_with_the_drawing_and_the_judge_key(tmp_path: Path) -> None:
    plugin = Recording()
    request = _request(tmp_path, judge_model="judge-1", environment_names=["JUDGE_KEY"])
    request.output_dir.mkdir()
    (request.output_dir / "attempt.dxf").write_text("0\nEOF\n")
    code = evaluate_rollout(request, {"JUDGE_KEY": JUDGE_KEY}, host=_host(plugin))
    assert code == 0
    [seen] = plugin.requests
    assert seen.candidate == request.output_dir / "attempt.dxf"
    assert (seen.task_id, seen.evaluator_version, seen.gold_cache) == ("t1", "1", tmp_path)
    assert seen.judge_model == "judge-1" and seen.judge_api_key is not None
    assert seen.judge_api_key.get_secret_value() == JUDGE_KEY
    assert JUDGE_KEY not in repr(seen) and JUDGE_KEY not in seen.model_dump_json()


def test_evaluate_rollout_without_the_evaluator_fails_the_evaluation_naming_the_extra(tmp_path: Path) -> None:
    request = _request(tmp_path, evaluator="standard")
    code = evaluate_rollout(request, {}, host=_host())
    status = json.loads((request.output_dir / "evaluation" / "status.json").read_text())
    assert code == 1 and status["state"] == "failed"
    assert 'pip install "autocad-bench[evaluator]"' in status["error"]


def test_a_judge_without_its_key_fails_before_the_evaluator_runs(tmp_path: Path) -> None:
    plugin = Recording()
    request = _request(tmp_path, judge_model="judge-1", environment_names=["JUDGE_KEY"])
    assert evaluate_rollout(request, {}, host=_host(plugin)) == 1
    assert plugin.requests == []

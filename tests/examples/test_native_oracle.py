"""The native oracle: every smoke reference solution, spoken in each native action vocabulary
through a fake model server, scores exactly 1.0 on real LibreCAD under Xvfb.

Vocabularies, all in ``tool_mode: native``: Anthropic's native ``computer`` tool (provider
``anthropic``, ``examples/native-anthropic.json``), OpenAI's native GA ``computer`` tool
(provider ``openai``, ``examples/native-openai.json``) and the open-weight text grammars
(provider ``openweight``): ``uitars`` (``examples/vllm-uitars.json``) and
``qwen-computer-use``, ``qwen3-computer-use`` and ``pyautogui`` (that example with its grammar,
model and ``server_resize`` changed). The servers and the translation live in
:mod:`tests.examples.native_oracle`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.providers.grammar import load_grammar
from autocad_bench_anthropic.native.actions import map_computer_action
from autocad_bench_anthropic.native.session import DEFAULT_COMPUTER_TOOL, anthropic_geometry
from autocad_bench_openai.native.actions import map_computer_action as map_openai_action
from autocad_bench_openai.native.session import default_variant, openai_geometry
from autocad_bench_openweight.session import grammar_geometry
from tests.examples.native_oracle import (
    DESKTOP,
    GRAMMAR_SERVER_RESIZE,
    REPO,
    FakeServer,
    anthropic_server,
    anthropic_turn,
    grammar_frame,
    grammar_reply,
    grammar_server,
    is_done,
    load_solution,
    openai_response,
    openai_server,
    openai_turn,
    same_actions,
    serving,
    smoke_tasks,
    solution_path,
    uitars_geometry,
    uitars_reply,
    uitars_server,
)

needs_desktop = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("Xvfb", "librecad", "xdotool")),
    reason="Xvfb, LibreCAD and xdotool are required (apt-get install -y xvfb librecad xdotool)",
)

EXAMPLES = REPO / "examples"

SKIPPED: dict[tuple[str, str], str] = {}
"""(vocabulary, task id) -> why that task cannot be expressed in it. Empty: every smoke
solution uses only click (left, once), type and key, which every vocabulary expresses."""

GRAMMAR_MODELS = {
    "qwen-computer-use": "Qwen/Qwen2.5-VL-7B-Instruct",
    "qwen3-computer-use": "Qwen/Qwen3-VL-8B-Instruct",
    "pyautogui": "xlangai/OpenCUA-7B",
}
"""The model each open-weight grammar's oracle run names (served by the fake, never loaded)."""


@pytest.mark.parametrize("task_id", smoke_tasks())
def test_every_smoke_solution_translates_and_maps_back(task_id: str) -> None:
    turns = load_solution(task_id)
    assert turns and is_done(turns[-1])
    geometry = anthropic_geometry(DESKTOP)
    assert not geometry.is_identity  # the round trip really exercises the scaling
    for index, turn in enumerate(turns):
        inputs = anthropic_turn(turn, geometry)
        if is_done(turn):
            assert inputs is None
            continue
        assert inputs is not None
        mapped: list[Any] = []
        for tool_input in inputs:
            step = map_computer_action(tool_input, DEFAULT_COMPUTER_TOOL, geometry.to_desktop)
            assert step.kind == "actions", (tool_input, step.message)
            mapped.extend(step.actions)
        assert same_actions(turn, mapped), f"anthropic turn {index}: {turn} -> {inputs} -> {mapped}"

    grammar = load_grammar("uitars")
    frame = uitars_geometry(DESKTOP)
    for index, turn in enumerate(turns):
        reply = uitars_reply(index, turn, frame)
        parsed = grammar.parse(reply, frame).action_input
        assert same_actions(turn, parsed["actions"]), f"uitars turn {index}: {turn} -> {reply!r} -> {parsed}"


@pytest.mark.parametrize("task_id", smoke_tasks())
def test_every_smoke_solution_translates_to_openai_computer_calls_and_maps_back(task_id: str) -> None:
    turns = load_solution(task_id)
    geometry = openai_geometry(DESKTOP)
    assert (geometry.shown.width, geometry.shown.height) == (1366, 768)
    assert default_variant(example_config("native-openai.json")["rollouts"][0]["model"]) == "computer"
    for index, turn in enumerate(turns):
        actions = openai_turn(turn, geometry)
        if is_done(turn):
            assert actions is None
            continue
        assert actions is not None
        # Through the SDK's own types (as the fake server sends them) and back, as the session reads them.
        dumped = openai_response(index, actions, "gpt-5.4")
        calls = [item for item in dumped["output"] if item["type"] == "computer_call"]
        assert len(calls) == 1 and calls[0]["action"] is None
        mapped: list[Any] = []
        for action in calls[0]["actions"]:
            step = map_openai_action(action, geometry.to_desktop)
            assert step.kind == "actions", (action, step.message)
            mapped.extend(step.actions)
        assert same_actions(turn, mapped), f"openai turn {index}: {turn} -> {actions} -> {mapped}"
    final = openai_response(len(turns) - 1, None, "gpt-5.4")
    assert [item["type"] for item in final["output"]] == ["message"]


@pytest.mark.parametrize("grammar", sorted(GRAMMAR_SERVER_RESIZE))
@pytest.mark.parametrize("task_id", smoke_tasks())
def test_every_smoke_solution_translates_to_each_open_weight_grammar_and_parses_back(
        task_id: str, grammar: str) -> None:
    parser = load_grammar(grammar)
    frame = grammar_frame(grammar, DESKTOP)
    # The frame the oracle writes in is the one the session reads with under the run's server_resize.
    assert grammar_geometry(parser, DESKTOP, GRAMMAR_SERVER_RESIZE[grammar]) == frame
    assert parser.instructions(frame)
    turns = load_solution(task_id)
    for index, turn in enumerate(turns):
        reply = grammar_reply(grammar, index, turn, frame)
        parsed = parser.parse(reply, frame)
        assert parsed.finished == is_done(turn), reply
        assert same_actions(turn, parsed.action_input["actions"]), (
            f"{grammar} turn {index}: {turn} -> {reply!r} -> {parsed.action_input}")


def example_config(name: str) -> dict[str, Any]:
    """A shipped example configuration; it names its suite, so a copy runs from anywhere."""
    config: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    assert config["task_suite"] == "smoke" and "tasks_dir" not in config, "examples name the packaged suite"
    return config


def _run_example(tmp_path: Path, name: str, base_urls: dict[str, str], env: dict[str, str],
                 config: dict[str, Any] | None = None) -> Path:
    """Run the shipped example ``name`` (or ``config``, a changed copy of it) with each
    rollout's ``base_url`` pointed at its task's fake."""
    config = example_config(name) if config is None else config
    config["infrastructure"]["settings"] = {"state_dir": str(tmp_path / "state")}
    kept = []
    for rollout in config["rollouts"]:
        if rollout["task_id"] in base_urls:
            rollout["provider_options"] = {**rollout["provider_options"], "base_url": base_urls[rollout["task_id"]],
                                           "timeout_s": 60}
            kept.append(rollout)
    config["rollouts"], config["expected_rollouts"] = kept, len(kept)
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(config, indent=2))
    out = tmp_path / "run"
    started = time.monotonic()
    result = subprocess.run(["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(out)],
                            capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "1", **env})
    print(f"{config['name']}: batch took {time.monotonic() - started:.1f} s")
    logs = "".join(p.read_text()[-2000:] for p in sorted(out.glob("logs/*.log")))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + logs
    return out


def _evaluation_detail(out: Path, rollout_id: str) -> str:
    evaluation = out / "rollouts" / rollout_id / "evaluation"
    return "; ".join(f"{p.name}: {p.read_text()[:1500]}" for p in sorted(evaluation.glob("*.json")))


def _assert_all_scored(out: Path, servers: dict[str, FakeServer], vocabulary: str) -> None:
    for task_id, server in servers.items():
        assert server.errors == [], f"{vocabulary} {task_id}: the fake server refused requests: {server.errors}"
        assert sorted(set(server.answered)) == list(range(len(server.replies))), (task_id, server.answered)
    summary = json.loads((out / "summary.json").read_text())
    tasks = [t for t in smoke_tasks() if (vocabulary, t) not in SKIPPED]
    assert [r["task_id"] for r in summary["rollouts"]] == tasks
    for rollout in summary["rollouts"]:
        rollout_id = rollout["rollout_id"]
        assert (rollout["score"], rollout["passed"]) == (1.0, True), (
            f"{vocabulary} {rollout['task_id']}: score {rollout['score']}: {_evaluation_detail(out, rollout_id)}")
        assert rollout["tool_mode"] == "native", rollout
        result = json.loads((out / "rollouts" / rollout_id / "result.json").read_text())
        assert result["status"] == "completed" and result["stop_reason"] == "done", result
        assert result["tool_mode"] == "native", result


def _serve_all(stack: ExitStack, vocabulary: str, make: Any, model: str) -> dict[str, FakeServer]:
    servers = {}
    for task_id in smoke_tasks():
        if (vocabulary, task_id) in SKIPPED:
            continue
        servers[task_id] = stack.enter_context(serving(make(task_id, model)))
    return servers


@pytest.mark.integration
@needs_desktop
def test_the_smoke_solutions_score_1_through_the_anthropic_computer_tool(tmp_path: Path) -> None:
    model = example_config("native-anthropic.json")["rollouts"][0]["model"]
    with ExitStack() as stack:
        servers = _serve_all(stack, "anthropic", anthropic_server, model)
        out = _run_example(tmp_path, "native-anthropic.json", {t: s.url for t, s in servers.items()},
                           {"ANTHROPIC_API_KEY": "test-key"})
    _assert_all_scored(out, servers, "anthropic")


@pytest.mark.integration
@needs_desktop
def test_the_smoke_solutions_score_1_through_the_uitars_grammar(tmp_path: Path) -> None:
    model = example_config("vllm-uitars.json")["rollouts"][0]["model"]
    with ExitStack() as stack:
        servers = _serve_all(stack, "uitars", uitars_server, model)
        out = _run_example(tmp_path, "vllm-uitars.json", {t: f"{s.url}/v1" for t, s in servers.items()}, {})
    _assert_all_scored(out, servers, "uitars")
    # A self-hosted model is free unless its options price it, and the plan says so (it is
    # never billed at the price table's fallback, a cloud model's rates).
    warnings = json.loads((out / "admission.json").read_text())["warnings"]
    assert any(f"openweight/{model} is billed at the rates its provider_options declare" in w and "free" in w
               for w in warnings), warnings
    summary = json.loads((out / "summary.json").read_text())
    assert all(r["token_cost_usd"] == 0 for r in summary["rollouts"]), summary["rollouts"]


@pytest.mark.integration
@needs_desktop
def test_the_smoke_solutions_score_1_through_the_openai_computer_tool(tmp_path: Path) -> None:
    model = example_config("native-openai.json")["rollouts"][0]["model"]
    with ExitStack() as stack:
        servers = _serve_all(stack, "openai", openai_server, model)
        out = _run_example(tmp_path, "native-openai.json", {t: f"{s.url}/v1" for t, s in servers.items()},
                           {"OPENAI_API_KEY": "test-key"})
    _assert_all_scored(out, servers, "openai")
    for server in servers.values():
        assert ("GET", f"/v1/models/{model}") in server.requests  # the admission catalog check


def grammar_config(grammar: str) -> dict[str, Any]:
    """``examples/vllm-uitars.json`` speaking ``grammar``: its model, grammar and ``server_resize``."""
    config = example_config("vllm-uitars.json")
    config["name"] = f"vllm-{grammar}-smoke"
    for rollout in config["rollouts"]:
        rollout["rollout_id"] = rollout["rollout_id"].replace("uitars", grammar)
        rollout["model"] = GRAMMAR_MODELS[grammar]
        rollout["provider_options"] = {**rollout["provider_options"], "grammar": grammar,
                                       "server_resize": GRAMMAR_SERVER_RESIZE[grammar]}
    return config


@pytest.mark.integration
@needs_desktop
@pytest.mark.parametrize("grammar", sorted(GRAMMAR_SERVER_RESIZE))
def test_the_smoke_solutions_score_1_through_each_open_weight_grammar(tmp_path: Path, grammar: str) -> None:
    config = grammar_config(grammar)
    with ExitStack() as stack:
        servers = _serve_all(stack, grammar, grammar_server(grammar), GRAMMAR_MODELS[grammar])
        out = _run_example(tmp_path, "vllm-uitars.json", {t: f"{s.url}/v1" for t, s in servers.items()}, {},
                           config=config)
    _assert_all_scored(out, servers, grammar)


def test_the_solutions_read_are_the_suite_files() -> None:
    for task_id in smoke_tasks():
        assert solution_path(task_id).is_file()

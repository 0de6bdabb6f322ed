"""The native oracle: every smoke reference solution, spoken in each native action vocabulary
through a fake model server, scores exactly 1.0 on real LibreCAD under Xvfb.

Vocabularies: Anthropic's native ``computer`` tool (provider ``anthropic``) and the UI-TARS
text grammar (provider ``openweight``), both in ``tool_mode: native``. The servers and the
translation live in :mod:`tests.examples.native_oracle`.
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
from tests.examples.native_oracle import (
    DESKTOP,
    REPO,
    FakeServer,
    anthropic_server,
    anthropic_turn,
    is_done,
    load_solution,
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
solution uses only click (left, once), type and key, which both vocabularies express."""


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


def example_config(name: str) -> dict[str, Any]:
    """A shipped example configuration, its relative paths made absolute (it runs from a copy)."""
    config: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    for key in ("task_suite", "tasks_dir"):
        config[key] = str((EXAMPLES / config[key]).resolve())
    config["evaluation"]["gold_cache"] = str((EXAMPLES / config["evaluation"]["gold_cache"]).resolve())
    return config


def _run_example(tmp_path: Path, name: str, base_urls: dict[str, str], env: dict[str, str]) -> Path:
    """Run the shipped example ``name`` with each rollout's ``base_url`` pointed at its task's fake."""
    config = example_config(name)
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
    print(f"{name}: batch took {time.monotonic() - started:.1f} s")
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


def test_the_solutions_read_are_the_suite_files() -> None:
    for task_id in smoke_tasks():
        assert solution_path(task_id).is_file()

"""Repeated trials in the configuration and in admission (plan mode, through the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.config import expand_trials, parse_config_text
from autocad_bench.errors import ConfigError
from autocad_bench.providers.models import ModelSpec
from autocad_bench.providers.scripted import ScriptedProvider
from tests.core.batch_configs import SCRIPT, pool_config, write
from tests.core.test_admission import run


@pytest.fixture
def env(health_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    url, token = health_server
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", token)
    for name in ("AUTOCAD_BENCH_MAX_COST_USD", "AUTOCAD_BENCH_MAX_DURATION_S", "OPENAI_API_KEY",
                 "ANTHROPIC_API_KEY", "AUTOCAD_BENCH_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return url, token


def plan(tmp_path: Path, config: dict[str, Any], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code, out, err = run(["--config", str(write(tmp_path, config)), *args])
    return code, (json.loads(out) if out else None), err


def problems(config: dict[str, Any]) -> list[str]:
    try:
        parse_config_text(json.dumps(config), "cfg.json")
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


# --- configuration ------------------------------------------------------------------------


def test_trials_defaults_to_one_and_keeps_the_written_ids(tmp_path: Path, env: tuple[str, str]) -> None:
    code, report, err = plan(tmp_path, pool_config([env[0]], tmp_path / "l"))
    assert code == 0, err
    assert report is not None and report["trials"] == 1
    assert [(a["rollout_id"], a["assignment_id"], a["trial"]) for a in report["assignments"]] == [
        ("r1", "r1", 1), ("r2", "r2", 1)]


def test_trial_rollout_ids_are_suffixed_trial_by_trial(tmp_path: Path, env: tuple[str, str]) -> None:
    code, report, err = plan(tmp_path, pool_config([env[0]], tmp_path / "l", trials=3, expected_rollouts=6))
    assert code == 0, err
    assert report is not None and report["trials"] == 3 and report["enabled_rollouts"] == 6
    assert [(a["rollout_id"], a["assignment_id"], a["trial"], a["task_id"]) for a in report["assignments"]] == [
        ("r1.t1", "r1", 1, "t1"), ("r2.t1", "r2", 1, "t2"),
        ("r1.t2", "r1", 2, "t1"), ("r2.t2", "r2", 2, "t2"),
        ("r1.t3", "r1", 3, "t1"), ("r2.t3", "r2", 3, "t2")]
    count = next(c for c in report["checks"] if c["name"] == "expected_rollouts")
    assert count["reason"] == "6 enabled rollouts (2 assignments × 3 trials = 6), as expected"  # noqa: RUF001


@pytest.mark.parametrize("trials", [0, 101, -1, 2.5, "many", None])
def test_trials_bounds(trials: object) -> None:
    config = pool_config(["http://127.0.0.1:9"], Path("/nonexistent"), trials=trials)
    found = problems(config)
    assert len(found) == 1 and found[0].startswith("cfg.json: $.trials: "), found


@pytest.mark.parametrize("trials", [1, 2, 100])
def test_trials_within_bounds_are_accepted(trials: int) -> None:
    assert problems(pool_config(["http://127.0.0.1:9"], Path("/nonexistent"), trials=trials)) == []


def test_trial_id_over_the_identifier_limit_is_located() -> None:
    config = pool_config(["http://127.0.0.1:9"], Path("/nonexistent"), trials=10)
    config["rollouts"][0]["rollout_id"] = "a" * 124  # + ".t10" = 128 characters: fits
    config["rollouts"][1]["rollout_id"] = "b" * 125  # + ".t10" = 129 characters: too long
    assert problems(config) == [
        "cfg.json: $.rollouts[1].rollout_id: with trials = 10 the id of its last trial ('.t10' appended) "
        "has 129 characters; rollout ids, trial suffix included, are at most 128"]
    config["trials"] = 9  # ".t9": 127 and 128 characters
    assert problems(config) == []
    config["trials"] = 1  # no suffix: the written 128-character limit alone applies
    config["rollouts"][1]["rollout_id"] = "b" * 128
    assert problems(config) == []


def test_expansion_carries_assignment_trial_and_tool_mode() -> None:
    config = pool_config(["http://127.0.0.1:9"], Path("/nonexistent"), trials=2)
    config["rollouts"][0]["tool_mode"] = "native"
    planned = expand_trials(parse_config_text(json.dumps(config), "cfg.json"))
    assert [(p.rollout_id, p.assignment_id, p.trial, p.tool_mode, p.enabled) for p in planned] == [
        ("r1.t1", "r1", 1, "native", True), ("r2.t1", "r2", 1, "function", True),
        ("r1.t2", "r1", 2, "native", True), ("r2.t2", "r2", 2, "function", True)]
    only = expand_trials(parse_config_text(json.dumps(config), "cfg.json"), only={"r2.t2"})
    assert [p.rollout_id for p in only if p.enabled] == ["r2.t2"]


# --- admission counting --------------------------------------------------------------------


def test_expected_rollouts_counts_every_trial(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l", trials=3, expected_rollouts=2)
    code, report, err = plan(tmp_path, config)
    assert code == 2 and report is None
    assert err.strip() == (f"error: {tmp_path}/batch.json: $.expected_rollouts: expects 2 enabled rollouts but "
                           "the config enables 2 assignments × 3 trials = 6: more than expected is never "  # noqa: RUF001
                           "allowed (raise expected_rollouts)")
    # --allow-partial admits fewer than expected, never more.
    code, report, err = plan(tmp_path, config, "--allow-partial")
    assert code == 2 and report is None and "more than expected is never allowed" in err
    config["expected_rollouts"] = 9
    code, report, err = plan(tmp_path, config, "--allow-partial")
    assert code == 0, err
    assert report is not None and report["enabled_rollouts"] == 6 and report["allow_partial"] is True
    config["rollouts"][1]["enabled"] = False
    config["expected_rollouts"] = 3
    code, report, err = plan(tmp_path, config)
    assert code == 0, err
    assert report is not None and report["enabled_rollouts"] == 3
    assert [(a["rollout_id"], a["enabled"]) for a in report["assignments"]] == [
        ("r1.t1", True), ("r2.t1", False), ("r1.t2", True), ("r2.t2", False), ("r1.t3", True), ("r2.t3", False)]


def test_task_suite_check_holds_for_every_trial(tmp_path: Path, env: tuple[str, str]) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["t1", "t2"]}))
    config = pool_config([env[0]], tmp_path / "l", task_suite="suite.json", trials=2, expected_rollouts=4)
    code, report, err = plan(tmp_path, config)
    assert code == 0, err
    assert report is not None
    count = next(c for c in report["checks"] if c["name"] == "expected_rollouts")
    assert count["reason"].endswith("every model runs task suite 'suite.json' in order in each of 2 trials")
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["t2", "t1"]}))
    code, _, err = plan(tmp_path, config)
    assert code == 2
    assert err.strip() == (f"error: {tmp_path}/batch.json: $.rollouts: scripted/replay runs tasks ['t1', 't2'] "
                           "but task suite 'suite.json' is ['t2', 't1'] (same tasks, same order)")


def test_concurrency_admits_a_wave_over_all_trials(tmp_path: Path, env: tuple[str, str]) -> None:
    workers = [env[0]] * 4
    code, report, err = plan(tmp_path, pool_config(workers, tmp_path / "l", max_concurrency=4))
    assert code == 0, err
    assert report is not None and report["admitted_wave"] == 2  # two rollouts: two at once
    code, report, err = plan(tmp_path, pool_config(workers, tmp_path / "l", max_concurrency=4, trials=3,
                                                   expected_rollouts=6))
    assert code == 0, err
    assert report is not None and report["admitted_wave"] == 4  # six rollouts: four workers busy at once


def test_credentials_check_names_the_trials_that_need_them(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l", trials=3, expected_rollouts=6)
    for rollout in config["rollouts"]:
        rollout.update(provider="anthropic", model=f"claude-test-{rollout['rollout_id']}", provider_options={})
    code, report, _ = plan(tmp_path, config, "--skip-direct-model-check")
    assert code == 1 and report is not None
    credentials = next(c for c in report["checks"] if c["name"] == "credentials")
    assert credentials["passed"] is False
    assert credentials["reason"] == ("missing environment variables: ANTHROPIC_API_KEY "
                                     "(needed by r1 (3 trials), r2 (3 trials))")


# --- the scripted provider's options -------------------------------------------------------


def _validate(options: dict[str, Any], base_dir: Path) -> list[str]:
    spec = ModelSpec(provider="scripted", model="replay", options=options, base_dir=base_dir)
    return [str(p) for p in ScriptedProvider().validate_model_spec(spec, "cfg.json: $.rollouts[0]")]


def test_scripted_options_take_exactly_one_of_script_and_scripts(tmp_path: Path) -> None:
    one_of = ('cfg.json: $.rollouts[0].provider_options: give exactly one of "script" (one JSONL file), '
              '"scripts" (a list of them; trial n replays scripts[(n - 1) % len(scripts)]) or "task_script" '
              '(a file in the task\'s folder, e.g. "solution.librecad.jsonl")')
    assert _validate({}, tmp_path) == [one_of]
    assert _validate({"script": str(SCRIPT), "scripts": [str(SCRIPT)]}, tmp_path) == [one_of]
    assert _validate({"script": str(SCRIPT), "task_script": "solution.librecad.jsonl"}, tmp_path) == [one_of]
    assert _validate({"scripts": []}, tmp_path) == [
        "cfg.json: $.rollouts[0].provider_options.scripts: List should have at least 1 item after validation, "
        "not 0"]
    assert _validate({"script": str(SCRIPT)}, tmp_path) == []
    assert _validate({"scripts": [str(SCRIPT), str(SCRIPT)]}, tmp_path) == []


def test_every_listed_script_is_checked(tmp_path: Path) -> None:
    (tmp_path / "broken.jsonl").write_text('{"actions": []}\nnot json\n')
    found = _validate({"scripts": [str(SCRIPT), "missing.jsonl", "broken.jsonl"]}, tmp_path)
    assert found[0] == (f"cfg.json: $.rollouts[0].provider_options.scripts[1]: script not found: "
                        f"{tmp_path}/missing.jsonl")
    assert found[1].startswith(f"cfg.json: $.rollouts[0].provider_options.scripts[2]: {tmp_path}/broken.jsonl:2: "
                               "not JSON")
    assert len(found) == 2


# --- tool mode -----------------------------------------------------------------------------


def test_an_unknown_tool_mode_is_a_located_config_error() -> None:
    config = pool_config(["http://127.0.0.1:9"], Path("/nonexistent"))
    config["rollouts"][1]["tool_mode"] = "native-computer-use"
    assert problems(config) == ["cfg.json: $.rollouts[1].tool_mode: Input should be 'function' or 'native'"]


def test_native_on_a_provider_without_it_is_refused_at_plan(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["rollouts"][0]["tool_mode"] = "native"
    code, report, err = plan(tmp_path, config)
    assert code == 2 and report is None
    assert (f"{tmp_path}/batch.json: $.rollouts[0].tool_mode: provider 'scripted' has no 'native' tool mode "
            "(it supports: function)") in err
    assert err.count("tool_mode") == 1, err  # the provider's own check and core's are one problem


def test_the_provider_base_checks_the_tool_mode_it_declares() -> None:
    spec = ModelSpec(provider="scripted", model="m", options={"script": str(SCRIPT)}, tool_mode="native")
    assert [str(p) for p in ScriptedProvider().validate_model_spec(spec, "here")] == [
        "here.tool_mode: provider 'scripted' has no 'native' tool mode (it supports: function); use one of those "
        "or a provider that implements 'native'"]

    class Both(ScriptedProvider):
        tool_modes = frozenset({"function", "native"})

    assert Both().validate_model_spec(spec, "here") == []


def test_a_provider_declaring_a_tool_mode_that_does_not_exist_is_refused_when_defined() -> None:
    from autocad_bench.errors import PluginError

    with pytest.raises(PluginError, match="tool_modes must be a non-empty frozenset of function, native"):
        class Computer(ScriptedProvider):
            tool_modes = frozenset({"computer-use"})

"""Configurations name the packaged suite, tasks, gold cache and reference solutions by name."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE
from click.testing import CliRunner

from autocad_bench.admission import AdmissionOptions, admit
from autocad_bench.cli.init import example_config, init_command
from autocad_bench.config import load_config
from autocad_bench.config.loading import parse_config_text
from autocad_bench.config.packs import TaskPack, find_suite, installed_packs, is_suite_name
from autocad_bench.errors import ConfigError
from autocad_bench.plugins import PluginHost

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "suite"


def config(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "expected_rollouts": 3, "task_suite": "smoke",
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11", "settings": {}},
        "rollouts": [{"rollout_id": f"r-{t}", "task_id": t, "provider": "scripted", "model": "reference-solution",
                      "provider_options": {"task_script": "solution.librecad.jsonl"}}
                     for t in ("prim-rectangle", "prim-circle-concentric", "part-plate-four-holes")],
    }
    base.update(overrides)
    return base


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(data))
    return path


def test_a_suite_name_completes_the_configuration_from_the_standard_pack(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, config()))
    assert loaded.task_suite_path == SUITE / "suites" / "smoke.json"
    assert loaded.tasks_dir == SUITE / "tasks"
    assert loaded.gold_cache == SHIPPED_GOLD_CACHE
    assert loaded.config.evaluation.evaluator_version == EVALUATOR_VERSION
    assert loaded.pack is not None and loaded.pack.name == "standard"


def test_the_pack_qualified_name_and_explicit_settings_win(tmp_path: Path) -> None:
    own_tasks = tmp_path / "tasks"
    own_tasks.mkdir()
    loaded = load_config(write(tmp_path, config(task_suite="standard:smoke", tasks_dir="tasks",
                                                evaluation={"gold_cache": "gold", "evaluator_version": "v9"})))
    assert loaded.task_suite_path == SUITE / "suites" / "smoke.json"
    assert loaded.tasks_dir == own_tasks.resolve()
    assert loaded.gold_cache == (tmp_path / "gold").resolve()
    assert loaded.config.evaluation.evaluator_version == "v9"


def test_an_own_gold_cache_does_not_inherit_the_packs_version(tmp_path: Path) -> None:
    """The pack's version belongs to the pack's gold cache; another cache must name its own."""
    loaded = load_config(write(tmp_path, config(evaluation={"gold_cache": "gold"})))
    assert loaded.config.evaluation.evaluator_version is None


def test_a_written_version_is_kept_and_checked_against_the_packs_gold_cache(tmp_path: Path) -> None:
    path = write(tmp_path, config(evaluation={"evaluator_version": "1999.1.1"}))
    loaded = load_config(path)
    assert loaded.gold_cache == SHIPPED_GOLD_CACHE and loaded.config.evaluation.evaluator_version == "1999.1.1"
    report = admit(loaded, PluginHost(environ={}), {}, loaded.config.budgets, AdmissionOptions()).report
    gold = next(c for c in report.checks if c.name == "gold_cache")
    assert not gold.passed and "1999.1.1" in gold.reason


@pytest.mark.parametrize("reference", ["suite.json", "suites/smoke.json", "../x/smoke.json", "/abs/smoke.json"])
def test_paths_stay_paths(reference: str) -> None:
    assert not is_suite_name(reference)
    data = config(task_suite=reference, tasks_dir="t")
    assert parse_config_text(json.dumps(data), "c.json").task_suite == reference


def test_an_unknown_suite_is_one_located_error_listing_what_is_installed() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text(json.dumps(config(task_suite="smok")), "c.json")
    [problem] = caught.value.problems
    assert problem.location == "c.json: $.task_suite"
    assert "no installed task pack ships a suite named 'smok'" in problem.message
    assert "standard:" in problem.message and "smoke" in problem.message


def test_an_unknown_pack_is_named() -> None:
    with pytest.raises(ConfigError, match="no task pack named 'nope' is installed"):
        parse_config_text(json.dumps(config(task_suite="nope:smoke")), "c.json")


def fake_pack(root: Path, name: str, *suites: str) -> TaskPack:
    (root / name / "suites").mkdir(parents=True)
    for suite in suites:
        (root / name / "suites" / f"{suite}.json").write_text(json.dumps({"name": suite, "tasks": ["t"]}))
    return TaskPack(name=name, suites_dir=root / name / "suites", tasks_dir=root / name / "tasks")


def test_a_name_two_packs_ship_must_be_qualified(tmp_path: Path) -> None:
    packs = [fake_pack(tmp_path, "a", "smoke"), fake_pack(tmp_path, "b", "smoke", "other")]
    with pytest.raises(ConfigError, match="several task packs; name one: a:smoke, b:smoke"):
        find_suite("smoke", "$", packs, [])
    assert find_suite("b:smoke", "$", packs, [])[1] == tmp_path / "b" / "suites" / "smoke.json"
    assert find_suite("other", "$", packs, [])[0].name == "b"


def test_without_any_pack_the_error_says_what_to_install() -> None:
    with pytest.raises(ConfigError, match=r'pip install "autocad-bench\[evaluator\]"'):
        find_suite("smoke", "$", [], [])


def test_a_broken_pack_is_reported_and_hides_no_other(tmp_path: Path) -> None:
    good = fake_pack(tmp_path, "good", "mine")
    import sys
    import types

    module = types.ModuleType("_fake_packs_for_test")
    module.good = lambda: good  # type: ignore[attr-defined]
    module.bad = lambda: {"name": "bad"}  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        points = [EntryPoint("good", f"{module.__name__}:good", "autocad_bench.task_packs"),
                  EntryPoint("bad", f"{module.__name__}:bad", "autocad_bench.task_packs"),
                  EntryPoint("gone", "no_such_module_xyz:pack", "autocad_bench.task_packs")]
        packs, broken = installed_packs(lambda: points)
    finally:
        del sys.modules[module.__name__]
    assert [p.name for p in packs] == ["good"]
    assert [b.split(" (")[0] for b in broken] == ["task pack 'bad'", "task pack 'gone'"]
    with pytest.raises(ConfigError, match="task pack 'bad'"):
        find_suite("missing", "$", packs, broken)


def plan(path: Path) -> list[str]:
    loaded = load_config(path)
    try:
        admit(loaded, PluginHost(environ={}), {}, loaded.config.budgets, AdmissionOptions())
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


def test_task_script_replays_each_tasks_own_file_and_admission_checks_it(tmp_path: Path) -> None:
    assert plan(write(tmp_path, config())) == []
    data = config()
    data["rollouts"][1]["provider_options"] = {"task_script": "solution.missing.jsonl"}
    [problem] = plan(write(tmp_path, data))
    where = f"{tmp_path / 'batch.json'}: $.rollouts[1].provider_options.task_script"
    assert problem.startswith(f"{where}: script not found")
    assert "prim-circle-concentric/solution.missing.jsonl" in problem


def test_task_script_is_a_file_name_and_one_source_only(tmp_path: Path) -> None:
    data = config()
    data["rollouts"][0]["provider_options"] = {"task_script": "../prim-circle-concentric/solution.librecad.jsonl"}
    assert any("$.rollouts[0].provider_options.task_script" in p for p in plan(write(tmp_path, data)))
    data["rollouts"][0]["provider_options"] = {"task_script": "solution.librecad.jsonl", "script": "x.jsonl"}
    assert any("exactly one of" in p for p in plan(write(tmp_path, data)))


def test_task_script_without_a_task_directory_says_so(tmp_path: Path) -> None:
    data = config(task_suite=None, expected_rollouts=1, evaluation={"enabled": False})
    data["rollouts"] = data["rollouts"][:1]
    [problem] = plan(write(tmp_path, data))
    assert "$.rollouts[0].provider_options.task_script: task_script needs the batch's task directory" in problem


def test_init_writes_the_shipped_example_and_prints_how_to_run_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(init_command, [str(tmp_path / "ex")])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "ex" / "batch.json").read_text())
    example = json.loads((REPO / "examples" / "local-librecad.json").read_text())
    assert {**written, "name": None} == {**example, "name": None}, "the README example is what init writes"
    assert f"autocad-bench-batch --config {tmp_path / 'ex' / 'batch.json'} --execute --output-dir" in result.output
    assert plan(tmp_path / "ex" / "batch.json") == []


def test_init_never_overwrites_and_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    target = tmp_path / "ex" / "batch.json"
    target.parent.mkdir()
    target.write_text("mine")
    again = CliRunner().invoke(init_command, [str(tmp_path / "ex")])
    assert again.exit_code == 2 and "already exists" in again.output and target.read_text() == "mine"
    autocad = CliRunner().invoke(init_command, [str(tmp_path / "a"), "--suite", "autocad-full"])
    assert autocad.exit_code == 2 and "no LibreCAD reference solution" in autocad.output
    assert not (tmp_path / "a").exists(), "nothing is written on an error"
    unknown = CliRunner().invoke(init_command, [str(tmp_path / "u"), "--suite", "nope"])
    assert unknown.exit_code == 2 and "no installed task pack ships a suite named 'nope'" in unknown.output
    assert "Traceback" not in again.output + autocad.output + unknown.output


def test_example_config_lists_the_suite_in_order() -> None:
    made = example_config("smoke", ["a", "b"], name="n")
    assert [r["task_id"] for r in made["rollouts"]] == ["a", "b"] and made["expected_rollouts"] == 2

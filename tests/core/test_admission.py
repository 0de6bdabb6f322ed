"""Every admission rule through the CLI, with the exact text an operator sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from autocad_bench.cli.batch import batch_command
from tests.core.batch_configs import REPO, pool_config, write

TASKS = REPO / "examples" / "tasks"


@pytest.fixture
def env(health_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    url, token = health_server
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", token)
    for name in ("AUTOCAD_BENCH_MAX_COST_USD", "AUTOCAD_BENCH_MAX_DURATION_S", "OPENAI_API_KEY",
                 "AUTOCAD_BENCH_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return url, token


def judged(tmp_path: Path) -> dict[str, Any]:
    """Evaluation with a vision judge and a real gold cache for tasks t1 and t2."""
    import ezdxf
    from autocad_bench_evaluator.gold_cache import build_entry
    from autocad_bench_evaluator.spec import ScoringSpec

    gold = tmp_path / "gold.dxf"
    doc = ezdxf.new()
    doc.modelspace().add_line((0, 0), (10, 0))
    doc.saveas(gold)
    for task in ("t1", "t2"):
        build_entry(tmp_path / "gold-cache", "e1", gold, ScoringSpec(task_id=task))
    return {"enabled": True, "gold_cache": str(tmp_path / "gold-cache"), "evaluator_version": "e1",
            "judge": {"model": "gpt-5.1"}}


def test_evaluation_needs_gold_cache_settings(tmp_path: Path, env: tuple[str, str]) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l", evaluation={"enabled": True}))
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.splitlines() == [
        f"error: {path}: $.evaluation.{field}: required when evaluation is enabled (set "
        '"evaluation": {"enabled": false} only for deliberately unevaluated runs)'
        for field in ("gold_cache", "evaluator_version")]


def test_tampered_gold_cache_fails_admission_naming_the_file(tmp_path: Path, env: tuple[str, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    evaluation = judged(tmp_path)
    gold = tmp_path / "gold-cache" / "e1" / "t2" / "gold.dxf"
    gold.write_bytes(gold.read_bytes() + b"999\ntampered\n")
    code, out, _ = run(["--config", str(write(tmp_path, pool_config([env[0]], tmp_path / "l",
                                                                     evaluation=evaluation)))])
    assert code == 1
    check = next(c for c in json.loads(out)["checks"] if c["name"] == "gold_cache")
    assert check["step"] == 5 and check["passed"] is False
    assert "gold.dxf" in check["reason"] and "t2" in check["reason"]


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(batch_command, args)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def plan(tmp_path: Path, url: str, **overrides: Any) -> tuple[int, str, str]:
    config = pool_config([url, url], tmp_path / "leases", **overrides)
    return run(["--config", str(write(tmp_path, config))])


def test_valid_config_plans(tmp_path: Path, env: tuple[str, str]) -> None:
    code, out, err = plan(tmp_path, env[0])
    assert code == 0, err
    report = json.loads(out)
    assert report["passed"] is True
    assert report["mode"] == "plan"
    assert report["infrastructure_backend"] == "example-pool"
    assert report["admitted_wave"] == 2
    assert [a["rollout_id"] for a in report["assignments"]] == ["r1", "r2"]
    assert all(a["infrastructure_backend"] == "example-pool" for a in report["assignments"])
    assert [c["name"] for c in report["checks"]][:4] == [
        "config_parsed", "unique_assignments", "expected_rollouts", "credentials"]
    assert not (tmp_path / "leases").exists(), "plan mode must not create anything"


def test_unknown_field_rejected(tmp_path: Path, env: tuple[str, str]) -> None:
    code, out, err = plan(tmp_path, env[0], surprise=1)
    assert code == 2 and out == ""
    assert err == f"error: {tmp_path}/batch.json: $.surprise: unknown field\n"


def test_duplicate_rollout_ids(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["rollouts"][1]["rollout_id"] = "r1"
    code, _, err = run(["--config", str(write(tmp_path, config))])
    assert code == 2
    assert (f"error: {tmp_path}/batch.json: $.rollouts[1].rollout_id: duplicate rollout id 'r1' "
            "(first at $.rollouts[0])") in err


def test_duplicate_assignment(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["rollouts"][1]["task_id"] = "t1"
    code, _, err = run(["--config", str(write(tmp_path, config))])
    assert code == 2
    assert err.strip() == (f"error: {tmp_path}/batch.json: $.rollouts[1]: duplicate assignment task 't1' / "
                           "provider 'scripted' / model 'replay' / tool mode 'function' (first at $.rollouts[0])")


def test_one_model_in_two_tool_modes_is_two_assignments(tmp_path: Path) -> None:
    from autocad_bench.admission.admit import _unique_assignments
    from autocad_bench.config.loading import load_config
    from autocad_bench.config.trials import active_entries

    config = pool_config(["http://127.0.0.1:9"], tmp_path / "l")
    config["rollouts"][1]["task_id"] = "t1"
    config["rollouts"][1]["tool_mode"] = "native"
    loaded = load_config(write(tmp_path, config))
    assert _unique_assignments(loaded, active_entries(loaded.planned_rollouts())) == []


def test_expected_count_and_allow_partial(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l", expected_rollouts=3)
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.strip() == (f"error: {path}: $.expected_rollouts: expects 3 enabled rollouts but the config "
                           "enables 2 (pass --allow-partial only for a deliberately smaller experiment)")
    code, out, _ = run(["--config", str(path), "--allow-partial"])
    assert code == 0
    assert json.loads(out)["allow_partial"] is True


def test_disabled_rollouts_do_not_count(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l", expected_rollouts=1)
    config["rollouts"][1]["enabled"] = False
    code, out, err = run(["--config", str(write(tmp_path, config))])
    assert code == 0, err
    assert json.loads(out)["enabled_rollouts"] == 1


def test_task_suite_must_match_in_order(tmp_path: Path, env: tuple[str, str]) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["t2", "t1"]}))
    config = pool_config([env[0]], tmp_path / "l", task_suite="suite.json")
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.strip() == (f"error: {path}: $.rollouts: scripted/replay runs tasks ['t1', 't2'] but task "
                           "suite 'suite.json' is ['t2', 't1'] (same tasks, same order)")
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["t1", "t2"]}))
    assert run(["--config", str(path)])[0] == 0


def test_missing_task_suite(tmp_path: Path, env: tuple[str, str]) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l", task_suite="nope.json"))
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert f"error: {path}: $.task_suite: task suite 'nope.json' not found" in err


def test_missing_credentials_fail_check_and_name_only(tmp_path: Path, env: tuple[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    config = pool_config([env[0]], tmp_path / "l", evaluation=judged(tmp_path))
    code, out, _ = run(["--config", str(write(tmp_path, config))])
    assert code == 1
    report = json.loads(out)
    cred = next(c for c in report["checks"] if c["name"] == "credentials")
    assert cred == {"step": 4, "name": "credentials", "passed": False,
                    "reason": "missing environment variables: OPENAI_API_KEY (needed by vision judge)",
                    "details": {"missing": ["OPENAI_API_KEY"]}}


def test_present_credentials_are_named_never_printed(tmp_path: Path, env: tuple[str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-never-printed")
    config = pool_config([env[0]], tmp_path / "l", evaluation=judged(tmp_path))
    code, out, err = run(["--config", str(write(tmp_path, config))])
    assert code == 0, err
    assert "sk-test-secret-never-printed" not in out + err
    assert "present: OPENAI_API_KEY" in out


@pytest.mark.parametrize(("version", "message"), [
    ("windows-autocad-2019-v9", "'windows-autocad-2019-v9' is not supported: broker v9 images are rejected "
     "before agent handoff: they lack the replay-safe lease/reset and exactly-once action contract "
     "(v9 is a rollback image only)"),
    ("v12", "'v12' is not a supported broker version (supported: windows-autocad-2019-v10, "
     "windows-autocad-2019-v11)"),
])
def test_broker_version(tmp_path: Path, env: tuple[str, str], version: str, message: str) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["infrastructure"]["broker_version"] = version
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.strip() == f"error: {path}: $.infrastructure.broker_version: {message}"


def test_v10_is_accepted(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["infrastructure"]["broker_version"] = "windows-autocad-2019-v10"
    assert run(["--config", str(write(tmp_path, config))])[0] == 0


def test_literal_credential_in_settings_is_refused_without_echo(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["infrastructure"]["settings"]["api_token"] = "literal-secret-123"
    path = write(tmp_path, config)
    code, out, err = run(["--config", str(path)])
    assert code == 2
    assert "literal-secret-123" not in out + err
    assert (f"error: {path}: $.infrastructure.settings.api_token: looks like a literal credential; backend "
            "settings must name an environment variable instead") in err


def test_backend_validate_spec_errors_are_located(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["infrastructure"]["settings"]["workers"] = []
    config["infrastructure"]["image_id"] = "ami-123"
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.splitlines() == [
        f"error: {path}: $.infrastructure.image_id: unknown field for backend 'example-pool'",
        f"error: {path}: $.infrastructure.settings.workers: List should have at least 1 item after "
        "validation, not 0",
    ]


def test_unknown_backend_and_provider(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["infrastructure"]["backend"] = "acme-pool"
    config["rollouts"][0]["provider"] = "acme-llm"
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith(f"error: {path}: $.rollouts[0].provider: unknown provider 'acme-llm' "
                               "(installed: ")
    assert "scripted" in lines[0]
    # (the "pip install autocad-bench[extra]" hint for known names is covered in test_plugins.py,
    # where the set of installed entry points is controlled)
    assert lines[1].startswith(f"error: {path}: $.infrastructure.backend: backend 'acme-pool' is not installed "
                               "(installed: ")
    assert "example-pool" in lines[1]


def test_scripted_provider_options_validated(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l")
    config["rollouts"][0]["provider_options"] = {"script": "missing.jsonl", "speed": 2}
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.strip() == f"error: {path}: $.rollouts[0].provider_options.speed: unknown field"
    config["rollouts"][0]["provider_options"] = {"script": "missing.jsonl"}
    code, _, err = run(["--config", str(write(tmp_path, config))])
    assert err.strip() == (f"error: {path}: $.rollouts[0].provider_options.script: script not found: "
                           f"{tmp_path}/missing.jsonl")


def test_preflight_failure_exits_1(tmp_path: Path, env: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", "wrong-token")
    code, out, _ = plan(tmp_path, env[0])
    assert code == 1
    report = json.loads(out)
    assert report["passed"] is False
    failed = [c["name"] for c in report["checks"] if not c["passed"]]
    assert failed == [f"preflight.worker {env[0]}", f"preflight.worker {env[0]}", "preflight.capacity"]


def test_budget_precedence_flags_over_env_over_file(tmp_path: Path, env: tuple[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l",
                                       budgets={"max_cost_usd": 1.0, "max_duration_s": 100}))
    report = json.loads(run(["--config", str(path)])[1])
    assert report["budgets"]["max_cost_usd"] == 1.0
    monkeypatch.setenv("AUTOCAD_BENCH_MAX_COST_USD", "2.5")
    monkeypatch.setenv("AUTOCAD_BENCH_MAX_DURATION_S", "50")
    report = json.loads(run(["--config", str(path)])[1])
    assert (report["budgets"]["max_cost_usd"], report["budgets"]["max_duration_s"]) == (2.5, 50.0)
    report = json.loads(run(["--config", str(path), "--max-cost-usd", "0.5", "--max-turns", "7"])[1])
    assert (report["budgets"]["max_cost_usd"], report["budgets"]["max_turns"]) == (0.5, 7)
    assert report["budgets"]["max_actions"] == 5000
    assert report["budgets"]["max_consecutive_invalid_turns"] == 10


def test_bad_budget_environment_is_a_config_error(tmp_path: Path, env: tuple[str, str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCAD_BENCH_MAX_DURATION_S", "soon")
    code, _, err = plan(tmp_path, env[0])
    assert code == 2
    assert err.strip() == "error: environment AUTOCAD_BENCH_MAX_DURATION_S: must be a positive number"


def test_execute_refuses_existing_output_dir(tmp_path: Path, env: tuple[str, str]) -> None:
    (tmp_path / "out").mkdir()
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l"))
    code, out, err = run(["--config", str(path), "--execute", "--output-dir", str(tmp_path / "out")])
    assert code == 2 and out == ""
    assert err.strip() == (f"error: --output-dir {tmp_path}/out: already exists; choose a new directory "
                           "(interrupted batches continue with autocad-bench-resume)")


def test_execute_with_failing_check_creates_nothing(tmp_path: Path, env: tuple[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", "wrong-token")
    config = pool_config([env[0]], tmp_path / "l", tasks_dir=str(TASKS))
    for index, rollout in enumerate(config["rollouts"]):
        rollout.update(task_id="line-and-circle", model=f"replay-{index}")
    path = write(tmp_path, config)
    code, out, _ = run(["--config", str(path), "--execute", "--output-dir", str(tmp_path / "out")])
    assert code == 1
    assert json.loads(out)["mode"] == "execute"
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "l").exists()


@pytest.mark.parametrize("args", [["--execute"], ["--output-dir", "x"],
                                  ["--execute", "--output-dir", "x", "--skip-direct-model-check"]])
def test_usage_errors_exit_2(tmp_path: Path, env: tuple[str, str], args: list[str]) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l"))
    code, _, err = run(["--config", str(path), *args])
    assert code == 2
    assert "Traceback" not in err


def test_skip_direct_model_check_is_reported(tmp_path: Path, env: tuple[str, str]) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l"))
    report = json.loads(run(["--config", str(path), "--skip-direct-model-check"])[1])
    catalog = [c for c in report["checks"] if c["name"].startswith("model_catalog")]
    assert catalog == [{"step": 8, "name": "model_catalog", "passed": True, "details": {},
                        "reason": "skipped (--skip-direct-model-check); execute mode never skips it"}]


def test_execute_needs_tasks_that_exist(tmp_path: Path, env: tuple[str, str]) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l"))
    code, _, err = run(["--config", str(path), "--execute", "--output-dir", str(tmp_path / "out")])
    assert code == 2
    assert err.strip() == f"error: {path}: $.tasks_dir: execute mode needs a task directory"
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l", tasks_dir=str(TASKS)))
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.splitlines()[0] == f"error: {path}: $.rollouts[0].task_id: task 't1' not found in {TASKS}"
    assert not (tmp_path / "out").exists()


def test_options_are_validated_even_when_a_provider_skips_its_own_check(
        tmp_path: Path, env: tuple[str, str]) -> None:
    from pydantic import BaseModel, ConfigDict

    from autocad_bench.errors import Problem
    from autocad_bench.plugins import default_registry, register_model_provider
    from autocad_bench.providers.models import ModelSpec
    from autocad_bench.providers.scripted import ScriptedProvider

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        script: str

    class Lax(ScriptedProvider):
        name = "lax-scripted"
        options_model = Options

        def validate_model_spec(self, model: ModelSpec, location: str) -> list[Problem]:
            return []  # forgets super(): admission must still hold the options contract

    register_model_provider(Lax)
    try:
        config = pool_config([env[0]], tmp_path / "l")
        config["rollouts"][0].update(provider="lax-scripted", provider_options={"script": "s", "speed": 2})
        path = write(tmp_path, config)
        code, _, err = run(["--config", str(path)])
    finally:
        default_registry().unregister("providers", "lax-scripted")
    assert code == 2
    assert err.strip() == f"error: {path}: $.rollouts[0].provider_options.speed: unknown field"

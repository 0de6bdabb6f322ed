"""Strict types and sane bounds in the batch configuration, through the public CLI.

A JSON string or boolean is never an integer, a number is never a boolean, absurd sizes are
rejected, and the batch name is a path-safe identifier. Every problem is one located line.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from autocad_bench.cli.batch import batch_command
from autocad_bench.config.loading import effective_budgets, load_config
from autocad_bench.config.models import BudgetConfig
from autocad_bench.errors import ConfigError
from tests.core.batch_configs import pool_config, write

DAYS_30 = 30 * 24 * 3600


@pytest.fixture
def env(health_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    url, token = health_server
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", token)
    for name in ("AUTOCAD_BENCH_MAX_COST_USD", "AUTOCAD_BENCH_MAX_DURATION_S", "AUTOCAD_BENCH_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return url, token


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(batch_command, args)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def with_value(config: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[last] = value
    return config


def json_path(dotted: str) -> str:
    return "$" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in dotted.split("."))


REJECTED = [
    # (field, value, message)
    ("max_concurrency", "2", "Input should be a valid integer"),
    ("max_concurrency", True, "Input should be a valid integer"),
    ("max_concurrency", 2.0, "Input should be a valid integer"),
    ("max_concurrency", 10**12, "Input should be less than or equal to 10000"),
    ("max_concurrency", 1e12, "Input should be a valid integer"),
    ("expected_rollouts", "2", "Input should be a valid integer"),
    ("expected_rollouts", True, "Input should be a valid integer"),
    ("expected_rollouts", 1_000_001, "Input should be less than or equal to 1000000"),
    ("trials", "2", "Input should be a valid integer"),
    ("budgets.max_turns", 1e30, "Input should be a valid integer"),
    ("budgets.max_turns", 100_001, "Input should be less than or equal to 100000"),
    ("budgets.max_turns", "5", "Input should be a valid integer"),
    ("budgets.max_actions", True, "Input should be a valid integer"),
    ("budgets.max_actions", 10_000_001, "Input should be less than or equal to 10000000"),
    ("budgets.max_consecutive_invalid_turns", "3", "Input should be a valid integer"),
    ("budgets.max_consecutive_invalid_turns", 10_001, "Input should be less than or equal to 10000"),
    ("budgets.max_duration_s", "60", "Input should be a valid number"),
    ("budgets.max_duration_s", True, "Input should be a valid number"),
    ("budgets.max_duration_s", DAYS_30 + 1, f"Input should be less than or equal to {DAYS_30}"),
    ("budgets.max_cost_usd", "1.5", "Input should be a valid number"),
    ("budgets.max_cost_usd", True, "Input should be a valid number"),
    ("budgets.max_cost_usd", 1e30, "Input should be less than or equal to 1000000"),
    ("evaluation.enabled", "true", "Input should be a valid boolean"),
    ("evaluation.enabled", 1, "Input should be a valid boolean"),
    ("evaluation.judge.enabled", "false", "Input should be a valid boolean"),
    ("rollouts.0.enabled", 1, "Input should be a valid boolean"),
    ("rollouts.0.enabled", "true", "Input should be a valid boolean"),
]


@pytest.mark.parametrize(("field", "value", "message"), REJECTED, ids=lambda v: repr(v))
def test_rejected_values_are_located(tmp_path: Path, env: tuple[str, str], field: str, value: Any,
                                     message: str) -> None:
    path = write(tmp_path, with_value(pool_config([env[0]], tmp_path / "l"), field, value))
    code, out, err = run(["--config", str(path)])
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"error: {path}: {json_path(field)}: {message}"]


NAME_MESSAGE = "String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'"


@pytest.mark.parametrize("name", ["../../x\u0000", "a/b", "a\\b", ".hidden", "with space", "tab\tname",
                                  "", "x" * 129, 7, True])
def test_batch_name_must_be_path_safe(tmp_path: Path, env: tuple[str, str], name: Any) -> None:
    path = write(tmp_path, pool_config([env[0]], tmp_path / "l", name=name))
    code, _, err = run(["--config", str(path)])
    assert code == 2
    expected = NAME_MESSAGE if isinstance(name, str) else "Input should be a valid string"
    assert err.splitlines() == [f"error: {path}: $.name: {expected}"]


def test_every_problem_is_one_line_in_file_order(tmp_path: Path, env: tuple[str, str]) -> None:
    config = pool_config([env[0]], tmp_path / "l", name="../../x\u0000", max_concurrency="2",
                         expected_rollouts=True, budgets={"max_turns": 1e30})
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    assert err.splitlines() == [
        f"error: {path}: $.name: {NAME_MESSAGE}",
        f"error: {path}: $.expected_rollouts: Input should be a valid integer",
        f"error: {path}: $.max_concurrency: Input should be a valid integer",
        f"error: {path}: $.budgets.max_turns: Input should be a valid integer",
    ]


ACCEPTED = [
    ("max_concurrency", 10_000),
    ("max_concurrency", 1),
    ("expected_rollouts", 1_000_000),
    ("budgets.max_turns", 100_000),
    ("budgets.max_actions", 10_000_000),
    ("budgets.max_consecutive_invalid_turns", 10_000),
    ("budgets.max_duration_s", DAYS_30),
    ("budgets.max_duration_s", 0.5),
    ("budgets.max_cost_usd", 1_000_000),
    ("budgets.max_cost_usd", 0.01),
    ("evaluation.enabled", False),
    ("rollouts.0.enabled", True),
    ("name", "A-batch_1.v2"),
    ("name", "x" * 128),
]


@pytest.mark.parametrize(("field", "value"), ACCEPTED, ids=lambda v: repr(v)[:40])
def test_accepted_boundaries(tmp_path: Path, field: str, value: Any) -> None:
    config = with_value(pool_config(["http://127.0.0.1:9"], tmp_path / "l"), field, value)
    loaded = load_config(write(tmp_path, config))
    node: Any = loaded.config
    for part in field.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    if field == "budgets.max_cost_usd":
        assert isinstance(node, Decimal) and node == Decimal(str(value))
    else:
        assert node == value


def test_float_fields_accept_json_integers(tmp_path: Path) -> None:
    config = pool_config(["http://127.0.0.1:9"], tmp_path / "l", budgets={"max_duration_s": 60, "max_cost_usd": 2})
    budgets = load_config(write(tmp_path, config)).config.budgets
    assert budgets.max_duration_s == 60.0 and isinstance(budgets.max_duration_s, float)
    assert budgets.max_cost_usd == Decimal(2)


def test_caps_from_environment_and_flags_beyond_bounds_are_located() -> None:
    with pytest.raises(ConfigError) as info:
        effective_budgets(BudgetConfig(), environ={"AUTOCAD_BENCH_MAX_COST_USD": "1e30"}, max_turns=10**9)
    assert [str(p) for p in info.value.problems] == [
        "environment AUTOCAD_BENCH_MAX_COST_USD: Input should be less than or equal to 1000000",
        "--max-turns: Input should be less than or equal to 100000",
    ]
    within = effective_budgets(BudgetConfig(), environ={"AUTOCAD_BENCH_MAX_DURATION_S": "3600"}, max_cost_usd=2.5)
    assert within.max_duration_s == 3600.0 and within.max_cost_usd == Decimal("2.5")


def test_unknown_provider_is_reported_before_the_suite_mismatch(tmp_path: Path, env: tuple[str, str]) -> None:
    (tmp_path / "suite.json").write_text('{"name": "s", "tasks": ["t1", "t2"]}')
    config = pool_config([env[0]], tmp_path / "l", task_suite="suite.json")
    config["rollouts"][0]["provider"] = "acme-llm"
    path = write(tmp_path, config)
    code, _, err = run(["--config", str(path)])
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith(f"error: {path}: $.rollouts[0].provider: unknown provider 'acme-llm' (installed: ")
    assert "scripted" in lines[0] and lines[0].endswith(")")
    assert len(lines) == 3
    assert all("task suite 'suite.json'" in line for line in lines[1:])

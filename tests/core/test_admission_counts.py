"""Every admission count rule in both directions (issue 23), through the CLI's plan mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from autocad_bench.cli.batch import batch_command
from tests.core.batch_configs import SCRIPT, pool_config, write

HINT = "(pass --allow-partial only for a deliberately smaller experiment)"


@pytest.fixture
def url(health_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", health_server[1])
    for name in ("AUTOCAD_BENCH_MAX_COST_USD", "AUTOCAD_BENCH_MAX_DURATION_S", "OPENAI_API_KEY",
                 "AUTOCAD_BENCH_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return health_server[0]


def _rollout(n: int) -> dict[str, Any]:
    return {"rollout_id": f"r{n}", "task_id": f"t{n}", "provider": "scripted", "model": "replay",
            "provider_options": {"script": str(SCRIPT)}}


def plan(tmp_path: Path, url: str, *flags: str, rollouts: int | list[dict[str, Any]] = 2,
         **overrides: Any) -> tuple[int, Any, str]:
    config = pool_config([url, url], tmp_path / "leases", **overrides)
    config["rollouts"] = [_rollout(n) for n in range(1, rollouts + 1)] if isinstance(rollouts, int) else rollouts
    path = write(tmp_path, config)
    result = CliRunner().invoke(batch_command, ["--config", str(path), *flags])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = json.loads(result.stdout) if result.exit_code in (0, 1) and result.stdout.strip() else None
    return result.exit_code, out, result.stderr.replace(f"{path}: ", "")


def _count_check(report: Any) -> Any:
    (check,) = [c for c in report["checks"] if c["name"] == "expected_rollouts"]
    return check


def test_exactly_the_expected_count_is_admitted(tmp_path: Path, url: str) -> None:
    code, report, err = plan(tmp_path, url, rollouts=2, expected_rollouts=2)
    assert code == 0, err
    assert report["expected_rollouts"] == 2 and report["enabled_rollouts"] == 2 and not report["allow_partial"]
    check = _count_check(report)
    assert check["step"] == 3 and check["passed"] and check["reason"] == "2 enabled rollouts, as expected"
    assert check["details"] == {"enabled": 2, "expected": 2, "trials": 1, "allow_partial": False}


def test_fewer_enabled_than_expected_is_refused(tmp_path: Path, url: str) -> None:
    code, _, err = plan(tmp_path, url, rollouts=2, expected_rollouts=3)
    assert code == 2
    assert err.strip() == f"error: $.expected_rollouts: expects 3 enabled rollouts but the config enables 2 {HINT}"


def test_more_enabled_than_expected_is_refused_even_with_allow_partial(tmp_path: Path, url: str) -> None:
    """--allow-partial admits a deliberately smaller batch, never a larger one."""
    for flags in ((), ("--allow-partial",)):
        code, _, err = plan(tmp_path, url, *flags, rollouts=3, expected_rollouts=2)
        assert code == 2, flags
        assert err.strip() == ("error: $.expected_rollouts: expects 2 enabled rollouts but the config enables 3: "
                               "more than expected is never allowed (raise expected_rollouts)"), flags


def test_allow_partial_admits_fewer_and_says_so(tmp_path: Path, url: str) -> None:
    code, report, err = plan(tmp_path, url, "--allow-partial", rollouts=1, expected_rollouts=3)
    assert code == 0, err
    assert report["allow_partial"] is True and report["enabled_rollouts"] == 1
    check = _count_check(report)
    assert check["reason"] == "1 of 3 expected rollouts enabled (--allow-partial)"
    assert check["details"] == {"enabled": 1, "expected": 3, "trials": 1, "allow_partial": True}


def test_allow_partial_with_the_exact_count_reads_as_expected(tmp_path: Path, url: str) -> None:
    code, report, _ = plan(tmp_path, url, "--allow-partial", rollouts=2, expected_rollouts=2)
    assert code == 0
    assert _count_check(report)["reason"] == "2 enabled rollouts, as expected"


def test_disabled_rollouts_count_in_neither_direction(tmp_path: Path, url: str) -> None:
    rollouts = [_rollout(1), _rollout(2), {**_rollout(3), "enabled": False}]
    code, report, err = plan(tmp_path, url, rollouts=rollouts, expected_rollouts=2)
    assert code == 0, err
    assert report["enabled_rollouts"] == 2
    assert [a["enabled"] for a in report["assignments"]] == [True, True, False]
    code, _, err = plan(tmp_path, url, rollouts=rollouts, expected_rollouts=3)
    assert code == 2 and "expects 3 enabled rollouts but the config enables 2" in err


def test_no_enabled_rollout_is_refused_even_with_allow_partial(tmp_path: Path, url: str) -> None:
    rollouts = [{**_rollout(1), "enabled": False}]
    for flags in ((), ("--allow-partial",)):
        code, _, err = plan(tmp_path, url, *flags, rollouts=rollouts, expected_rollouts=1)
        assert code == 2
        assert "error: $.rollouts: no rollout is enabled" in err


def test_trials_multiply_the_count(tmp_path: Path, url: str) -> None:
    code, report, err = plan(tmp_path, url, rollouts=2, expected_rollouts=6, trials=3)
    assert code == 0, err
    assert report["enabled_rollouts"] == 6 and report["trials"] == 3
    check = _count_check(report)
    assert check["reason"] == "6 enabled rollouts (2 assignments × 3 trials = 6), as expected"  # noqa: RUF001
    assert check["details"]["trials"] == 3
    code, _, err = plan(tmp_path, url, rollouts=2, expected_rollouts=2, trials=3)
    assert code == 2
    assert err.strip() == (
        "error: $.expected_rollouts: expects 2 enabled rollouts but the config enables "
        "2 assignments × 3 trials = 6: more than expected is never allowed (raise expected_rollouts)"  # noqa: RUF001
    )


def test_allow_partial_with_trials_names_the_product(tmp_path: Path, url: str) -> None:
    code, report, _ = plan(tmp_path, url, "--allow-partial", rollouts=1, expected_rollouts=6, trials=2)
    assert code == 0
    assert _count_check(report)["reason"] == (
        "2 of 6 expected rollouts enabled (1 assignments × 2 trials = 2) (--allow-partial)"  # noqa: RUF001
    )


def test_the_admitted_wave_is_bounded_by_enabled_rollouts_and_concurrency(tmp_path: Path, url: str) -> None:
    code, report, _ = plan(tmp_path, url, rollouts=1, expected_rollouts=1, max_concurrency=2)
    assert code == 0 and report["admitted_wave"] == 1 and report["max_concurrency"] == 2
    code, report, _ = plan(tmp_path, url, rollouts=2, expected_rollouts=2, max_concurrency=1)
    assert code == 0 and report["admitted_wave"] == 1
    code, report, _ = plan(tmp_path, url, rollouts=2, expected_rollouts=2, max_concurrency=2)
    assert code == 0 and report["admitted_wave"] == 2


def test_unique_assignments_reason_counts_the_rollouts(tmp_path: Path, url: str) -> None:
    code, report, _ = plan(tmp_path, url, rollouts=3, expected_rollouts=3)
    assert code == 0
    (check,) = [c for c in report["checks"] if c["name"] == "unique_assignments"]
    assert check["reason"] == "3 unique rollout ids and assignments" and check["step"] == 2


def test_duplicate_ids_and_assignments_are_each_located(tmp_path: Path, url: str) -> None:
    rollouts = [_rollout(1), _rollout(2), {**_rollout(1)}, {**_rollout(2), "rollout_id": "r9"}]
    code, _, err = plan(tmp_path, url, rollouts=rollouts, expected_rollouts=4)
    assert code == 2
    lines = err.strip().splitlines()
    assert "error: $.rollouts[2].rollout_id: duplicate rollout id 'r1' (first at $.rollouts[0])" in lines
    rollouts = [_rollout(1), {**_rollout(2), "task_id": "t1", "provider": "scripted", "model": "replay"}]
    code, _, err = plan(tmp_path, url, rollouts=rollouts, expected_rollouts=2)
    assert code == 2
    (line,) = [x for x in err.strip().splitlines() if "duplicate assignment" in x]
    assert line.startswith("error: $.rollouts[1]: duplicate assignment task 't1' / provider 'scripted' / "
                           "model 'replay' / tool mode '")
    assert line.endswith("' (first at $.rollouts[0])")
    mode = line.split("tool mode '")[1].split("'")[0]
    assert mode not in ("t1", "scripted", "replay")


def test_the_product_is_named_whenever_trials_exceed_one(tmp_path: Path, url: str) -> None:
    code, report, err = plan(tmp_path, url, rollouts=5, expected_rollouts=10, trials=2)
    assert code == 0, err
    assert _count_check(report)["reason"] == (
        "10 enabled rollouts (5 assignments × 2 trials = 10), as expected"  # noqa: RUF001
    )


def test_a_task_suite_is_named_with_its_trials(tmp_path: Path, url: str) -> None:
    (tmp_path / "suite.json").write_text(json.dumps({"name": "s", "tasks": ["t1", "t2"]}))
    code, report, err = plan(tmp_path, url, rollouts=2, expected_rollouts=2, task_suite="suite.json")
    assert code == 0, err
    assert _count_check(report)["reason"] == (
        "2 enabled rollouts, as expected; every model runs task suite 'suite.json' in order")
    code, report, err = plan(tmp_path, url, rollouts=2, expected_rollouts=4, task_suite="suite.json", trials=2)
    assert code == 0, err
    assert _count_check(report)["reason"] == (
        "4 enabled rollouts (2 assignments × 2 trials = 4), as expected; every model runs task suite "  # noqa: RUF001
        "'suite.json' in order in each of 2 trials")


def test_counts_beyond_the_small_integer_cache_compare_by_value(tmp_path: Path, url: str) -> None:
    # 3 assignments x 87 trials = 261 rollouts: ints above 256 are distinct objects in CPython.
    code, report, err = plan(tmp_path, url, rollouts=3, expected_rollouts=261, trials=87, max_concurrency=2)
    assert code == 0, err
    assert report["enabled_rollouts"] == 261
    assert _count_check(report)["reason"].startswith("261 enabled rollouts (3 assignments")
    assert _count_check(report)["reason"].endswith(", as expected")

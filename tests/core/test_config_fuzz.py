"""Any JSON document is either a valid configuration or readable, located errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocad_bench.cli.batch import batch_command
from autocad_bench.config import BatchConfig, parse_config_text
from autocad_bench.errors import ConfigError
from tests.core.batch_configs import pool_config

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

LOCATION = re.compile(r"^cfg\.json(:\d+:\d+)?(: \$.*)?$")


def _mutations() -> st.SearchStrategy[dict]:
    base = pool_config(["http://127.0.0.1:9"], Path("/nonexistent"))
    keys = st.sampled_from(["expected_rollouts", "max_concurrency", "execution_mode", "infrastructure",
                            "evaluation", "budgets", "rollouts", "task_suite", "pricing", "name", "extra"])

    @st.composite
    def mutate(draw: st.DrawFn) -> dict:
        config = json.loads(json.dumps(base))
        for _ in range(draw(st.integers(1, 3))):
            key = draw(keys)
            if draw(st.booleans()) and key in config:
                del config[key]
            else:
                config[key] = draw(json_values)
        return config

    return mutate()


def _check(text: str) -> None:
    try:
        config = parse_config_text(text, "cfg.json")
    except ConfigError as error:
        assert error.problems
        for problem in error.problems:
            assert LOCATION.match(problem.location) and "\n" not in problem.location, problem.location
            assert problem.message and "\n" not in problem.message
        return
    assert isinstance(config, BatchConfig)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_value(value: object) -> None:
    _check(json.dumps(value))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_mutated_valid_configs(config: dict) -> None:
    _check(json.dumps(config))


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_arbitrary_text(text: str) -> None:
    _check(text)


def test_duplicate_keys_and_constants_are_errors() -> None:
    for text, message in [('{"a": 1, "a": 2}', "cfg.json: duplicate key 'a' in a JSON object"),
                          ('{"a": NaN}', "cfg.json: invalid JSON: NaN is not valid JSON"),
                          ("[1]", "cfg.json: $: the configuration must be a JSON object"),
                          ('{"a": ', "cfg.json:1:7: invalid JSON: Expecting value")]:
        try:
            parse_config_text(text, "cfg.json")
        except ConfigError as error:
            assert str(error) == message
        else:
            raise AssertionError(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_mutations())
def test_cli_never_prints_a_traceback(tmp_path: Path, config: dict) -> None:
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(config))
    result = CliRunner().invoke(batch_command, ["--config", str(path), "--skip-direct-model-check"],
                                env={"EXAMPLE_POOL_TOKEN": "x"})
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert all(line.startswith("error: ") for line in result.stderr.splitlines())

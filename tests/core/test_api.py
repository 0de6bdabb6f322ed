"""The public embedding API: plan and run a batch in-process, typed results, located errors."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import autocad_bench
from autocad_bench import BatchNotAdmitted, ConfigError, UserError, plan_batch, run_batch
from autocad_bench.config import BatchConfig

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "local-librecad.json"


def example(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text())
    data.update(overrides)
    return data


def test_the_api_is_exported_from_the_package() -> None:
    assert {"plan_batch", "run_batch", "BatchOutcome", "BatchNotAdmitted"} <= set(autocad_bench.__all__)


@pytest.mark.parametrize("form", ["path", "str", "mapping", "model"])
def test_plan_accepts_a_file_a_mapping_or_a_model(form: str, tmp_path: Path) -> None:
    source: Any = {"path": EXAMPLE, "str": str(EXAMPLE), "mapping": example(),
                   "model": BatchConfig.model_validate(example())}[form]
    report = plan_batch(source, base_dir=tmp_path, environ={})
    assert report.passed, [c for c in report.checks if not c.passed]
    assert report.enabled_rollouts == 3 and report.infrastructure_backend == "local-xvfb"


def test_relative_paths_in_a_mapping_resolve_against_base_dir(tmp_path: Path) -> None:
    data = example(task_suite="suite.json", tasks_dir="tasks")
    with pytest.raises(ConfigError) as caught:
        plan_batch(data, base_dir=tmp_path, environ={})
    assert any(str(tmp_path / "suite.json") in p.message for p in caught.value.problems)


def test_a_configuration_mistake_is_a_located_config_error() -> None:
    data = example()
    data["rollouts"][0]["provider"] = 7
    with pytest.raises(ConfigError) as caught:
        plan_batch(data, environ={})
    assert [p.location for p in caught.value.problems] == ["<configuration>: $.rollouts[0].provider"]


def test_run_refuses_an_existing_directory_and_a_failed_check_before_creating_anything(tmp_path: Path) -> None:
    existing = tmp_path / "there"
    existing.mkdir()
    with pytest.raises(UserError, match="already exists"):
        run_batch(example(), existing, environ={})
    assert list(existing.iterdir()) == []
    refused = example(evaluation={"evaluator_version": "1999.1.1"})
    with pytest.raises(BatchNotAdmitted) as caught:
        run_batch(refused, tmp_path / "out", environ={})
    assert caught.value.exit_code == 1 and not caught.value.report.passed
    assert any("admission.gold_cache" in p.location for p in caught.value.problems)
    assert not (tmp_path / "out").exists()


@pytest.mark.integration
def test_run_batch_scores_the_example_on_real_desktops_from_a_worker_thread(tmp_path: Path) -> None:
    """An application calls run_batch off the main thread: it runs, leaves signals alone and
    returns typed results with the scores and the summary's conditions."""
    outcomes: list[autocad_bench.BatchOutcome] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            outcomes.append(run_batch(EXAMPLE, tmp_path / "out", environ={"PATH": "/usr/bin:/bin"}))
        except BaseException as error:  # re-raised in the test thread
            errors.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(600)
    assert not errors, errors
    [outcome] = outcomes
    assert outcome.completed and outcome.exit_code == 0
    assert [(r.task_id, r.status) for r in outcome.results] == [
        ("prim-rectangle", "completed"), ("prim-circle-concentric", "completed"),
        ("part-plate-four-holes", "completed")]
    assert outcome.scores == {r.rollout_id: 1.0 for r in outcome.results}
    assert outcome.summary["conditions"]["suite"] == "smoke"
    assert (outcome.output_dir / "summary.json").is_file()

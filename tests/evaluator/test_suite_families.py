"""Task families: seeded generation is reproducible, fresh, recorded and refuses bad requests.

The per-instance static proof (gold 1.0, template 0, perturbation strictly between) runs over
every default instance in ``test_suite_static.py``; this module checks the generator itself
and ``autocad-bench tasks generate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autocad_bench_evaluator.gold_cache import check_gold_cache
from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec
from autocad_bench_evaluator.suite import registry
from autocad_bench_evaluator.suite.build import task_files
from autocad_bench_evaluator.suite.families import DEFAULT_SEED, families, family, generate
from autocad_bench_evaluator.suite.families.base import split_of
from autocad_bench_evaluator.suite.librecad import check_jsonl
from autocad_bench_evaluator.tasks_cli import tasks_group
from autocad_bench_evaluator.version import EVALUATOR_VERSION
from click.testing import CliRunner

from autocad_bench.admission.suites import resolve_task_suite
from autocad_bench.config import load_config
from autocad_bench.tasks import load_task

GENERATIVE = [f.family_id for f in families() if f.generative]


def test_every_skill_has_generative_families_except_solid() -> None:
    skills = {f.skill for f in families() if f.generative}
    assert skills == {"draft", "edit", "reproduce", "annotate"}
    assert all(not f.generative and f.fixed and f.apps == ("autocad",) for f in families() if f.skill == "solid")


@pytest.mark.parametrize("family_id", GENERATIVE)
def test_same_seed_same_bytes_other_seed_other_instance(family_id: str) -> None:
    fam = family(family_id)
    first = task_files(fam.instance(11, 0))
    again = task_files(fam.instance(11, 0))
    assert first == again
    other = fam.instance(12, 0)
    assert other.task_id != fam.instance(11, 0).task_id
    assert registry.definition_gold_bytes(other) != registry.definition_gold_bytes(fam.instance(11, 0)) or (
        # a tiny parameter space may repeat a drawing; the prompt then still names the instance
        other.prompt == fam.instance(11, 0).prompt
    )


def test_seeds_give_mostly_distinct_instances() -> None:
    """Fresh seeds are fresh: across 8 seeds, nearly every family draws 8 different golds."""
    repeats = 0
    for family_id in GENERATIVE:
        fam = family(family_id)
        golds = {registry.definition_gold_bytes(fam.instance(seed, 0)) for seed in range(100, 108)}
        repeats += 8 - len(golds)
    assert repeats <= len(GENERATIVE)  # at most one repeat per family on average


def test_generated_instances_carry_their_provenance() -> None:
    task = family("edit-move").instance(5, 3)
    assert task.task_id == "edit-move-s5-03"
    assert (task.skill, task.family, task.family_version, task.seed) == ("edit", "edit-move", 1, 5)
    assert task.split == split_of(task.task_id)
    spec = json.loads(task_files(task)["task.json"])
    assert spec["family"] == "edit-move" and spec["seed"] == 5 and spec["family_version"] == 1
    assert spec["difficulty"] == task.difficulty


def test_fixed_instances_keep_their_ids_and_gold() -> None:
    fixed = {t.task_id: f.family_id for f in families() for t in f.fixed}
    assert len(fixed) == 27
    assert registry.resolve_suite("original") == [t for t in registry.list_tasks() if t in fixed]
    for task_id, family_id in fixed.items():
        found = registry.definition(task_id)
        assert found.family == family_id and found.seed is None and found.split == "dev"


def test_edit_scoring_rescales_from_the_template(tmp_path: Path) -> None:
    """Doing nothing scores 0, the gold 1, and redrawing the result on top of the untouched
    original (the lazy edit) fails."""
    task = family("edit-move").instance(DEFAULT_SEED, 0)
    spec = task.scoring_spec()
    assert 0.0 < spec.baseline < 1.0

    def metadata(doc: object, name: str) -> DrawingMetadata:
        from autocad_bench_evaluator.suite.drawing import document_bytes

        path = tmp_path / f"{name}.dxf"
        path.write_bytes(document_bytes(doc))  # type: ignore[arg-type]
        read = read_drawing(path, spec.schema_version)
        assert isinstance(read, DrawingMetadata)
        return read

    gold = metadata(registry.gold_document(task), "gold")
    template = registry.template_document(task)
    noop = metadata(template, "noop")
    lazy = registry.template_document(task)
    task.gold(lazy)  # the whole result drawn again over the original
    assert score_drawing(gold, gold, spec, "t").score == 1.0
    assert score_drawing(gold, noop, spec, "t").score == 0.0
    report = score_drawing(gold, metadata(lazy, "lazy"), spec, "t")
    assert not report.passed and report.score < 0.9
    without = ScoringSpec.model_validate({**spec.model_dump(), "baseline": 0.0})
    assert score_drawing(gold, noop, without, "t").score > 0.3  # what the rescaling takes away


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(tasks_group, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_generate_writes_a_runnable_set(tmp_path: Path) -> None:
    out = tmp_path / "set"
    code, stdout, stderr = _run(
        "generate",
        "--seed",
        "31",
        "--families",
        "draft-flange,edit-erase-small,annotate-text",
        "--count",
        "2",
        "--out",
        str(out),
    )
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["seed"] == 31 and summary["instances"] == 6
    assert summary["families"] == {"annotate-text": 1, "draft-flange": 1, "edit-erase-small": 1}
    ids = json.loads((out / "suite.json").read_text())["tasks"]
    assert ids == [f"{f}-s31-{i:02d}" for f in ("draft-flange", "edit-erase-small", "annotate-text") for i in (0, 1)]
    assert resolve_task_suite(str(out / "suite.json"), out, "$.task_suite") == ids
    for task_id in ids:
        task = load_task(out / "tasks", task_id)
        assert task.spec.seed == 31 and task.spec.family is not None
        assert check_jsonl((out / "tasks" / task_id / "solution.librecad.jsonl").read_text()) == []
    assert check_gold_cache(out / "gold-cache", EVALUATOR_VERSION, ids) == []
    generation = json.loads((out / "generation.json").read_text())
    assert generation["evaluator_version"] == EVALUATOR_VERSION
    config = load_config(out / "batch.json")
    assert [r.task_id for r in config.config.rollouts] == ids
    assert config.tasks_dir == (out / "tasks").resolve() and config.gold_cache == (out / "gold-cache").resolve()
    again = tmp_path / "again"
    assert (
        _run(
            "generate",
            "--seed",
            "31",
            "--families",
            "draft-flange,edit-erase-small,annotate-text",
            "--count",
            "2",
            "--out",
            str(again),
        )[0]
        == 0
    )
    for task_id in ids:
        for name in ("task.json", "template.dxf", "scoring.json", "reference.png", "solution.librecad.jsonl"):
            assert (out / "tasks" / task_id / name).read_bytes() == (again / "tasks" / task_id / name).read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--families", "no-such-family"], "unknown family 'no-such-family'"),
        (["--families", "solid-extrude"], "only fixed instances"),
        (["--families", ""], None),
    ],
)
def test_generate_refuses_bad_requests(tmp_path: Path, args: list[str], message: str | None) -> None:
    out = tmp_path / "set"
    code, _, stderr = _run("generate", "--seed", "1", "--count", "1", *args, "--out", str(out))
    if message is None:  # an empty list means every generative family
        assert code == 0
        return
    assert code == 2 and message in stderr and "Traceback" not in stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing half-written


def test_generate_refuses_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _, stderr = _run("generate", "--seed", "1", "--count", "1", "--out", str(tmp_path))
    assert code == 2 and "already exists" in stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_generate_matches_the_library(tmp_path: Path) -> None:
    found = generate(3, ["draft-rectangle"], 2)
    assert [t.task_id for t in found] == ["draft-rectangle-s3-00", "draft-rectangle-s3-01"]
    with pytest.raises(KeyError):
        generate(3, ["nope"], 1)

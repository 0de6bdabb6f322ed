"""The task suite without a desktop: every folder is complete, valid and up to date.

Checks each task folder (task.json, scoring.json against ScoringSpec, reference.png, template),
every reference solution line against core's ``validate_batch`` on a 1920x1080 display, that
gold drawings regenerate byte-identically, that named suites resolve, that the committed
folders match what ``autocad_bench_evaluator.suite.build`` writes, and that the gold drawing
is inside LibreCAD's initial view of the template (what the model sees first).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import ezdxf
import pytest
from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec
from autocad_bench_evaluator.suite import build, registry
from autocad_bench_evaluator.suite.definitions import SKILLS, TIERS
from autocad_bench_evaluator.suite.drawing import document_bytes
from autocad_bench_evaluator.suite.families import families
from autocad_bench_evaluator.suite.librecad import check_jsonl
from PIL import Image

from autocad_bench.actions import ValidatedBatch, validate_batch
from autocad_bench.admission.suites import resolve_task_suite
from autocad_bench.providers.models import DisplaySize
from autocad_bench.tasks import PNG_SIGNATURE, load_task

DISPLAY = DisplaySize(width=1920, height=1080)
ALL = registry.list_tasks()
LIBRECAD = registry.list_tasks(app="librecad")


def _gold(task_id: str, tmp_path: Path) -> DrawingMetadata:
    spec = registry.load(task_id).scoring
    result = read_drawing(registry.generate_gold(task_id, tmp_path), spec.schema_version)
    assert isinstance(result, DrawingMetadata), result
    return result


def test_suite_size_skills_and_tiers() -> None:
    assert len(ALL) >= 300
    assert len(set(ALL)) == len(ALL)
    assert len(families()) >= 40
    assert len({registry.definition(t).family for t in ALL}) == len(families())
    assert len(LIBRECAD) >= 250
    for skill in SKILLS:
        in_skill = {f.family_id for f in families() if f.skill == skill}
        assert len(in_skill) >= 4, skill
        assert len(registry.list_tasks(tier=skill)) >= 4, skill
    for tier in TIERS:  # the original tiers keep their tasks (old results stay comparable)
        assert len(registry.list_tasks(tier=tier)) >= 4, tier
    assert len(registry.resolve_suite("original")) == 27
    assert set(registry.list_tasks(app="autocad")) == set(ALL)
    levels = {registry.definition(t).difficulty for t in ALL}
    assert levels == {"easy", "medium", "hard"}
    dev = registry.resolve_suite("dev")
    assert 0.15 <= len(dev) / len(ALL) <= 0.35
    assert set(dev).isdisjoint(registry.resolve_suite("test"))
    assert sorted(dev + registry.resolve_suite("test")) == sorted(ALL)


def test_task_folders_are_exactly_the_defined_tasks() -> None:
    folders = sorted(d.name for d in registry.TASKS_DIR.iterdir() if d.is_dir())
    assert folders == sorted(ALL)


@pytest.mark.parametrize("task_id", ALL)
def test_task_folder_is_a_valid_core_task(task_id: str) -> None:
    task = load_task(registry.TASKS_DIR, task_id)  # the harness's own checks
    spec = task.spec
    assert spec.units == "millimeters"
    definition = registry.definition(task_id)
    assert spec.tier in (*TIERS, *SKILLS)
    assert (spec.skill, spec.family, spec.family_version, spec.seed, spec.split, spec.difficulty) == (
        definition.skill,
        definition.family,
        definition.family_version,
        definition.seed,
        definition.split,
        definition.difficulty,
    )
    assert set(spec.apps) <= {"librecad", "autocad"} and spec.apps
    assert spec.prompt.endswith("finish with the done action.")
    raw = json.loads((task.directory / "task.json").read_text())
    assert raw == spec.model_dump(mode="json")
    with Image.open(task.reference_path) as image:
        assert image.format == "PNG" and image.size[0] >= 800 and image.size[1] >= 600
    assert task.reference_path.read_bytes().startswith(PNG_SIGNATURE)
    template = ezdxf.readfile(task.template_path)
    assert template.header["$INSUNITS"] == 4  # millimetres
    # the no-op attempt must score 0: an empty template, or an edit task's drawing whose own
    # score is the spec's baseline
    assert (len(template.modelspace()) > 0) == (definition.skill == "edit")


@pytest.mark.parametrize("task_id", ALL)
def test_scoring_spec_validates(task_id: str) -> None:
    path = registry.TASKS_DIR / task_id / "scoring.json"
    spec = ScoringSpec.model_validate_json(path.read_bytes())
    assert spec.task_id == task_id
    assert registry.load(task_id).scoring == spec
    definition = registry.definition(task_id)
    assert spec.scores_3d_extents == (definition.tier == "3d")
    assert spec.schema_version == (4 if definition.tier == "3d" else 3)


@pytest.mark.parametrize("task_id", LIBRECAD)
def test_librecad_solutions_pass_batch_validation(task_id: str) -> None:
    task = registry.load(task_id)
    oracle, perturbed = task.solution_path("librecad"), task.perturbed_path
    assert oracle is not None and perturbed is not None
    texts = [oracle.read_text(), perturbed.read_text()]
    assert texts[0] != texts[1]
    for text in texts:
        assert check_jsonl(text) == []
        lines = [json.loads(line) for line in text.splitlines()]
        for number, raw in enumerate(lines):
            result = validate_batch(raw, DISPLAY, remaining_actions=5000)
            assert isinstance(result, ValidatedBatch), result
            assert result.ends_with_done == (number == len(lines) - 1)


@pytest.mark.parametrize("task_id", ALL)
def test_autocad_script_is_present(task_id: str) -> None:
    task = registry.load(task_id)
    path = task.solution_path("autocad")
    assert path is not None
    text = path.read_text()
    assert "UNTESTED" in text.splitlines()[1]
    assert any(line.startswith(("_.", "-")) for line in text.splitlines())
    if "librecad" not in task.spec.apps:
        assert task.solution_path("librecad") is None and task.perturbed_path is None


@pytest.mark.parametrize("task_id", ALL)
def test_gold_regeneration_is_deterministic(task_id: str, tmp_path: Path) -> None:
    first = document_bytes(registry.gold_document(task_id))
    assert document_bytes(registry.gold_document(task_id)) == first
    assert registry.gold_bytes(task_id) == first
    path = registry.generate_gold(task_id, tmp_path / "a")
    assert path.name == "gold.dxf" and path.read_bytes() == first
    assert registry.generate_gold(task_id, tmp_path / "b").read_bytes() == first
    assert (
        document_bytes(registry.template_document(task_id))
        == (registry.TASKS_DIR / task_id / "template.dxf").read_bytes()
    )


@pytest.mark.parametrize("task_id", ALL)
def test_gold_scores_one_and_the_template_zero(task_id: str, tmp_path: Path) -> None:
    task = registry.load(task_id)
    gold = _gold(task_id, tmp_path)
    template = read_drawing(task.template_path, task.scoring.schema_version)
    assert isinstance(template, DrawingMetadata)
    perfect = score_drawing(gold, gold, task.scoring, "test")
    assert perfect.score == 1.0 and perfect.passed
    empty = score_drawing(gold, template, task.scoring, "test")
    assert empty.score == 0.0 and not empty.passed
    definition = registry.definition(task_id)
    if definition.perturbed_gold is not None:  # the generated perturbation lands strictly between
        doc = registry.template_document(task_id)
        doc.modelspace().delete_all_entities()
        definition.perturbed_gold(doc)
        path = tmp_path / "perturbed.dxf"
        path.write_bytes(document_bytes(doc))
        wrong = read_drawing(path, task.scoring.schema_version)
        assert isinstance(wrong, DrawingMetadata)
        report = score_drawing(gold, wrong, task.scoring, "test")
        assert 0.0 < report.score < 1.0 and not report.passed, (definition.perturbation, report.score)


@pytest.mark.parametrize("task_id", LIBRECAD)
def test_gold_is_inside_librecads_initial_view(task_id: str, tmp_path: Path) -> None:
    gold = _gold(task_id, tmp_path)
    assert gold.extents is not None
    (lo_x, lo_y), (hi_x, hi_y) = registry.definition(task_id).view.librecad_visible()
    margin = 5.0
    assert gold.extents.min[0] >= lo_x + margin and gold.extents.min[1] >= lo_y + margin
    assert gold.extents.max[0] <= hi_x - margin and gold.extents.max[1] <= hi_y - margin


def test_named_suites_resolve(tmp_path: Path) -> None:
    named = registry.suites()
    assert {"smoke", "librecad-2d", "autocad-full"} <= set(named)
    assert registry.resolve_suite("librecad-2d") == LIBRECAD
    assert registry.resolve_suite("autocad-full") == ALL
    assert len(registry.resolve_suite("smoke")) == 3
    assert set(registry.resolve_suite("smoke")) <= set(LIBRECAD)
    for name, tasks in named.items():
        assert tasks == registry.resolve_suite(name)
        committed = registry.SUITE_FILES_DIR / f"{name}.json"
        assert resolve_task_suite(str(committed), tmp_path, "$.task_suite") == tasks
        written = registry.write_suite_file(name, tmp_path / f"{name}.json")
        assert written.read_text() == committed.read_text()
    with pytest.raises(registry.SuiteError):
        registry.resolve_suite("no-such-suite")
    with pytest.raises(registry.SuiteError):
        registry.load("no-such-task")


def test_committed_folders_match_the_build() -> None:
    assert build.differences(build.all_files()) == [], "run: uv run python -m autocad_bench_evaluator.suite.build"


def test_gold_bytes_do_not_depend_on_the_process(tmp_path: Path) -> None:
    """Other hash seeds and another generation order give the same bytes (no set-order leaks)."""
    script = (
        "import hashlib, sys\n"
        "from autocad_bench_evaluator.suite import registry\n"
        "for task_id in reversed(registry.list_tasks()):\n"
        "    print(task_id, hashlib.sha256(registry.gold_bytes(task_id)).hexdigest())\n"
    )
    expected = {task_id: hashlib.sha256(document_bytes(registry.gold_document(task_id))).hexdigest() for task_id in ALL}
    for seed in ("4242",):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        output = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True)
        found = dict(line.split() for line in output.stdout.splitlines())
        assert found == expected


def test_gold_cache_entries_build_and_verify(tmp_path: Path) -> None:
    from autocad_bench_evaluator.gold_cache import check_gold_cache, load_entry

    task_ids = ["prim-rectangle", "anno-block-bolts", "solid-subtract-plate-hole"]
    entries = registry.build_gold_cache(tmp_path, "suite-test", task_ids)
    assert [entry.manifest.task_id for entry in entries] == task_ids
    assert check_gold_cache(tmp_path, "suite-test", task_ids) == []
    solid = load_entry(tmp_path, "suite-test", "solid-subtract-plate-hole")
    assert solid.manifest.schema_version == 4
    assert solid.metadata.physical_3d is not None and solid.metadata.physical_3d.status == "measured"
    extents = solid.metadata.physical_3d.extents
    assert extents is not None and extents.min == (0.0, 0.0, 0.0) and extents.max == (100.0, 60.0, 20.0)


def test_a_hover_move_straight_into_a_click_elsewhere_is_flagged() -> None:
    """Qt merges queued motion events: a hover not followed by a wait can vanish on a loaded machine."""
    hover = {"type": "move", "x": 820, "y": 500}
    click = {"type": "click", "x": 1750, "y": 932, "button": "left", "count": 1}
    pause = {"type": "wait", "seconds": 0.2}
    done = {"actions": [{"type": "done"}]}
    racy = json.dumps({"actions": [hover, hover, click]}) + "\n" + json.dumps(done)
    settled = json.dumps({"actions": [hover, hover, pause, click]}) + "\n" + json.dumps(done)
    assert check_jsonl(settled) == []
    assert check_jsonl(racy) == [
        "line 1, action 1: a move is followed by a click without a wait; LibreCAD may merge the hover with "
        "the next pointer move and never see it"
    ]

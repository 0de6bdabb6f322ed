"""What a task's prompt states is scored: wrong sizes, places, layer properties, text and hatches fail.

Two parts:

* regression tests for the holes an attack review found, on the committed attack drawings in
  ``tests/evaluator/attacks/`` (regenerate them with ``attacks/make_attacks.py``);
* a mutation walk over every task of the suite: each stated property of the gold is changed in
  turn (whole drawing scaled 1.01 and 0.99 about its centre, moved 1 mm on fixed tasks, a layer's
  colour or linetype, a text's height and rotation, a hatch's pattern, a hatch added over a bare
  closed profile, an entity moved to another layer, an entity dropped) and the score must fall
  at least 0.05 below the pass threshold. The mutations are built from the gold with ezdxf in
  memory, read back through the evaluator's reader and scored in-process.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec
from autocad_bench_evaluator.suite import registry
from ezdxf.document import Drawing

from autocad_bench.errors import ConfigError
from tests.evaluator.attacks.make_attacks import MANIFEST, add_noise, mutations, shift

ATTACKS_DIR = Path(__file__).resolve().parent / "attacks"
MARGIN = 0.05
"""Every mutation must score at most ``pass_threshold - MARGIN``: clearly failing, not by a hair."""
PER_KIND = 1
"""Variants per mutation kind and task in the walk (which text, layer or entity is chosen by a
generator seeded with the task id)."""
WALK_WORKERS = 4
"""Processes the walk runs on (at most the machine's CPUs)."""
INVARIANT_STRIDE = 4
"""The walk checks noise and free translation on every 4th task (the gold's own score on all);
:func:`test_gold_noise_and_free_translation_still_score_one` on every attacked task."""


@cache
def _spec(task_id: str) -> ScoringSpec:
    """The task's committed ``scoring.json``; the definition's spec while its folder is not built yet."""
    try:
        return registry.load(task_id).scoring
    except (ConfigError, registry.SuiteError, OSError):
        return registry.definition(task_id).scoring_spec()


def _read(path: Path, spec: ScoringSpec) -> DrawingMetadata:
    meta = read_drawing(path, spec.schema_version)
    assert isinstance(meta, DrawingMetadata), meta
    return meta


@cache
def _gold(task_id: str) -> DrawingMetadata:
    return _read(registry.generate_gold(task_id), _spec(task_id))


def _doc_metadata(doc: Drawing, spec: ScoringSpec, path: Path) -> DrawingMetadata:
    stream = io.StringIO()
    doc.write(stream)
    path.write_text(stream.getvalue(), encoding="utf-8")
    return _read(path, spec)


def _score(task_id: str, candidate: DrawingMetadata, spec: ScoringSpec | None = None) -> float:
    spec = spec or _spec(task_id)
    return score_drawing(_gold(task_id), candidate, spec, "test").score


# --- committed attacks -------------------------------------------------------------------------

ATTACKS: dict[str, dict[str, object]] = json.loads(MANIFEST.read_text())


def test_every_attack_drawing_is_committed() -> None:
    assert len(ATTACKS) >= 8
    for name in ATTACKS:
        assert (ATTACKS_DIR / name).is_file(), f"{name} missing: run tests/evaluator/attacks/make_attacks.py"


def _attack_score(name: str) -> tuple[float, bool, float]:
    task_id = str(ATTACKS[name]["task_id"])
    spec = _spec(task_id)
    report = score_drawing(_gold(task_id), _read(ATTACKS_DIR / name, spec), spec, "test")
    return report.score, report.passed, spec.pass_threshold


def _attacks_of(hole: int) -> list[str]:
    return sorted(name for name, attack in ATTACKS.items() if attack["hole"] == hole)


@pytest.mark.parametrize("name", _attacks_of(0))
def test_hole0_a_stand_in_for_a_solid_fails(name: str) -> None:
    """A MESH box with the gold's extents, or an open ACIS box (no volume), fails every solid task."""
    score, passed, threshold = _attack_score(name)
    assert not passed
    assert score <= threshold - MARGIN, (name, score)


@pytest.mark.parametrize("name", _attacks_of(1))
def test_hole1_a_drawing_off_in_size_or_place_fails(name: str) -> None:
    """Oversize 1.01x, undersize 0.99x or moved by 1 mm (fixed task): clearly failing."""
    score, passed, threshold = _attack_score(name)
    assert not passed
    assert score <= threshold - MARGIN, (name, score)


@pytest.mark.parametrize("name", _attacks_of(2))
def test_hole2_a_stated_property_done_wrong_fails(name: str) -> None:
    """Wrong layer colour, text height or rotation, hatch pattern, a hatch where none belongs."""
    score, passed, threshold = _attack_score(name)
    assert not passed
    assert score <= threshold - MARGIN, (name, score)


@pytest.mark.parametrize("task_id", sorted({str(a["task_id"]) for a in ATTACKS.values()}))
def test_gold_noise_and_free_translation_still_score_one(task_id: str) -> None:
    """The fixes cost nothing to a right drawing: the gold, the gold with 1e-6 of noise and (with
    position free) the gold moved anywhere score exactly 1.0."""
    walk = walk_task(task_id)
    assert walk.invariants == {"gold": 1.0, "noise 1e-6": 1.0, "moved far, position free": 1.0}


# --- mutation walk -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskWalk:
    """What the walk measured on one task: the invariants and one score per mutation."""

    task_id: str
    threshold: float
    invariants: dict[str, float]
    mutated: list[tuple[str, str, float]]  # kind, label, score


def walk_task(task_id: str, invariants_too: bool = True) -> TaskWalk:
    """Score the gold, every mutation :func:`mutations` finds for it and, with
    ``invariants_too``, the gold with 1e-6 noise and the gold moved far on a free copy of the spec
    (each variant written to a DXF file and read back)."""
    spec = _spec(task_id)
    with tempfile.TemporaryDirectory(prefix="scoring-walk-") as tmp:
        path = Path(tmp) / "candidate.dxf"

        def variant(mutate: Callable[[Drawing], None], score_spec: ScoringSpec = spec) -> float:
            doc = registry.gold_document(task_id)
            mutate(doc)
            return _score(task_id, _doc_metadata(doc, score_spec, path), score_spec)

        free = spec.model_copy(update={"position": "free"})
        invariants = {"gold": _score(task_id, _gold(task_id), spec)}
        if invariants_too:
            invariants["noise 1e-6"] = variant(add_noise(1e-6))
            invariants["moved far, position free"] = variant(shift(123.4567, -89.0123), free)
        found = mutations(
            registry.gold_document(task_id),
            position=spec.position,
            layers_scored=spec.weights.layers > 0,
            seed=task_id,
            per_kind=PER_KIND,
        )
        mutated = [(m.kind, m.label, variant(m.apply)) for m in found]
    return TaskWalk(task_id, spec.pass_threshold, invariants, mutated)


def _walk(task_ids: list[str]) -> list[TaskWalk]:
    """:func:`walk_task` for every task (the invariants on every :data:`INVARIANT_STRIDE`-th),
    on up to :data:`WALK_WORKERS` processes."""
    invariants = [i % INVARIANT_STRIDE == 0 for i in range(len(task_ids))]
    workers = min(WALK_WORKERS, os.cpu_count() or 1)
    if workers <= 1:
        return [walk_task(t, inv) for t, inv in zip(task_ids, invariants, strict=True)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(walk_task, task_ids, invariants, chunksize=4))


def test_mutation_walk_every_stated_property_fails(capsys: pytest.CaptureFixture[str]) -> None:
    task_ids = registry.list_tasks()
    started = time.monotonic()
    walks = _walk(task_ids)
    elapsed = time.monotonic() - started
    kinds = Counter(kind for w in walks for kind, _, _ in w.mutated)
    with capsys.disabled():
        print(
            f"\nmutation walk: {len(task_ids)} tasks, {sum(kinds.values())} mutations in {elapsed:.1f} s "
            f"({min(WALK_WORKERS, os.cpu_count() or 1)} processes); {dict(sorted(kinds.items()))}"
        )
    broken = [
        f"{w.task_id}: {name} scored {score!r}, not 1.0"
        for w in walks
        for name, score in w.invariants.items()
        if score != 1.0
    ]
    assert not broken, "the gold must score exactly 1.0:\n" + "\n".join(broken)
    lenient = [
        f"{w.task_id}: {label} scored {score:.3f}"
        for w in walks
        for _, label, score in w.mutated
        if score > w.threshold - MARGIN
    ]
    assert not lenient, "mutations that do not fail clearly:\n" + "\n".join(lenient)
    # every kind of mutation the suite can exercise was exercised
    for kind in ("scale-1.01", "scale-0.99", "shift-1mm", "drop", "hatch-add"):
        assert kinds[kind] > 0, kind


@pytest.mark.parametrize(
    ("line_y", "reversed_points", "passes"),
    [(20.0, False, True), (20.0, True, True), (10.0, False, False), (60.0, False, False)],
)
def test_the_stated_dimension_line_position_is_scored(
    tmp_path: Path, line_y: float, reversed_points: bool, passes: bool
) -> None:
    """anno-dim-linear states "dimension line at y = 20": a dimension line elsewhere (10 mm
    further out, or on the other side inside the part) fails; picking the two points in the
    other order (another definition point, the same line) still passes."""
    from autocad_bench_evaluator.suite.drawing import new_document
    from autocad_bench_evaluator.suite.families.ops import DimLinear, GoldState, Poly

    definition = registry.definition("anno-dim-linear")
    spec = definition.scoring_spec()

    doc = new_document(definition.view)
    state = GoldState()
    Poly.rectangle((40.0, 40.0), 120.0, 60.0).gold(doc, state)
    a, b = ((160.0, 40.0), (40.0, 40.0)) if reversed_points else ((40.0, 40.0), (160.0, 40.0))
    DimLinear("dh", a, b, (100.0, line_y)).gold(doc, state)
    DimLinear("dv", (160.0, 40.0), (160.0, 100.0), (180.0, 70.0)).gold(doc, state)
    report = score_drawing(_gold("anno-dim-linear"), _doc_metadata(doc, spec, tmp_path / "cand.dxf"), spec, "t")
    assert report.passed == passes, report.score
    if not passes:
        assert report.score <= spec.pass_threshold - MARGIN


SOLID_TASKS = ["solid-extrude-plate", "solid-revolve-shaft", "solid-subtract-plate-hole", "solid-union-bracket"]


def _box_faces(lo: tuple[float, float, float], hi: tuple[float, float, float], *, open_top: bool) -> object:
    from ezdxf.render import forms

    mesh = forms.cube(center=False).scale(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]).translate(*lo)
    if open_top:  # drop the face at z = hi: the box is an open tray
        mesh.faces = [f for f in mesh.faces if not all(abs(mesh.vertices[i].z - hi[2]) < 1e-9 for i in f)]
    return mesh


@pytest.mark.parametrize("task_id", SOLID_TASKS)
@pytest.mark.parametrize("stand_in", ["mesh-box", "open-solid-box", "solid-box"])
def test_solid_tasks_score_the_shape_not_only_the_box(tmp_path: Path, task_id: str, stand_in: str) -> None:
    """A closed MESH with the gold's box, an open ACIS box (volume undefined) and a closed ACIS
    box with the gold's extents all fail every solid task: MESH does not stand in for a solid, an
    open surface has no volume, and a plain box has another volume, surface or centroid than the
    extruded, revolved, drilled or united part (the box task's own box is its gold: skipped)."""
    from autocad_bench_evaluator.suite.drawing import add_solid_from_mesh

    spec = _spec(task_id)
    gold = _gold(task_id)
    assert gold.physical_3d is not None and gold.physical_3d.extents is not None
    assert gold.physical_3d.volume is not None and gold.physical_3d.centroid is not None
    if stand_in == "solid-box" and task_id == "solid-extrude-plate":
        pytest.skip("the extruded plate is a box: a closed box with its extents is its gold")
    lo, hi = gold.physical_3d.extents.min, gold.physical_3d.extents.max
    doc = registry.template_document(task_id)
    mesh = _box_faces(lo, hi, open_top=stand_in == "open-solid-box")
    if stand_in == "mesh-box":
        mesh.render_mesh(doc.modelspace())  # type: ignore[attr-defined]
    else:
        add_solid_from_mesh(doc, mesh)
    report = score_drawing(gold, _doc_metadata(doc, spec, tmp_path / f"{stand_in}.dxf"), spec, "t")
    assert not report.passed and report.score <= spec.pass_threshold - MARGIN, report.score
    extents3d = report.components["extents3d"].details
    if stand_in == "mesh-box":
        assert "MESH" in str(extents3d.get("reason")) and report.components["extents3d"].score == 0.0
    if stand_in == "open-solid-box":
        assert extents3d.get("volume.score") == 0.0


def _with_polyline() -> list[str]:
    found = []
    for task_id in registry.list_tasks():
        doc = registry.gold_document(task_id)
        if any(e.dxftype() == "LWPOLYLINE" for e in doc.modelspace()):
            found.append(task_id)
    return found


def test_the_stated_object_type_is_scored(tmp_path: Path) -> None:
    """Prompts say "as one closed polyline" or "three separate LINE objects": on every task whose
    gold holds a polyline, exploding it into LINEs and ARCs (the same geometry, other objects)
    fails, and a triangle of LINEs redrawn as one closed polyline fails too."""
    tasks = _with_polyline()
    assert len(tasks) >= 100
    for task_id in tasks[::3]:  # every third keeps the test quick; all families appear
        spec = _spec(task_id)
        gold = _gold(task_id)
        doc = registry.gold_document(task_id)
        polyline = next(e for e in doc.modelspace() if e.dxftype() == "LWPOLYLINE")
        polyline.explode()  # type: ignore[attr-defined]  # an LWPOLYLINE, found by its type
        report = score_drawing(gold, _doc_metadata(doc, spec, tmp_path / "exploded.dxf"), spec, "t")
        assert not report.passed and report.score <= spec.pass_threshold - MARGIN, (task_id, report.score)
    spec = _spec("prim-line-triangle")
    gold_doc = registry.gold_document("prim-line-triangle")
    corners = [e.dxf.start for e in gold_doc.modelspace() if e.dxftype() == "LINE"]
    gold = _gold("prim-line-triangle")
    doc = registry.template_document("prim-line-triangle")
    doc.modelspace().add_lwpolyline([(p.x, p.y) for p in corners], close=True)
    report = score_drawing(gold, _doc_metadata(doc, spec, tmp_path / "joined.dxf"), spec, "t")
    assert not report.passed and report.score <= spec.pass_threshold - MARGIN, report.score

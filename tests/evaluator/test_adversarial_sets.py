"""The committed adversarial set: every family's representative attacked, each attack within its bound.

``tests/evaluator/adversarial/`` holds, for the first instance of every task family (suite
order), the drawings :mod:`tests.evaluator.adversarial.make_adversarial` builds from the
instance's gold or template, and ``bounds.json`` listing each file's task, family, attack and
bound. Regenerate both with::

    UV_PYTHON_DOWNLOADS=never uv run python tests/evaluator/adversarial/make_adversarial.py

Each file is read with the evaluator's reader and scored against the task's gold (built in memory
with ``registry.gold_document``) under the task's scoring spec. The bounds:

* ``empty`` (the template as it is; the no-op of an edit task): score == 0.
* ``shotgun`` (the template plus 200 lines and 200 circles of radii 1..100 over x 0..400,
  y 0..200): score < 0.05.
* ``junk`` (gold plus 60 random lines and circles), ``duplicated`` (every gold entity twice),
  ``redraw-on-top`` (edit tasks: the template with the whole gold drawn over it): not passed.
* ``scaled`` (gold scaled 1.02 about its extents centre): not passed.
* ``shifted`` (gold moved by (3, 2)): not passed on fixed-position tasks; passed with score 1.0
  (within 1e-6) on free-position tasks, whose contract is translation invariance.
* ``mirrored`` (gold mirrored about the vertical line through its extents centre): not passed,
  unless the mirror maps the gold onto itself (compared geometrically when the set is built):
  then the bound is "n/a (symmetric)" and the drawing, being the gold, must pass.
* ``wrong-layer`` (every gold entity on layer "0", or on another layer when all of it was on
  "0"; only tasks whose spec has required layers or a positive layers weight): not passed.

An entry with ``known_hole`` is an attack that meets no bound today because of a scoring hole
(the explanation says which); it is expected to fail its bound (``xfail(strict=True)``), so
closing the hole turns this test red until the entry is removed from ``KNOWN_HOLES`` in the
generator and the set is regenerated.

Besides the bounds: the manifest must cover every family of ``families()`` with the attacks the
generator gives it, and regenerating some families must reproduce the committed bytes.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
from autocad_bench_evaluator.scoring import ScoreReport, score_drawing
from autocad_bench_evaluator.spec import ScoringSpec
from autocad_bench_evaluator.suite import registry
from autocad_bench_evaluator.suite.drawing import document_bytes
from autocad_bench_evaluator.suite.families import families

from tests.evaluator.adversarial import make_adversarial as adv

ADVERSARIAL_DIR = adv.HERE
ENTRIES: dict[str, dict[str, Any]] = json.loads(adv.MANIFEST.read_text())["files"] if adv.MANIFEST.is_file() else {}
REGENERATED_FAMILIES = ("annotate-dim-linear", "edit-move", "solid-union")
"""Families the reproducibility test regenerates (a dimension, an edit task, an ACIS body)."""


@cache
def _spec(task_id: str) -> ScoringSpec:
    return registry.definition(task_id).scoring_spec()


def _read(path: Path, spec: ScoringSpec) -> DrawingMetadata:
    meta = read_drawing(path, spec.schema_version)
    assert isinstance(meta, DrawingMetadata), f"{path.name} does not read: {meta}"
    return meta


@cache
def _gold(task_id: str, tmp: Path) -> DrawingMetadata:
    path = tmp / f"{task_id}.gold.dxf"
    path.write_bytes(document_bytes(registry.gold_document(task_id)))
    return _read(path, _spec(task_id))


@pytest.fixture(scope="module")
def gold_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adversarial-gold")


def _score(name: str, gold_dir: Path) -> ScoreReport:
    entry = ENTRIES[name]
    task_id = entry["task_id"]
    spec = _spec(task_id)
    return score_drawing(_gold(task_id, gold_dir), _read(ADVERSARIAL_DIR / name, spec), spec, "adversarial")


def violation(entry: dict[str, Any], report: ScoreReport) -> str | None:
    """Why ``report`` breaks the entry's bound, or None when it keeps it."""
    bound, score, passed = entry["bound"], report.score, report.passed
    if bound == adv.BOUND_ZERO:
        ok = score == 0.0
    elif bound == adv.BOUND_SHOTGUN:
        ok = score < adv.SHOTGUN_MAX
    elif bound == adv.BOUND_FAIL:
        ok = not passed
    elif bound in (adv.BOUND_PASS, adv.BOUND_SYMMETRIC):
        ok = passed and (bound == adv.BOUND_SYMMETRIC or abs(score - 1.0) <= 1e-6)
    else:
        return f"unknown bound {bound!r}"
    if ok:
        return None
    return (
        f"{entry['task_id']} (family {entry['family']}, {entry['position']} position): attack {entry['attack']!r} "
        f"scored {score:.6f} (passed={passed}, threshold {_spec(entry['task_id']).pass_threshold}); "
        f"bound: {bound}"
    )


def _params() -> list[Any]:
    params = []
    for name in sorted(ENTRIES):
        hole = ENTRIES[name].get("known_hole")
        marks = [pytest.mark.xfail(reason=f"known scoring hole: {hole}", strict=True)] if hole else []
        params.append(pytest.param(name, id=name.removesuffix(".dxf"), marks=marks))
    return params


@pytest.mark.parametrize("name", _params())
def test_attack_within_bound(name: str, gold_dir: Path) -> None:
    entry = ENTRIES[name]
    assert (ADVERSARIAL_DIR / name).is_file(), f"{name} is missing; regenerate with: {adv.REGENERATE}"
    problem = violation(entry, _score(name, gold_dir))
    assert problem is None, problem


def test_manifest_covers_every_family() -> None:
    assert ENTRIES, f"{adv.MANIFEST} is missing or empty; generate it with: {adv.REGENERATE}"
    covered = {entry["family"] for entry in ENTRIES.values()}
    expected = {family.family_id for family in families()}
    missing, stale = sorted(expected - covered), sorted(covered - expected)
    assert not missing and not stale, (
        f"adversarial set out of date (families without attacks: {missing}; attacks of unknown families: {stale}); "
        f"regenerate with: {adv.REGENERATE}"
    )
    for entry in ENTRIES.values():
        attacks = {e["attack"] for e in ENTRIES.values() if e["family"] == entry["family"]}
        core = {adv.EMPTY, adv.SHOTGUN, adv.JUNK, adv.DUPLICATED, adv.SCALED, adv.SHIFTED, adv.MIRRORED}
        if entry["skill"] == "edit":
            core.add(adv.REDRAW_ON_TOP)
        if adv.layers_scored(_spec(entry["task_id"])):
            core.add(adv.WRONG_LAYER)
        assert attacks == core, (entry["family"], sorted(attacks ^ core), f"regenerate with: {adv.REGENERATE}")
    representatives = {family.family_id: task_id for family, task_id in adv._representatives()}
    wrong = sorted(
        {(e["family"], e["task_id"]) for e in ENTRIES.values() if representatives[e["family"]] != e["task_id"]}
    )
    assert not wrong, f"attacked instances are not the families' first any more: {wrong}; regenerate"
    listed = {path.name for path in ADVERSARIAL_DIR.glob("*.dxf")}
    assert listed == set(ENTRIES), f"files and manifest differ: {sorted(listed ^ set(ENTRIES))}; regenerate"


def test_known_holes_are_in_the_manifest() -> None:
    """The generator's KNOWN_HOLES and the committed manifest agree (no stale mark either way)."""
    marked = {(e["family"], e["attack"]): e["known_hole"] for e in ENTRIES.values() if "known_hole" in e}
    assert marked == adv.KNOWN_HOLES, f"regenerate with: {adv.REGENERATE}"


def test_regenerating_gives_identical_bytes(tmp_path: Path) -> None:
    manifest = adv.generate(tmp_path, REGENERATED_FAMILIES)
    assert {e["family"] for e in manifest["files"].values()} == set(REGENERATED_FAMILIES)
    for name, entry in manifest["files"].items():
        assert ENTRIES.get(name) == entry, (name, f"manifest entry differs; regenerate with: {adv.REGENERATE}")
        assert (tmp_path / name).read_bytes() == (ADVERSARIAL_DIR / name).read_bytes(), (
            f"{name}: regenerated bytes differ from the committed file; regenerate with: {adv.REGENERATE}"
        )


def _shotgun_scores(task_ids: list[str]) -> list[tuple[str, float]]:
    """The score of a shotgun sheet (the template plus 200 lines and 200 circles over the work
    area) on each of ``task_ids``; instances with an empty template share one sheet."""
    import random
    import tempfile

    from autocad_bench_evaluator.suite.drawing import document_bytes

    out: list[tuple[str, float]] = []
    shared: dict[tuple[int, tuple[float, float], float], DrawingMetadata] = {}
    with tempfile.TemporaryDirectory(prefix="autocad-bench-shotgun-") as tmp:
        for task_id in task_ids:
            definition = registry.definition(task_id)
            spec = _spec(task_id)
            key = (spec.schema_version, definition.view.center, definition.view.height)
            candidate = None if definition.template is not None else shared.get(key)
            if candidate is None:
                doc = registry.template_document(task_id)
                adv._random_lines_and_circles(doc, random.Random("shotgun"), adv.SHOTGUN_LINES, adv.SHOTGUN_CIRCLES)
                path = Path(tmp) / f"{task_id}.dxf"
                path.write_bytes(document_bytes(doc))
                read = read_drawing(path, spec.schema_version)
                assert isinstance(read, DrawingMetadata)
                candidate = read
                if definition.template is None:
                    shared[key] = candidate
            gold = read_drawing(registry.generate_gold(task_id, Path(tmp) / task_id), spec.schema_version)
            assert isinstance(gold, DrawingMetadata)
            out.append((task_id, score_drawing(gold, candidate, spec, "shotgun").score))
    return out


def test_a_shotgun_sheet_stays_below_the_bound_on_every_instance() -> None:
    """The per-family set tries one instance per family; this tries every default instance."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    task_ids = registry.list_tasks()
    workers = min(2, os.cpu_count() or 1)
    chunks = [task_ids[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        scores = [item for part in pool.map(_shotgun_scores, chunks) for item in part]
    assert len(scores) == len(task_ids)
    over = [(task_id, score) for task_id, score in scores if score >= adv.SHOTGUN_MAX]
    assert over == [], f"a shotgun sheet reaches {adv.SHOTGUN_MAX} on: {over}"

"""Exact boundaries of the verdict (issue 23): the pass threshold and its default, required
layers and texts, the layer component, the defect cap, edit-task rescaling and units.

Everything goes through the public ``score_drawing`` / ``ScoringSpec`` on hand-made metadata
(no DXF reading), so these run in milliseconds.
"""

from __future__ import annotations

import math

import pytest
from autocad_bench_evaluator.metadata import (
    CircleEntity,
    DrawingMetadata,
    Entity,
    LayerInfo,
    LineEntity,
    PolylineEntity,
    TextEntity,
)
from autocad_bench_evaluator.scoring import (
    COMPONENTS,
    DEFECT_COST,
    ComponentScore,
    ScoreReport,
    invalid_report,
    required_layers_present,
    required_text_present,
    score_drawing,
    units_mismatch,
)
from autocad_bench_evaluator.spec import ComponentWeights, ScoringSpec, Tolerance
from pydantic import ValidationError

from tests.evaluator.support import metadata, plate

VERSION = "v-test"


def _score(gold: DrawingMetadata, cand: DrawingMetadata, **spec: object) -> ScoreReport:
    return score_drawing(gold, cand, ScoringSpec(task_id="plate", **spec), VERSION)  # type: ignore[arg-type]


def _with(m: DrawingMetadata, **update: object) -> DrawingMetadata:
    return m.model_copy(update=update)


def _one_hole_missing() -> DrawingMetadata:
    return metadata(plate()[:-2] + plate()[-1:])  # the last circle left out


# --------------------------------------------------------------------------- the threshold


def test_the_default_pass_threshold_is_0_95() -> None:
    assert ScoringSpec(task_id="t").pass_threshold == 0.95
    report = _score(metadata(plate()), metadata(plate()))
    assert report.pass_threshold == 0.95


def test_the_gold_scores_exactly_one_and_passes_every_threshold() -> None:
    for threshold in (0.0, 0.95, 1.0):
        report = _score(metadata(plate()), metadata(plate()), pass_threshold=threshold)
        assert report.score == 1.0 and report.passed and report.valid
        assert report.defects == 0.0 and report.raw_score is None


def test_a_score_equal_to_the_threshold_passes_and_just_above_it_fails() -> None:
    gold, cand = metadata(plate()), _one_hole_missing()
    score = _score(gold, cand).score
    assert 0.0 < score < 0.95
    assert _score(gold, cand, pass_threshold=score).passed
    assert not _score(gold, cand, pass_threshold=min(1.0, score + 1e-6)).passed
    assert not _score(gold, cand).passed  # below the default


def test_one_defect_caps_the_total_below_the_default_threshold() -> None:
    report = _score(metadata(plate()), _one_hole_missing())
    assert report.defects is not None and report.defects >= 1.0
    assert report.score <= 1.0 - DEFECT_COST + 1e-9
    assert DEFECT_COST == 0.1


def test_the_threshold_is_validated() -> None:
    ScoringSpec(task_id="t", pass_threshold=0.0)
    ScoringSpec(task_id="t", pass_threshold=1.0)
    for bad in (-0.01, 1.01):
        with pytest.raises(ValidationError):
            ScoringSpec(task_id="t", pass_threshold=bad)


# --------------------------------------------------------------------------- required layers and texts


def test_a_missing_required_layer_fails_a_perfect_score() -> None:
    report = _score(metadata(plate()), metadata(plate()), required_layers=("NOTES", "HOLES"))
    assert report.score == 1.0 and not report.passed
    assert report.required_layers == {"NOTES": False, "HOLES": True}


def test_required_layers_present_pass() -> None:
    report = _score(metadata(plate()), metadata(plate()), required_layers=("holes", "OUTLINE"))
    assert report.passed and report.required_layers == {"holes": True, "OUTLINE": True}


@pytest.mark.parametrize("hidden", [{"on": False}, {"frozen": True}])
def test_a_required_layer_that_is_off_or_frozen_does_not_count(hidden: dict[str, bool]) -> None:
    cand = _with(metadata(plate()), layers=(LayerInfo(name="HOLES", **hidden),))
    assert required_layers_present(cand, ["HOLES", "OUTLINE"]) == {"HOLES": False, "OUTLINE": True}
    assert required_layers_present(_with(cand, layers=(LayerInfo(name="HOLES", locked=True),)), ["HOLES"]) == {
        "HOLES": True
    }


def test_a_missing_required_text_fails_a_perfect_score() -> None:
    report = _score(metadata(plate()), metadata(plate()), required_text=("plate  a", "REV B"))
    assert report.score == 1.0 and not report.passed
    assert report.required_text == {"plate  a": True, "REV B": False}
    assert required_text_present(metadata(plate()), ["LATE"]) == {"LATE": True}


# --------------------------------------------------------------------------- layers


def test_entities_on_a_wrong_existing_layer_cost() -> None:
    gold = metadata(plate())
    moved = [
        CircleEntity(center=c.center, radius=c.radius, layer="OUTLINE") if isinstance(c, CircleEntity) and i > 1 else c
        for i, c in enumerate(plate())
    ]
    report = _score(gold, metadata(moved))
    layers = report.components["layers"]
    assert layers.applicable and layers.score < 1.0
    assert layers.details["names.score"] == 1.0  # every layer still exists...
    assert 0.0 < float(layers.details["assignment.score"]) < 1.0  # ...but matched items sit on the wrong one
    assert report.score < 1.0 and not report.passed
    assert report.components["entities"].score == 1.0


def test_a_missing_layer_name_costs() -> None:
    text_elsewhere = [
        TextEntity(content="PLATE A", insert=(5, 42), height=3, layer="OUTLINE") if isinstance(e, TextEntity) else e
        for e in plate()
    ]
    report = _score(metadata(plate()), metadata(text_elsewhere))
    assert report.components["layers"].details["names.score"] < 1.0
    assert report.score < 0.95


def test_layer_colour_is_checked_only_when_the_gold_sets_one() -> None:
    gold = _with(metadata(plate()), layers=(LayerInfo(name="HOLES", color=1), LayerInfo(name="OUTLINE")))
    right = _with(metadata(plate()), layers=(LayerInfo(name="HOLES", color=1), LayerInfo(name="OUTLINE")))
    wrong = _with(metadata(plate()), layers=(LayerInfo(name="HOLES", color=3), LayerInfo(name="OUTLINE")))
    assert _score(gold, right).components["layers"].details["properties.score"] == 1.0
    bad = _score(gold, wrong).components["layers"]
    assert bad.details["properties.checked"] == 2 and bad.details["properties.score"] == 0.5
    plain = _with(metadata(plate()), layers=(LayerInfo(name="HOLES"), LayerInfo(name="OUTLINE")))
    assert "properties.score" not in _score(plain, wrong).components["layers"].details


def test_layer_linetype_is_checked_only_when_the_gold_sets_one() -> None:
    gold = _with(metadata(plate()), layers=(LayerInfo(name="HOLES", linetype="DASHED"),))
    missing = _score(gold, metadata(plate())).components["layers"]
    assert missing.details["properties.checked"] == 1 and missing.details["properties.score"] == 0.0
    same = _score(gold, gold).components["layers"]
    assert same.details["properties.score"] == 1.0 and same.score == 1.0


def test_a_zero_layer_weight_switches_the_component_off() -> None:
    weights = ComponentWeights(layers=0.0)
    moved = [
        CircleEntity(center=c.center, radius=c.radius, layer="OUTLINE") if isinstance(c, CircleEntity) else c
        for c in plate()
    ]
    report = _score(metadata(plate()), metadata(moved), weights=weights)
    assert not report.components["layers"].applicable and report.components["layers"].weight == 0.0


def test_no_layers_on_either_side_is_not_applicable() -> None:
    report = _score(metadata([]), metadata([]))
    assert report.score == 1.0 and report.passed
    assert not report.components["layers"].applicable


# --------------------------------------------------------------------------- totals


def test_weights_are_normalised_and_only_ratios_matter() -> None:
    gold, cand = metadata(plate()), _one_hole_missing()
    a = _score(gold, cand, weights=ComponentWeights(entities=0.4, dimensions=0.2, layers=0.1, topology=0.2, text=0.1))
    b = _score(gold, cand, weights=ComponentWeights(entities=4, dimensions=2, layers=1, topology=2, text=1))
    assert a.score == b.score
    assert ComponentWeights().as_dict() == {
        "entities": 0.4,
        "dimensions": 0.2,
        "layers": 0.1,
        "topology": 0.2,
        "text": 0.1,
        "extents3d": 0.0,
    }
    assert tuple(ComponentWeights().as_dict()) == COMPONENTS


def test_weights_must_have_a_positive_sum_and_no_negative() -> None:
    with pytest.raises(ValidationError):
        ComponentWeights(entities=0, dimensions=0, layers=0, topology=0, text=0)
    with pytest.raises(ValidationError):
        ComponentWeights(entities=-0.1)
    assert ComponentWeights(entities=0, dimensions=0, layers=0, topology=0, text=0, extents3d=1).extents3d == 1
    with pytest.raises(ValidationError, match="requires schema_version 4"):
        ScoringSpec(task_id="t", weights=ComponentWeights(extents3d=1.0))
    assert ScoringSpec(task_id="t", schema_version=4, weights=ComponentWeights(extents3d=1.0)).scores_3d_extents
    assert not ScoringSpec(task_id="t", schema_version=4).scores_3d_extents


def test_component_scores_are_reported_with_weights() -> None:
    report = _score(metadata(plate()), _one_hole_missing())
    assert set(report.components) == set(COMPONENTS)
    assert report.components["entities"].weight == 0.4
    assert report.components["entities"].gold == report.components["entities"].candidate + 1
    assert report.components["entities"].score < 1.0
    assert "defects" in report.components["entities"].details
    assert report.task_id == "plate" and report.evaluator_version == VERSION and report.schema_version == 3
    assert report.position == "free" and report.translation == (0.0, 0.0)
    assert report.gold_sha256 == "0" * 64


def test_a_free_drawing_moved_as_a_whole_is_the_gold_and_a_fixed_one_is_not() -> None:
    shifted = metadata([_shift(e, 30.0) for e in plate()])
    free = _score(metadata(plate()), shifted)
    assert free.score == 1.0 and free.translation in ((-30.0, 0.0), (30.0, 0.0))
    fixed = _score(metadata(plate()), shifted, position="fixed")
    assert fixed.score < 0.95 and not fixed.passed and fixed.position == "fixed"


def _shift(e: Entity, dx: float, dy: float = 0.0) -> Entity:
    if isinstance(e, CircleEntity):
        return CircleEntity(center=(e.center[0] + dx, e.center[1] + dy), radius=e.radius, layer=e.layer)
    if isinstance(e, TextEntity):
        return TextEntity(
            content=e.content, insert=(e.insert[0] + dx, e.insert[1] + dy), height=e.height, layer=e.layer
        )
    assert isinstance(e, PolylineEntity)
    return e.model_copy(update={"vertices": tuple((x + dx, y + dy) for x, y in e.vertices)})


def test_the_default_tolerance_is_half_a_unit_inclusive_and_absolute() -> None:
    assert Tolerance().geometric == 0.5 and Tolerance().relative_size == 0.0
    assert Tolerance(geometric=2.0).size_tolerance(1000.0) == 2.0
    gold = metadata([LineEntity(start=(0, 0), end=(100, 0), layer="A")])
    within = metadata([LineEntity(start=(0, 0), end=(100.4, 0), layer="A")])
    beyond = metadata([LineEntity(start=(0, 0), end=(101.5, 0), layer="A")])
    assert _score(gold, within, position="fixed").score == 1.0
    assert _score(gold, beyond, position="fixed").score < 0.95
    with pytest.raises(ValidationError):
        Tolerance(geometric=0.0)


# --------------------------------------------------------------------------- edit tasks and units


def test_an_edit_task_rescales_from_its_baseline() -> None:
    gold, cand = metadata(plate()), _one_hole_missing()
    raw = _score(gold, cand).score
    edit = _score(gold, cand, baseline=0.5)
    assert edit.raw_score == raw
    assert edit.score == pytest.approx(max(0.0, (raw - 0.5) / 0.5), abs=1e-6)
    assert _score(gold, gold, baseline=0.5).score == 1.0
    assert _score(gold, cand, baseline=raw).score <= 1e-5  # doing what the template already does: 0
    assert _score(gold, cand, baseline=min(0.99, raw + 0.05)).score == 0.0  # clipped at 0


def test_other_declared_units_score_zero_with_the_reason() -> None:
    gold = metadata(plate())
    gold = _with(gold, source=gold.source.model_copy(update={"units": 4}))
    inches = _with(gold, source=gold.source.model_copy(update={"units": 1}))
    report = _score(gold, inches)
    assert report.score == 0.0 and not report.passed and report.valid
    assert report.reason == (
        "the drawing declares its units as inches ($INSUNITS 1); the task is drawn in millimetres "
        "($INSUNITS 4), so its coordinates cannot be compared"
    )
    odd = _with(gold, source=gold.source.model_copy(update={"units": 99}))
    assert "as code 99 ($INSUNITS 99)" in _score(gold, odd).reason
    unitless = _with(gold, source=gold.source.model_copy(update={"units": 0}))
    assert _score(gold, unitless).score == 1.0 and _score(unitless, gold).score == 1.0


def test_an_invalid_drawing_reports_zero_and_every_requirement_unmet() -> None:
    spec = ScoringSpec(task_id="plate", required_layers=("A",), required_text=("T",), pass_threshold=0.0)
    report = invalid_report(spec, VERSION, "no file", gold_sha256="1" * 64)
    assert report.score == 0.0 and not report.passed and not report.valid and report.reason == "no file"
    assert report.required_layers == {"A": False} and report.required_text == {"T": False}
    assert report.pass_threshold == 0.0 and report.gold_sha256 == "1" * 64
    assert report.to_json_bytes().endswith(b"\n")


# --------------------------------------------------------------------------- spec field bounds


def test_weight_bounds_are_inclusive_at_0_and_1000() -> None:
    assert ComponentWeights(entities=1000.0).entities == 1000.0
    assert ComponentWeights(entities=0.0, dimensions=1.0).entities == 0.0
    with pytest.raises(ValidationError):
        ComponentWeights(entities=1000.5)


def test_relative_size_is_accepted_in_0_to_below_1() -> None:
    assert Tolerance(relative_size=0.0).relative_size == 0.0
    assert Tolerance(relative_size=0.99).relative_size == 0.99
    for bad in (-0.01, 1.0, 1.5):
        with pytest.raises(ValidationError):
            Tolerance(relative_size=bad)


def test_baseline_is_accepted_in_0_to_below_1() -> None:
    assert ScoringSpec(task_id="t").baseline == 0.0
    assert ScoringSpec(task_id="t", baseline=0.99).baseline == 0.99
    for bad in (-0.01, 1.0, 1.5):
        with pytest.raises(ValidationError):
            ScoringSpec(task_id="t", baseline=bad)


def test_a_manifest_finds_files_by_equal_name() -> None:
    from autocad_bench_evaluator.spec import GoldEntry, GoldManifest

    entry = GoldEntry(name="gold.dxf", sha256="a" * 64, size=1)
    manifest = GoldManifest(task_id="t", evaluator_version="v", schema_version=3, files=(entry,))
    name = "".join(["gold", ".", "dxf"])  # equal, not the same object
    assert manifest.file(name) == entry
    render = GoldEntry(name="render.png", sha256="b" * 64, size=1)
    only_render = GoldManifest(task_id="t", evaluator_version="v", schema_version=3, files=(render,))
    assert only_render.file("gold.dxf") is None and only_render.file("zzz.png") is None


def test_reported_numbers_are_rounded_to_six_digits() -> None:
    report = _score(metadata(plate()), _one_hole_missing())
    for value in (report.score, *(c.score for c in report.components.values())):
        assert value == round(value, 6)
    assert any(value != round(value, 5) for value in (report.score, *(c.score for c in report.components.values())))


def test_a_text_height_is_held_to_a_tenth_of_the_gold_height_when_that_is_tighter() -> None:
    gold = metadata([TextEntity(content="A", insert=(0, 0), height=3, layer="T")])
    near = metadata([TextEntity(content="A", insert=(0, 0), height=3.25, layer="T")])  # within 0.3
    off = metadata([TextEntity(content="A", insert=(0, 0), height=3.4, layer="T")])  # within 0.5, beyond 0.3
    assert _score(gold, near, position="fixed").components["text"].score == 1.0
    assert _score(gold, off, position="fixed").components["text"].score < 1.0


def test_a_zero_weight_component_is_not_applicable() -> None:
    weights = ComponentWeights(entities=0.0, text=0.0)
    report = _score(metadata(plate()), _one_hole_missing(), weights=weights)
    assert not report.components["entities"].applicable and not report.components["text"].applicable
    assert report.components["dimensions"].applicable


def test_the_rescaling_divides_by_one_minus_the_baseline() -> None:
    gold, cand = metadata(plate()), _one_hole_missing()
    raw = _score(gold, cand).score
    edit = _score(gold, cand, baseline=0.25)
    assert edit.raw_score == raw
    assert edit.score == pytest.approx((raw - 0.25) / 0.75, abs=1e-6)


def test_the_documented_tolerance_constants() -> None:
    from autocad_bench_evaluator.scoring import (
        ANGLE_TOLERANCE_DEG,
        CREDIT_FALLOFF,
        ROUND_DIGITS,
        SCALE_TOLERANCE,
        TEXT_HEIGHT_FRACTION,
    )

    assert (ANGLE_TOLERANCE_DEG, SCALE_TOLERANCE, TEXT_HEIGHT_FRACTION, CREDIT_FALLOFF, ROUND_DIGITS) == (
        0.5,
        1e-3,
        0.1,
        0.5,
        6,
    )


def test_a_text_rotation_is_held_to_half_a_degree() -> None:
    gold = metadata([TextEntity(content="A", insert=(0, 0), height=3, rotation=10.0, layer="T")])
    near = metadata([TextEntity(content="A", insert=(0, 0), height=3, rotation=10.4, layer="T")])
    off = metadata([TextEntity(content="A", insert=(0, 0), height=3, rotation=10.7, layer="T")])
    assert _score(gold, near, position="fixed").components["text"].score == 1.0
    assert _score(gold, off, position="fixed").components["text"].score < 1.0


def test_a_required_layer_may_be_carried_by_a_block_reference() -> None:
    from autocad_bench_evaluator.metadata import InsertEntity

    sub = CircleEntity(center=(0, 0), radius=1, layer="BOLTS")
    block = InsertEntity(block="B", insert=(0, 0), layer="0", exploded=(sub,))
    assert required_layers_present(metadata([block]), ["BOLTS", "0", "NUTS"]) == {
        "BOLTS": True,
        "0": True,
        "NUTS": False,
    }


# --------------------------------------------------------------------------- the report models (scoring/report.py)

_INSUNITS = {
    1: "inches",
    2: "feet",
    3: "miles",
    4: "millimetres",
    5: "centimetres",
    6: "metres",
    7: "kilometres",
    8: "microinches",
    9: "mils",
    10: "yards",
    11: "angstroms",
    12: "nanometres",
    13: "microns",
    14: "decimetres",
    15: "decametres",
    16: "hectometres",
    17: "gigametres",
    18: "astronomical units",
    19: "light years",
    20: "parsecs",
}


def _in_units(m: DrawingMetadata, units: int | None) -> DrawingMetadata:
    return _with(m, source=m.source.model_copy(update={"units": units}))


def test_every_insunits_code_is_named_in_the_reason() -> None:
    base = metadata([LineEntity(start=(0, 0), end=(10, 0), layer="A")])
    for got, got_name in _INSUNITS.items():
        want = got % 20 + 1  # the next code: the task's units sort above the drawing's, and below at 20
        reason = units_mismatch(_in_units(base, want), _in_units(base, got))
        assert reason == (
            f"the drawing declares its units as {got_name} ($INSUNITS {got}); the task is drawn in "
            f"{_INSUNITS[want]} ($INSUNITS {want}), so its coordinates cannot be compared"
        )
    assert "as code 0 ($INSUNITS 0)" not in str(units_mismatch(_in_units(base, 4), _in_units(base, 21)))
    assert "as code 21 ($INSUNITS 21)" in str(units_mismatch(_in_units(base, 4), _in_units(base, 21)))


def test_units_compare_by_value_in_either_order() -> None:
    base = metadata(plate())
    # equal codes are equal however the numbers were made (no identity comparison)
    assert units_mismatch(_in_units(base, int("1000")), _in_units(base, int("1000"))) is None
    assert _score(_in_units(base, int("1000")), _in_units(base, int("1000"))).score == 1.0
    for want, got in ((1, 4), (4, 1)):
        report = _score(_in_units(base, want), _in_units(base, got))
        assert report.score == 0.0 and not report.passed and f"($INSUNITS {got})" in report.reason
    unset: tuple[tuple[int | None, int | None], ...] = ((None, 4), (4, None), (0, 4), (4, 0), (None, None), (6, 6))
    for gold_units, candidate_units in unset:
        assert units_mismatch(_in_units(base, gold_units), _in_units(base, candidate_units)) is None


def test_a_units_mismatch_report_has_no_translation_or_components() -> None:
    base = metadata(plate())
    report = _score(_in_units(base, 1), _in_units(base, 4))
    assert report.translation == (0.0, 0.0) and report.components == {} and report.defects is None


def test_component_score_bounds_and_defaults() -> None:
    plain = ComponentScore(score=0.5, weight=0.0, applicable=True)
    assert (plain.gold, plain.candidate, plain.matched, plain.details) == (0, 0, 0.0, {})
    assert ComponentScore(score=0.0, weight=0.0, applicable=False).score == 0.0
    assert ComponentScore(score=1.0, weight=1000.0, applicable=True).score == 1.0
    for bad in ({"score": -0.01}, {"score": 1.01}, {"weight": -0.01}):
        with pytest.raises(ValidationError):
            ComponentScore.model_validate({"score": 0.5, "weight": 1.0, "applicable": True, **bad})
    assert ComponentScore(score=1.0, weight=1.0, applicable=True, details={"a": 1.5, "b": 2, "c": "x"}).details == {
        "a": 1.5,
        "b": 2,
        "c": "x",
    }


def test_score_report_bounds() -> None:
    report = _score(metadata(plate()), metadata(plate()))
    data = report.model_dump()
    for good in ({"score": 0.0}, {"score": 1.0}, {"defects": 0.0}, {"defects": 3.5}):
        assert ScoreReport.model_validate({**data, **good})
    for bad in ({"score": -0.01}, {"score": 1.01}, {"defects": -0.01}):
        with pytest.raises(ValidationError):
            ScoreReport.model_validate({**data, **bad})


def test_invalid_report_takes_keywords_and_keeps_its_options_keyword_only() -> None:
    spec = ScoringSpec(task_id="plate", position="fixed")
    report = invalid_report(spec=spec, evaluator_version=VERSION, reason="unreadable", invalid_class="malformed")
    assert report.translation == (0.0, 0.0) and report.components == {} and report.position == "fixed"
    assert report.invalid_class == "malformed" and report.gold_sha256 is None and report.defects is None
    assert report.kind == "deterministic" and report.task_id == "plate" and report.evaluator_version == VERSION
    with pytest.raises(TypeError):
        invalid_report(spec, VERSION, "unreadable", "malformed")  # type: ignore[call-arg]


def test_reported_numbers_have_no_negative_zero_and_keep_negative_values() -> None:
    gold = metadata(plate())
    # moved by a billionth: the translation rounds to zero, and it is written as 0.0, never -0.0
    nudged = _score(gold, metadata([_shift(e, 1e-9, 1e-9) for e in plate()]))
    assert nudged.score == 1.0 and nudged.translation == (0.0, 0.0)
    assert all(math.copysign(1.0, v) == 1.0 for v in nudged.translation)
    assert b"-0.0" not in nudged.to_json_bytes()
    moved = _score(gold, metadata([_shift(e, 1.0, 1.0) for e in plate()]))
    assert moved.score == 1.0 and moved.translation == (-1.0, -1.0)
    assert b"-1.0" in moved.to_json_bytes()


# --------------------------------------------------------------------------- the total (scoring/aggregate.py)


def _weighted_total(report: ScoreReport) -> float:
    """The documented total: the weighted mean of the applicable components, less DEFECT_COST
    of it per whole defect (at most one)."""
    applicable = [c for c in report.components.values() if c.applicable]
    den = sum(c.weight for c in applicable)
    mean = sum(c.weight * c.score for c in applicable) / den if den > 0 else 1.0
    assert report.defects is not None
    return mean * (1.0 - DEFECT_COST * min(1.0, report.defects))


_WEIGHTINGS = {
    "default": ComponentWeights(),
    "summing to 0.5": ComponentWeights(entities=0.2, dimensions=0.1, layers=0.05, topology=0.1, text=0.05),
    "summing to 10": ComponentWeights(entities=4, dimensions=2, layers=1, topology=2, text=1),
    "uneven": ComponentWeights(entities=1, dimensions=3, layers=0.5, topology=0.25, text=2),
}


@pytest.mark.parametrize("weighting", list(_WEIGHTINGS))
def test_the_total_is_the_weighted_mean_less_the_defect_cost(weighting: str) -> None:
    gold = metadata(plate())
    candidates = [
        _one_hole_missing(),  # a few defects
        metadata(plate()[:1]),  # the outline alone
        metadata(plate()[-1:]),  # the label alone: a weighted mean far below one half
    ]
    for cand in candidates:
        report = _score(gold, cand, weights=_WEIGHTINGS[weighting], position="fixed")
        assert report.defects is not None and report.defects >= 1.0
        applicable = [c for c in report.components.values() if c.applicable]
        assert report.defects == pytest.approx(sum(float(c.details["defects"]) for c in applicable), abs=1e-5)
        assert 0.0 < report.score < 0.9
        assert report.score == pytest.approx(_weighted_total(report), abs=2e-6)


def test_the_weighted_totals_of_known_drawings() -> None:
    gold = metadata(plate())
    assert _score(gold, metadata(plate()[-1:]), position="fixed").score == pytest.approx(0.208929, abs=1e-6)
    assert _score(gold, metadata(plate()[:1]), position="fixed").score == pytest.approx(0.463929, abs=1e-6)
    assert _score(gold, _one_hole_missing(), position="fixed").score == pytest.approx(0.840734, abs=1e-6)


def test_the_gold_report_has_every_weighted_component_applicable() -> None:
    report = _score(metadata(plate()), metadata(plate()))
    assert {name: c.applicable for name, c in report.components.items()} == {
        "entities": True,
        "dimensions": True,
        "layers": True,
        "topology": True,
        "text": True,
        "extents3d": False,
    }
    assert report.components["topology"].details["holes.gold"] == 4
    assert report.components["layers"].details == {"assignment.score": 1.0, "defects": 0.0, "names.score": 1.0}
    assert all(c.score == 1.0 for c in report.components.values())


@pytest.mark.parametrize("name", ["layers", "topology", "extents3d"])
def test_a_zero_weight_component_is_not_even_computed(name: str) -> None:
    weights = ComponentWeights.model_validate({name: 0.0})
    moved = [
        CircleEntity(center=c.center, radius=c.radius, layer="OUTLINE") if isinstance(c, CircleEntity) else c
        for c in plate()[:-1]
    ]
    report = _score(metadata(plate()), metadata(moved), weights=weights, position="fixed")
    assert report.components[name] == ComponentScore(score=1.0, weight=0.0, applicable=False)


def test_a_weighted_extents3d_component_is_computed() -> None:
    weights = ComponentWeights(entities=1.0, dimensions=0.0, layers=0.0, topology=0.0, text=0.0, extents3d=1.0)
    gold = metadata(plate(), schema_version=4)
    report = _score(gold, gold, schema_version=4, weights=weights)
    assert report.components["extents3d"].applicable and report.components["extents3d"].weight == 1.0
    assert report.components["extents3d"].details == {"defects": 0.0}
    lost = _score(gold, metadata(plate()), schema_version=4, weights=weights)  # no 3D record: a defect
    assert lost.components["extents3d"].applicable and lost.components["extents3d"].score == 0.0
    assert lost.defects == 1.0 and lost.score == pytest.approx(0.5 * (1.0 - DEFECT_COST), abs=1e-6)


def test_a_zero_weight_component_costs_no_defects() -> None:
    relabelled = [
        TextEntity(content="PLATE B", insert=e.insert, height=e.height, layer=e.layer)
        if isinstance(e, TextEntity)
        else e
        for e in plate()
    ]
    report = _score(metadata(plate()), metadata(relabelled), weights=ComponentWeights(text=0.0))
    assert report.components["text"].score < 1.0 and not report.components["text"].applicable
    assert report.score == 1.0 and report.defects == 0.0 and report.passed
    weighted = _score(metadata(plate()), metadata(relabelled))
    assert weighted.defects is not None and weighted.defects > 0.0 and weighted.score < 0.95


def test_nothing_to_compare_scores_one() -> None:
    report = _score(metadata([]), metadata([]), position="fixed")
    assert report.score == 1.0 and report.defects == 0.0
    assert not any(c.applicable for c in report.components.values())
    assert report.components["layers"] == ComponentScore(score=1.0, weight=0.1, applicable=False)


def test_the_free_translation_is_refined_to_the_mean_offset_of_the_matched_items() -> None:
    gold = metadata([CircleEntity(center=(20 + 20 * i, 25), radius=4, layer="HOLES") for i in range(4)])
    # three holes moved by exactly (10, 0), the first by (10.2, 0.12): the best-supported
    # translation is (-10, 0); least squares over the four matched centres moves it to the mean
    centres = [(30.2, 25.12), (50.0, 25.0), (70.0, 25.0), (90.0, 25.0)]
    cand = metadata([CircleEntity(center=c, radius=4, layer="HOLES") for c in centres])
    report = _score(gold, cand)
    assert report.translation == (-10.05, -0.03)
    assert report.score == 1.0


# --------------------------------------------------------------------------- the layers component (scoring/layers.py)


def _lines(layers: list[str], *, y0: float = 0.0) -> list[LineEntity]:
    """One 10-unit line per layer, 20 units apart (each matches only its counterpart)."""
    return [LineEntity(start=(0, y0 + 20 * i), end=(10, y0 + 20 * i), layer=layer) for i, layer in enumerate(layers)]


def _layers_of(gold: DrawingMetadata, cand: DrawingMetadata) -> ComponentScore:
    return _score(gold, cand, position="fixed").components["layers"]


def test_the_layer_of_every_matched_item_is_compared_exactly() -> None:
    # three on the same layer, two moved to a layer that sorts after theirs, two to one before
    gold = metadata(_lines(["AA", "BB", "CC", "AA", "BB", "CC", "BB"]))
    cand = metadata(_lines(["AA", "BB", "CC", "BB", "CC", "AA", "AA"]))
    layers = _layers_of(gold, cand)
    assert layers.applicable and layers.gold == 3 and layers.candidate == 3 and layers.matched == 3.0
    assert layers.details == {"names.score": 1.0, "assignment.score": 0.428571, "defects": 4.0}  # 3 of 7
    assert layers.score == 0.714286  # the mean of the two parts
    same = _layers_of(gold, gold)
    assert same.details == {"names.score": 1.0, "assignment.score": 1.0, "defects": 0.0} and same.score == 1.0


def test_one_matched_item_on_another_layer() -> None:
    layers = _layers_of(metadata(_lines(["AAA"])), metadata(_lines(["BBB"])))
    assert layers.applicable and layers.score == 0.0 and layers.matched == 0.0
    assert layers.details == {"names.score": 0.0, "assignment.score": 0.0, "defects": 3.0}


def test_layer_names_count_by_dice_and_matched_items_only() -> None:
    gold = metadata(_lines(["AA", "BB", "CC"]))
    cand = metadata(_lines(["AA", "BB", "DD"], y0=500.0))  # nothing matches: no assignment part
    layers = _layers_of(gold, cand)
    assert layers.details == {"names.score": 0.666667, "defects": 2.0}
    assert layers.score == 0.666667 and layers.matched == 2.0


@pytest.mark.parametrize("side", ["gold", "candidate"])
def test_layers_on_one_side_only_are_compared(side: str) -> None:
    drawn, empty = metadata(_lines(["AA", "BB"])), metadata([])
    gold, cand = (drawn, empty) if side == "gold" else (empty, drawn)
    layers = _layers_of(gold, cand)
    assert layers.applicable and layers.score == 0.0
    assert layers.details == {"names.score": 0.0, "defects": 2.0}


def _tabled(
    entities: list[LineEntity], colours: dict[str, int], linetypes: dict[str, str] | None = None
) -> DrawingMetadata:
    table = tuple(
        LayerInfo(name=name, color=colour, linetype=(linetypes or {}).get(name, "Continuous"))
        for name, colour in colours.items()
    )
    return _with(metadata(entities), layers=table)


def test_layer_colours_are_compared_exactly() -> None:
    names = ["AA", "BB", "CC", "DD", "EE", "FF"]
    gold = _tabled(_lines(names), {"AA": 1, "BB": 2, "CC": 3, "DD": 250, "EE": 9, "FF": 7})
    # one right, two wrong by a higher colour, three by a lower one
    cand = _tabled(_lines(names), {"AA": 1, "BB": 3, "CC": 9, "DD": 5, "EE": 8, "FF": 1})
    layers = _layers_of(gold, cand)
    assert layers.details == {
        "names.score": 1.0,
        "assignment.score": 1.0,
        "properties.score": 0.166667,
        "properties.checked": 6,
        "defects": 5.0,
    }
    assert layers.score == 0.722222  # the mean of three parts
    assert _layers_of(gold, gold).details["properties.score"] == 1.0


def test_a_colour_above_the_default_is_a_stated_colour() -> None:
    gold = _tabled(_lines(["AA", "BB"]), {"AA": 250, "BB": 7})
    layers = _layers_of(gold, _tabled(_lines(["AA", "BB"]), {"AA": 7, "BB": 7}))
    assert layers.details["properties.checked"] == 2 and layers.details["properties.score"] == 0.5


def test_a_large_colour_number_is_compared_by_value() -> None:
    gold = _tabled(_lines(["AA"]), {"AA": int("1000")})
    layers = _layers_of(gold, _tabled(_lines(["AA"]), {"AA": int("1000")}))
    assert layers.details["properties.checked"] == 1 and layers.details["properties.score"] == 1.0


@pytest.mark.parametrize("linetype", ["CENTER", "DASHED"])
def test_a_linetype_sorting_either_side_of_continuous_is_a_stated_linetype(linetype: str) -> None:
    gold = _tabled(_lines(["AA", "BB"]), {"AA": 7, "BB": 7}, {"AA": linetype})
    plain = _layers_of(gold, _tabled(_lines(["AA", "BB"]), {"AA": 7, "BB": 7}))
    assert plain.details["properties.checked"] == 2 and plain.details["properties.score"] == 0.5
    same = _layers_of(gold, _tabled(_lines(["AA", "BB"]), {"AA": 7, "BB": 7}, {"AA": linetype.lower()}))
    assert same.details["properties.score"] == 1.0 and same.score == 1.0


def test_default_layer_properties_are_not_checked() -> None:
    gold = _tabled(_lines(["AA", "BB"]), {"AA": 7, "BB": 7})
    layers = _layers_of(gold, _tabled(_lines(["AA", "BB"]), {"AA": 3, "BB": 7}, {"AA": "DASHED"}))
    assert layers.details == {"names.score": 1.0, "assignment.score": 1.0, "defects": 0.0}


# --------------------------------------------------------------------------- text pruning in huge drawings


def _stacked_texts(offset: float) -> tuple[DrawingMetadata, DrawingMetadata]:
    """Twelve stacked gold texts (more than the matcher's nearest-8) whose candidates all sit
    ``offset`` away, plus ten exact far texts."""
    filler = [TextEntity(content=f"F{i}", insert=(1000 + 20 * i, 0), height=3, layer="T") for i in range(10)]
    stack = [TextEntity(content="A", insert=(0, 0), height=3, layer="T") for _ in range(12)]
    moved = [TextEntity(content="A", insert=(offset, 0), height=3, layer="T") for _ in range(12)]
    return metadata(stack + filler), metadata(moved + filler)


def _text_scores(offset: float, monkeypatch: pytest.MonkeyPatch) -> tuple[float, float]:
    """The text score in full and pruned as a huge drawing's (the pruning threshold lowered
    below this problem's 22 x 22 pairs, instead of building a 250,000-pair drawing)."""
    from autocad_bench_evaluator.scoring import matching

    gold, cand = _stacked_texts(offset)

    def score() -> float:
        return _score(gold, cand, position="fixed", tolerance=Tolerance(geometric=4.0)).components["text"].score

    full = score()
    monkeypatch.setattr(matching, "_PRUNE_PRODUCT", 100)
    return full, score()


@pytest.mark.parametrize("offset", [0.0, 4.0, 5.6], ids=["coincident", "at-tolerance", "in-the-falloff"])
def test_pruning_a_huge_text_problem_never_changes_the_score_within_reach(
        offset: float, monkeypatch: pytest.MonkeyPatch) -> None:
    # Reach is (1 + CREDIT_FALLOFF) x tolerance = 6 here: every candidate that can still earn
    # placement credit stays a candidate of every stacked gold text, however many there are.
    full, pruned = _text_scores(offset, monkeypatch)
    assert pruned == full and full > 0.6


def test_beyond_reach_a_huge_text_problem_matches_only_the_nearest_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    # At 7.2 (beyond the reach of 6) a text earns only its words' half, and in a huge drawing
    # only the 8 nearest candidates of a gold text compete for it (the running-time bound).
    full, pruned = _text_scores(7.2, monkeypatch)
    assert pruned < full


@pytest.mark.parametrize(("area_change", "profile_score"), [(5e-10, 1.0), (3e-9, 0.0)])
def test_a_profile_area_is_allowed_at_least_a_nanounit_at_a_tiny_tolerance(
        area_change: float, profile_score: float) -> None:
    # At tolerance 1e-12 a 25 x 25 square's area tolerance, perimeter times tolerance, would be
    # 1e-10; it has a floor of 1e-9 (float noise in an area of 625 is far below either). A
    # rectangle with the same centroid and perimeter whose area is smaller by d^2 is within it
    # for d^2 = 5e-10 and beyond it (and its falloff) for 3e-9.
    d = math.sqrt(area_change)

    def outline(x0: float, y0: float, x1: float, y1: float) -> PolylineEntity:
        return PolylineEntity(vertices=((x0, y0), (x1, y0), (x1, y1), (x0, y1)), closed=True)

    spec = ScoringSpec(task_id="floor", tolerance=Tolerance(geometric=1e-12))
    report = score_drawing(metadata([outline(0.0, 0.0, 25.0, 25.0)]),
                           metadata([outline(-d / 2, d / 2, 25.0 + d / 2, 25.0 - d / 2)]), spec, VERSION)
    assert report.components["topology"].details["profiles.score"] == profile_score

"""Every number the scoring components report, pinned on a corpus of one-change drawings.

The corpus (:mod:`tests.evaluator.scoring_corpus`) changes one thing of a drawing that holds
every scoreable kind, by an amount inside the tolerance, in the credit falloff or beyond it,
under free and fixed position and other tolerances, weights and options. Each report must equal
its pinned form in ``data/scoring_components.json`` number for number: a changed rule, factor,
tolerance, tie-break or rounding shows up as the cases whose numbers moved.

The pins are not taken on trust: the tests after the pinned comparison derive a sample of them
by hand from the documented rules (credit falloff, text similarity, the Dice measure, the
dimension and 3D parts) and check the pinned values against that derivation.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from typing import Any

import pytest

from tests.evaluator import scoring_corpus as corpus

CASES = corpus.cases()


@cache
def pinned() -> dict[str, Any]:
    return json.loads(corpus.SNAPSHOT.read_text())  # type: ignore[no-any-return]


def _differences(want: Any, got: Any, path: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(want) | set(got), key=str):
            if key not in got:
                out.append(f"{path}.{key}: missing (pinned {want[key]!r})")
            elif key not in want:
                out.append(f"{path}.{key}: unexpected {got[key]!r}")
            else:
                out += _differences(want[key], got[key], f"{path}.{key}")
        return out
    return [] if want == got else [f"{path}: pinned {want!r}, got {got!r}"]


def test_the_pins_cover_exactly_the_corpus() -> None:
    missing = sorted(set(CASES) - set(pinned()))
    stale = sorted(set(pinned()) - set(CASES))
    assert not missing and not stale, (
        f"not pinned: {missing[:10]}; pinned but gone: {stale[:10]} "
        "(python -m tests.evaluator.scoring_corpus --write, then review the diff)"
    )


@pytest.mark.parametrize("key", list(CASES))
def test_the_report_equals_its_pin(key: str) -> None:
    got = json.loads(json.dumps(corpus.report(CASES[key]())))
    problems = _differences(pinned()[key], got)
    assert not problems, f"{key}:\n" + "\n".join(problems[:20])


# --------------------------------------------------------------------------- the pins, derived by hand


def component(key: str, name: str) -> dict[str, Any]:
    return pinned()[key]["components"][name]  # type: ignore[no-any-return]


def credit(err: float) -> float:
    """Credit of a normalised error: 1 up to 1, falling linearly to 0 at 1.5."""
    return min(1.0, max(0.0, (1.5 - err) / 0.5))


def dice(matched: float, gold: int, candidate: int) -> float:
    return min(1.0, 2 * matched / (gold + candidate))


def test_every_report_is_valid_and_bounded() -> None:
    for key, report in pinned().items():
        assert report["valid"] and 0.0 <= report["score"] <= 1.0, key
        for name, comp in report.get("components", {}).items():
            assert 0.0 <= comp["score"] <= 1.0, (key, name)


def test_the_identical_drawing_scores_one_under_every_spec() -> None:
    for key, report in pinned().items():
        if key.startswith(("identical/", "solid-identical/", "gold-none-candidate-none/")):
            assert report["score"] == 1.0 and report["defects"] == 0.0, key


def test_a_text_height_in_the_falloff_earns_its_credit() -> None:
    # height 3 -> 3.4: tolerance min(0.5, 0.1 * 3) = 0.3, error 0.4 / 0.3
    c = credit(0.4 / 0.3)
    text = component("text-height-0.4/fixed", "text")
    assert text["matched"] == pytest.approx(1 + (0.5 + 0.5 * c), abs=1e-6)
    assert text["score"] == pytest.approx(dice(1 + 0.5 + 0.5 * c, 2, 2), abs=1e-6)
    assert text["details"]["placement.score"] == pytest.approx((1 + c) / 2, abs=1e-6)
    # 3 -> 3.2 is inside the 0.3 tolerance
    assert component("text-height-0.2/fixed", "text")["score"] == 1.0


def test_a_changed_text_earns_half_its_similarity() -> None:
    similarity = 0.5 * difflib.SequenceMatcher(None, "plate a", "plate b", autojunk=False).ratio()
    text = component("text-content/fixed", "text")
    assert text["score"] == pytest.approx(dice(1 + similarity, 2, 2), abs=1e-6)
    assert text["details"]["placement.score"] == 1.0
    assert component("text-case-space/fixed", "text")["score"] == 1.0


def test_text_rotation_wraps_and_is_compared_at_half_a_degree() -> None:
    assert component("text-rotation-wrap/fixed", "text")["score"] == 1.0  # 359.8 is 0.2 from 0
    c = credit(0.6 / 0.5)
    assert component("text-rotation-0.6/fixed", "text")["matched"] == pytest.approx(1 + 0.5 + 0.5 * c, abs=1e-6)


def test_a_moved_hole_and_a_scaled_block_earn_the_falloff_credit() -> None:
    # seven circles: six drawn, one in the BOLT block
    assert component("hole-moved-0.6/fixed", "entities")["details"]["circle.matched"] == pytest.approx(6 + credit(1.2))
    assert component("hole-moved-0.4/fixed", "entities")["details"]["circle.matched"] == 7.0
    # block scale tolerance 0.001
    assert component("insert-scale-0.0012/fixed", "entities")["details"]["insert.matched"] == pytest.approx(
        1 + credit(1.2))
    assert component("insert-scale-0.0008/fixed", "entities")["details"]["insert.matched"] == 2.0


def test_an_angular_dimension_off_by_0_6_degrees() -> None:
    dims = component("dim-angular-0.6/fixed", "dimensions")
    part = dice(4 + credit(0.6 / 0.5), 5, 5)
    assert dims["details"]["dimensions.score"] == pytest.approx(part, abs=1e-6)
    assert dims["details"]["sizes.score"] == 1.0
    assert dims["score"] == pytest.approx((part + 1.0) / 2, abs=1e-6)


def test_the_3d_parts_average_with_the_documented_tolerances() -> None:
    # box 40 x 20 x 10: one side 0.6 long is error 1.2 of 0.5
    ext = component("solid-size-0.6/free", "extents3d")
    size = (2 + credit(1.2)) / 3
    assert ext["details"]["size.score"] == pytest.approx(size, abs=1e-6)
    # free: size, volume, area, centroid, bodies
    assert ext["score"] == pytest.approx((size + 4) / 5, abs=1e-6)
    # volume tolerance: geometric * (ab + bh + ha) = 0.5 * 1400
    assert component("solid-volume/free", "extents3d")["details"]["volume.score"] == pytest.approx(credit(1.2))
    # area tolerance: geometric * 4 * (a + b + h) = 0.5 * 280
    assert component("solid-area/free", "extents3d")["details"]["area.score"] == pytest.approx(credit(175 / 140))
    fixed = component("solid-moved-0.6/fixed", "extents3d")
    assert fixed["details"]["position.score"] == pytest.approx(credit(1.2))
    assert component("solid-moved-0.6/free", "extents3d")["score"] == 1.0


def test_a_missing_hole_costs_the_count_and_the_spacings() -> None:
    topo = component("hole-missing/fixed", "topology")
    # seven circles (four of radius 4, two of 2.5, the block's 1.5), six drawn; spacings per
    # radius: 6 + 1 in the gold, 3 + 1 drawn, all of them among the gold's (20, 20, 40)
    assert topo["details"]["holes.count"] == pytest.approx(dice(6, 7, 6), abs=1e-6)
    assert topo["details"]["holes.spacing"] == pytest.approx(dice(3 + 1, 6 + 1, 3 + 1), abs=1e-6)


def test_a_dimension_line_placed_off_its_position_is_half_a_dimension_at_worst() -> None:
    # the line 0.6 below where the gold has it (error 1.2 along its normal): the measurement is
    # right, so the dimension earns 0.5 + 0.5 * credit(1.2)
    line = 0.5 + 0.5 * credit(1.2)
    dims = component("dim-line-offset-0.6/fixed", "dimensions")["details"]
    assert dims["dimensions.score"] == pytest.approx(dice(4 + line, 5, 5), abs=1e-6)
    assert component("dim-line-offset-3/fixed", "dimensions")["details"]["dimensions.score"] == pytest.approx(
        dice(4.5, 5, 5), abs=1e-6)
    # sliding the line along itself moves nothing that a reader sees
    assert component("dim-line-along-itself/fixed", "dimensions")["score"] == 1.0


def test_a_body_without_volume_matches_its_like_and_an_open_one_is_named() -> None:
    # a planar REGION has volume 0: the same region drawn scores in full (it used to be taken
    # for an open surface whenever the gold's volume was 0)
    region = component("gold-region-no-volume/fixed", "extents3d")
    assert region["score"] == 1.0 and "reason" not in region["details"]
    open_body = component("solid-volume-open/fixed", "extents3d")["details"]
    assert open_body["volume.score"] == 0.0 and "not closed surfaces" in open_body["reason"]


def test_a_square_drawn_as_a_rhombus_of_the_same_sides_is_told_by_its_area() -> None:
    # same perimeter (40) and centroid; area 100 against 100 / sqrt(2): error 29.3 / (0.5 * 40)
    area_err = (100 - 100 / 2**0.5) / (0.5 * 40)
    topology = component("square-as-rhombus/fixed", "topology")["details"]
    assert topology["profiles.score"] == pytest.approx(dice(4 + credit(area_err), 5, 5), abs=1e-6)
    assert component("tiny-profile/fixed", "topology")["details"]["profiles.score"] == 1.0


def test_each_entity_error_decides_alone_where_the_others_are_within_tolerance() -> None:
    def matched(key: str, kind: str) -> float:
        return float(component(f"{key}/fixed", "entities")["details"][f"{kind}.matched"])

    # two arcs (the ARC and the bulge); radius 0.6 off while centre and ends are 0.42 off
    assert matched("arc-radius-and-centre", "arc") == pytest.approx(1 + credit(0.6 / 0.5))
    # a solid hatch of area 450 for 400 at the same centroid: tolerance 0.5 * sqrt(400) * 4
    assert matched("hatch-area-centred", "hatch") == pytest.approx(1 + credit(50 / 40), abs=1e-5)
    # block scale along x, and a rotation 0.6 degrees off across the 360 wrap (tolerance 0.5)
    assert matched("insert-scale-x-0.0012", "insert") == pytest.approx(1 + credit(0.0012 / 0.001))
    assert matched("insert-rotation-wrap-0.6", "insert") == pytest.approx(1 + credit(0.6 / 0.5))
    # four curves of the gold plus one shorter than the tolerance, moved 0.7 (its Hausdorff distance)
    assert matched("tiny-spline-moved-0.7", "curve") == pytest.approx(4 + credit(0.7 / 0.5))
    # an arc through the gold's end points, its centre 0.6 off; a hatch of area 0.09 drawn 0.84
    assert matched("arc-centre-same-ends", "arc") == pytest.approx(1 + credit(0.6 / 0.5), abs=1e-5)
    assert matched("tiny-hatch-area", "hatch") == pytest.approx(2 + credit(0.75 / (0.5 * 0.3 * 4)), abs=1e-5)
    curves = component("tiny-spline-moved-2.6/coarse-fixed", "entities")["details"]["curve.matched"]
    assert curves == pytest.approx(4 + credit(2.6 / 2.0))


def test_the_kinds_drawn_count_beside_the_items_even_alone() -> None:
    from autocad_bench_evaluator.metadata import CircleEntity, LineEntity
    from autocad_bench_evaluator.scoring import score_drawing
    from autocad_bench_evaluator.spec import ScoringSpec

    from tests.evaluator.support import metadata

    spec = ScoringSpec(task_id="kinds", position="fixed")
    # one gold circle; the candidate drew a circle of radius 0: no item, the right kind
    one = score_drawing(metadata([CircleEntity(center=(0, 0), radius=4)]),
                        metadata([CircleEntity(center=(0, 0), radius=0)]), spec, "v").components["entities"]
    assert one.score == pytest.approx((0.0 + 1.0) / 2) and one.details["types.score"] == 1.0
    # an empty gold against one line: no item and no kind in common
    empty = score_drawing(metadata([]), metadata([LineEntity(start=(0, 0), end=(5, 0))]), spec, "v")
    assert empty.components["entities"].details["types.score"] == 0.0
    assert empty.components["entities"].score == 0.0

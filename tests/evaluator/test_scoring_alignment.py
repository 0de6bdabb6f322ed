"""Free position and closed outlines: a drawing moved as a whole, or an outline started at
another corner, is the same drawing."""

from __future__ import annotations

import numpy as np
import pytest
from autocad_bench_evaluator.metadata import ArcEntity, CircleEntity, HatchEntity, LineEntity, PolylineEntity
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec

from tests.evaluator.scoring_corpus import drawing, gold_entities, score, shift_entity
from tests.evaluator.support import metadata

# Moves along one axis only, in each direction, by whole and fractional amounts: the
# translation the alignment finds then has a zero component, and a shortcut taken for "no
# move at all" must not be taken for these.
AXIS_MOVES = [(1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0), (0.0, 2.5), (-3.75, 0.0), (12.0, 0.0), (0.0, -40.0)]


@pytest.mark.parametrize(("dx", "dy"), AXIS_MOVES)
def test_a_drawing_moved_along_one_axis_scores_one_in_free_position(dx: float, dy: float) -> None:
    gold = drawing(gold_entities())
    moved = drawing([shift_entity(e, dx, dy) for e in gold_entities()])
    report = score(gold, moved, {})
    assert report["score"] == 1.0, report["components"]
    # the translation that carries the candidate onto the gold
    assert report["translation"] == pytest.approx([-dx, -dy], abs=1e-9)


@pytest.mark.parametrize(("dx", "dy"), AXIS_MOVES)
def test_the_same_move_costs_in_fixed_position(dx: float, dy: float) -> None:
    gold = drawing(gold_entities())
    moved = drawing([shift_entity(e, dx, dy) for e in gold_entities()])
    assert score(gold, moved, {"position": "fixed"})["score"] < 0.9


def _rectangle_from(corner: int) -> list[tuple[float, float]]:
    corners = [(10.0, 10.0), (50.0, 10.0), (50.0, 30.0), (10.0, 30.0)]
    return corners[corner:] + corners[:corner]


@pytest.mark.parametrize("corner", [1, 2, 3])
@pytest.mark.parametrize("position", ["fixed", "free"])
def test_a_closed_outline_drawn_from_another_corner_is_the_same_outline(corner: int, position: str) -> None:
    """A closed profile's perimeter includes its closing edge wherever the drafter started."""
    outline = PolylineEntity(vertices=tuple(_rectangle_from(0)), closed=True, layer="OUTLINE")
    again = outline.model_copy(update={"vertices": tuple(_rectangle_from(corner))})
    report = score(drawing([outline]), drawing([again]), {"position": position})
    assert report["score"] == 1.0, report["components"]


@pytest.mark.parametrize("corner", [1, 2, 3])
def test_a_closed_chain_of_lines_started_at_another_corner_is_the_same_outline(corner: int) -> None:
    def chain(start: int) -> list[LineEntity]:
        ring = _rectangle_from(start)
        return [LineEntity(start=ring[i], end=ring[(i + 1) % 4], layer="OUTLINE") for i in range(4)]

    report = score(drawing(chain(0)), drawing(chain(corner)), {"position": "fixed"})
    assert report["score"] == 1.0, report["components"]
    details = report["components"]["topology"]["details"]
    assert (details["profiles.gold"], details["profiles.candidate"]) == (1, 1)


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (0, 2, 1, 3), (3, 2, 1, 0), (1, 3, 0, 2)])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_closed_chain_of_lines_is_one_profile_whatever_order_and_direction_its_lines_were_drawn(
    order: tuple[int, ...], reverse: bool
) -> None:
    ring = _rectangle_from(0)
    lines = [LineEntity(start=ring[i], end=ring[(i + 1) % 4], layer="OUTLINE") for i in order]
    if reverse:
        lines = [LineEntity(start=e.end, end=e.start, layer="OUTLINE") for e in lines]
    outline = PolylineEntity(vertices=tuple(ring), closed=True, layer="OUTLINE")
    details = score(drawing([outline]), drawing(lines), {"position": "fixed"})["components"]["topology"]["details"]
    assert (details["profiles.gold"], details["profiles.candidate"], details["profiles.score"]) == (1, 1, 1.0)


@pytest.mark.parametrize("start", [1, 2, 3, 4])
def test_a_closed_polyline_that_comes_back_through_its_first_vertex_keeps_its_closing_edge(start: int) -> None:
    """A triangle with a spur out of its first corner and back: wherever the vertex list starts,
    the closing edge (the spur's way back) is part of the perimeter."""
    vertices = [(10.0, 10.0), (50.0, 10.0), (50.0, 30.0), (10.0, 10.0), (0.0, 0.0)]
    outline = PolylineEntity(vertices=tuple(vertices), closed=True, layer="OUTLINE")
    again = outline.model_copy(update={"vertices": tuple(vertices[start:] + vertices[:start])})
    report = score(drawing([outline]), drawing([again]), {"position": "fixed"})
    assert report["score"] == 1.0, report["components"]


@pytest.mark.parametrize("side", [0.05, 0.2, 0.24])
def test_a_small_closed_outline_is_a_profile_of_its_own(side: float) -> None:
    """A closed square of perimeter under one unit (a slot end, a keyway) counts like any other."""
    big = PolylineEntity(vertices=((0.0, 0.0), (40.0, 0.0), (40.0, 20.0), (0.0, 20.0)), closed=True, layer="OUTLINE")
    small = PolylineEntity(vertices=((60.0, 0.0), (60.0 + side, 0.0), (60.0 + side, side), (60.0, side)), closed=True,
                           layer="OUTLINE")
    report = score(drawing([big, small]), drawing([big]), {"position": "fixed"})
    assert report["components"]["topology"]["details"]["profiles.gold"] == 2
    assert report["score"] < 1.0


def test_a_closed_polyline_folded_onto_a_line_encloses_nothing() -> None:
    """Closed, but every vertex on one line: no area, so no profile (its segments still count)."""
    flat = PolylineEntity(vertices=((0.0, 0.0), (10.0, 0.0), (20.0, 0.0)), closed=True, layer="OUTLINE")
    square = PolylineEntity(vertices=((0.0, 5.0), (4.0, 5.0), (4.0, 9.0), (0.0, 9.0)), closed=True, layer="OUTLINE")
    report = score(drawing([flat, square]), drawing([square]), {"position": "fixed"})
    details = report["components"]["topology"]["details"]
    assert (details["profiles.gold"], details["profiles.candidate"], details["profiles.score"]) == (1, 1, 1.0)


def test_a_circle_drawn_as_two_half_arcs_is_a_closed_profile() -> None:
    halves = [ArcEntity(center=(20.0, 20.0), radius=5.0, start_angle=0.0, end_angle=180.0, layer="OUTLINE"),
              ArcEntity(center=(20.0, 20.0), radius=5.0, start_angle=180.0, end_angle=360.0, layer="OUTLINE")]
    details = score(drawing(halves), drawing(halves), {"position": "fixed"})["components"]["topology"]["details"]
    assert (details["profiles.gold"], details["profiles.candidate"]) == (1, 1)


def test_a_scribble_of_endpoints_too_dense_to_snap_leaves_the_outlines_unrecognised() -> None:
    """The documented bound: past 400,000 endpoint pairs within the tolerance (a scribble of
    hundreds of tiny strokes in one spot) no closed chain of lines is recognised as a profile,
    so a pathological drawing costs bounded time; below it the same outline is one."""
    ring = _rectangle_from(0)
    outline = [LineEntity(start=ring[i], end=ring[(i + 1) % 4], layer="OUTLINE") for i in range(4)]

    def scribble(strokes: int) -> list[LineEntity]:
        return [LineEntity(start=(100 + i * 1e-4, 100.0), end=(100 + i * 1e-4, 100.05), layer="OUTLINE")
                for i in range(strokes)]

    def profiles(strokes: int) -> int:
        drawn = drawing(outline + scribble(strokes))
        details = score(drawn, drawn, {"position": "fixed"})["components"]["topology"]["details"]
        return int(details.get("profiles.gold", 0))

    # 2 x 320 endpoints within 0.5 of each other: 640^2 = 409,600 pairs; 2 x 300: 360,000
    assert (profiles(300), profiles(320)) == (1, 0)


@pytest.mark.parametrize("zero_length_corner", [False, True])
@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (0, 2, 1, 3)])
def test_an_outline_among_hundreds_of_other_lines_is_still_a_profile(
    zero_length_corner: bool, order: tuple[int, ...]
) -> None:
    """Past 256 snapped ends (Python's small integers: an identity test on node numbers would
    pass below that and fail above), a closed chain of lines is walked like any other, with or
    without a stroke at one of its corners short enough to snap to a point."""
    others = [LineEntity(start=(float(i), 0.0), end=(float(i), 0.5), layer="OUTLINE") for i in range(300)]
    ring = [(1000.0, 1000.0), (1040.0, 1000.0), (1040.0, 1020.0), (1000.0, 1020.0)]
    outline = [LineEntity(start=ring[i], end=ring[(i + 1) % 4], layer="OUTLINE") for i in order]
    if zero_length_corner:
        # shorter than the tolerance: both its ends snap onto the corner
        outline.append(LineEntity(start=ring[2], end=(ring[2][0] + 0.01, ring[2][1]), layer="OUTLINE"))
    drawn = drawing(others + outline)
    details = score(drawn, drawn, {"position": "fixed"})["components"]["topology"]["details"]
    assert details["profiles.gold"] == 1


def test_a_hatch_loop_folded_onto_a_line_adds_no_area() -> None:
    # a small loop and a flat one far off: any area or weight given to the flat loop moves the
    # hatch's area and centroid beyond the tolerance
    square = ((0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0))
    flat = ((100.0, 0.0), (200.0, 0.0), (300.0, 0.0))
    plain = HatchEntity(pattern="SOLID", solid=True, boundaries=(square,), layer="HATCH")
    with_flat = plain.model_copy(update={"boundaries": (square, flat)})
    report = score(drawing([plain]), drawing([with_flat]), {"position": "fixed"})
    assert report["score"] == 1.0, report["components"]


def test_a_closed_polyline_with_its_first_vertex_entered_twice_is_the_same_outline() -> None:
    ring = _rectangle_from(0)
    outline = PolylineEntity(vertices=tuple(ring), closed=True, layer="OUTLINE")
    doubled = outline.model_copy(update={"vertices": (ring[0], *ring)})
    details = score(drawing([outline]), drawing([doubled]), {"position": "fixed"})["components"]["topology"]["details"]
    assert (details["profiles.gold"], details["profiles.candidate"], details["profiles.score"]) == (1, 1, 1.0)


def test_a_grid_of_exactly_the_vote_cap_aligns_on_every_anchor() -> None:
    """400 holes (the vote cap) vote in full: the grid moved by (13.7, -4.2), listed in another
    order, with one hole missing and one extra, aligns on the true move and matches its 399
    holes. Thinning the votes at 400 already (every other hole of the sorted list) shifts the
    sample by the missing hole and settles one pitch off (381 matched)."""
    holes = [(10.0 * (k % 20), 10.0 * (k // 20)) for k in range(400)]
    moved = [(x + 13.7, y - 4.2) for x, y in [*holes[:199], *holes[200:], (-10.0, 0.0)]]
    moved = [moved[k] for k in np.random.default_rng(3).permutation(len(moved))]
    report = score_drawing(metadata([CircleEntity(center=p, radius=2) for p in holes]),
                           metadata([CircleEntity(center=p, radius=2) for p in moved]),
                           ScoringSpec(task_id="cap"), "v")
    assert report.translation == pytest.approx((-13.7, 4.2), abs=1e-9)
    assert report.components["entities"].details["circle.matched"] == 399.0

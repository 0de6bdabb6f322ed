"""A block reference turned by its block's own symmetry draws the same thing and scores as the
gold; a turn the block does not have, or a block without that symmetry, still fails. The
period itself is checked on hand-made blocks and, as a property, on motifs repeated n times."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.metadata import (
    ArcEntity,
    CircleEntity,
    InsertEntity,
    LineEntity,
    PolylineEntity,
    TextEntity,
)
from autocad_bench_evaluator.scoring.symmetry import rotation_period
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.evaluator.support import score_edited_gold

TASK = "anno-block-bolts"


def _score(tmp_path: Path, edit: Callable[[Any], None]) -> tuple[float, bool]:
    return score_edited_gold(tmp_path, TASK, edit)


def _rotate_inserts(angle: float) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        inserts = list(doc.modelspace().query("INSERT"))
        assert len(inserts) == 4
        for insert in inserts:
            insert.dxf.rotation = angle
    return edit


@pytest.mark.parametrize("angle", [90.0, 180.0, 270.0, -90.0, 89.8])
def test_a_symmetric_block_turned_by_its_symmetry_passes(tmp_path: Path, angle: float) -> None:
    # The bolt symbol (a circle and two crossing centre lines) looks the same every quarter turn,
    # and the prompt states no rotation.
    assert _score(tmp_path, _rotate_inserts(angle)) == (1.0, True)


@pytest.mark.parametrize("angle", [45.0, 30.0, 91.0])
def test_a_turn_the_block_does_not_have_fails(tmp_path: Path, angle: float) -> None:
    score, passed = _score(tmp_path, _rotate_inserts(angle))
    assert not passed and score < 0.95


def test_a_block_made_asymmetric_and_turned_fails(tmp_path: Path) -> None:
    def edit(doc: Any) -> None:
        # a tick on one arm: the block now only looks the same after a full turn
        doc.blocks.get("BOLT_M10").add_line((8, 0), (8, 3))
        _rotate_inserts(90.0)(doc)

    score, passed = _score(tmp_path, edit)
    assert not passed and score < 0.95


def _insert(*items: Any, at: tuple[float, float] = (10.0, 20.0)) -> InsertEntity:
    return InsertEntity(block="B", insert=at, exploded=tuple(items))


def _line(a: tuple[float, float], b: tuple[float, float], at: tuple[float, float] = (10.0, 20.0)) -> LineEntity:
    return LineEntity(start=(a[0] + at[0], a[1] + at[1]), end=(b[0] + at[0], b[1] + at[1]))


def test_periods_of_hand_made_blocks() -> None:
    cross = [_line((-8, 0), (8, 0)), _line((0, -8), (0, 8)), CircleEntity(center=(10, 20), radius=5)]
    assert rotation_period(_insert(*cross), 1e-6) == 90.0
    assert rotation_period(_insert(*cross, _line((8, 0), (8, 3))), 1e-6) == 360.0
    rectangle = PolylineEntity(vertices=((0, 10), (40, 10), (40, 30), (0, 30)), closed=True)
    assert rotation_period(InsertEntity(block="R", insert=(20, 20), exploded=(rectangle,)), 1e-6) == 180.0
    square = PolylineEntity(vertices=((0, 0), (40, 0), (40, 40), (0, 40)), closed=True)
    assert rotation_period(InsertEntity(block="S", insert=(20, 20), exploded=(square,)), 1e-6) == 90.0
    hexagon = PolylineEntity(vertices=tuple((10 * math.cos(math.radians(60 * k)), 10 * math.sin(math.radians(60 * k)))
                                            for k in range(6)), closed=True)
    assert rotation_period(InsertEntity(block="H", insert=(0, 0), exploded=(hexagon,)), 1e-6) == 60.0
    for sides, period in ((10, 36.0), (16, 22.5), (7, 360.0)):  # seven is no order tried
        polygon = PolylineEntity(vertices=tuple((10 * math.cos(2 * math.pi * k / sides),
                                                 10 * math.sin(2 * math.pi * k / sides)) for k in range(sides)),
                                 closed=True)
        assert rotation_period(InsertEntity(block="P", insert=(0, 0), exploded=(polygon,)), 1e-6) == period, sides
    # an arc keeps its direction: a half circle is not symmetric, two opposite halves are
    upper = ArcEntity(center=(10, 20), radius=5, start_angle=0, end_angle=180)
    lower = ArcEntity(center=(10, 20), radius=5, start_angle=180, end_angle=360)
    assert rotation_period(_insert(upper), 1e-6) == 360.0
    assert rotation_period(_insert(upper, lower), 1e-6) == 180.0
    # a circle off the insertion point is no symmetry about it
    assert rotation_period(_insert(CircleEntity(center=(15, 20), radius=2)), 1e-6) == 360.0
    # what cannot be examined is not assumed symmetric
    label = TextEntity(content="M10", insert=(10, 20), height=2.5)
    assert rotation_period(_insert(*cross, label), 1e-6) == 360.0
    assert rotation_period(_insert(), 1e-6) == 360.0


coordinate = st.floats(min_value=-50, max_value=50, allow_nan=False).map(lambda v: round(v, 3))


@settings(max_examples=60, deadline=None)
@given(motif=st.lists(st.tuples(coordinate, coordinate, coordinate, coordinate), min_size=1, max_size=6),
       order=st.sampled_from([2, 3, 4, 5, 6, 8, 10, 12, 16, 24]))
def test_a_motif_repeated_n_times_has_a_period_dividing_its_turn(
        motif: list[tuple[float, float, float, float]], order: int) -> None:
    lines = []
    for k in range(order):
        c, s = math.cos(2 * math.pi * k / order), math.sin(2 * math.pi * k / order)
        for x1, y1, x2, y2 in motif:
            lines.append(_line((c * x1 - s * y1, s * x1 + c * y1), (c * x2 - s * y2, s * x2 + c * y2)))
    period = rotation_period(_insert(*lines), 1e-6)
    turn = 360.0 / order
    assert period <= turn + 1e-9
    assert math.isclose(turn / period, round(turn / period), abs_tol=1e-9)


def test_a_block_drawn_a_little_off_symmetric_within_tolerance_still_turns(tmp_path: Path) -> None:
    def edit(doc: Any) -> None:
        circle = doc.blocks.get("BOLT_M10").query("CIRCLE")[0]
        x, y, z = circle.dxf.center
        circle.dxf.center = (x + 0.3, y, z)  # within the 0.5 mm tolerance, wherever it turns
        _rotate_inserts(90.0)(doc)

    assert _score(tmp_path, edit) == (1.0, True)


def _mirror_right_pair(doc: Any) -> None:
    """The two bolts right of x = 100 placed as AutoCAD's MIRROR places them: mirror images of
    the left pair about x = 100 (the reference gets a negative scale factor)."""
    from ezdxf.math import Matrix44

    mirror = Matrix44.translate(-100, 0, 0) @ Matrix44.scale(-1, 1, 1) @ Matrix44.translate(100, 0, 0)
    mirrored = 0
    for insert in doc.modelspace().query("INSERT"):
        x, y, _ = insert.dxf.insert
        if x > 100:
            insert.dxf.insert = (200 - x, y)
            insert.transform(mirror)
            assert insert.dxf.xscale * insert.dxf.yscale < 0
            mirrored += 1
    assert mirrored == 2


def test_a_symmetric_block_placed_by_mirror_passes(tmp_path: Path) -> None:
    assert _score(tmp_path, _mirror_right_pair) == (1.0, True)


def test_an_asymmetric_block_placed_by_mirror_fails(tmp_path: Path) -> None:
    def edit(doc: Any) -> None:
        doc.blocks.get("BOLT_M10").add_line((8, 0), (8, 3))
        _mirror_right_pair(doc)

    score, passed = _score(tmp_path, edit)
    assert not passed and score < 0.95


def _drawn(insert: InsertEntity, sx: float, sy: float, rotation: float,
           local: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Where the block's points ``local`` land for a reference at ``insert`` with these factors."""
    c, s = math.cos(math.radians(rotation)), math.sin(math.radians(rotation))
    return [(insert.insert[0] + c * x * sx - s * y * sy, insert.insert[1] + s * x * sx + c * y * sy) for x, y in local]


@settings(max_examples=80, deadline=None)
@given(points=st.lists(st.tuples(coordinate, coordinate), min_size=1, max_size=5),
       axis=st.sampled_from([0.0, 30.0, 45.0, 90.0, 135.0]), rotation=st.floats(0, 359).map(lambda v: round(v, 2)),
       scale=st.floats(0.5, 3).map(lambda v: round(v, 3)), flip=st.sampled_from([(-1, 1), (1, -1), (-1, -1)]))
def test_the_unmirrored_reference_draws_what_the_mirrored_one_draws(
        points: list[tuple[float, float]], axis: float, rotation: float, scale: float,
        flip: tuple[int, int]) -> None:
    from autocad_bench_evaluator.scoring.symmetry import unmirrored

    # A block of points made symmetric about ``axis`` (degrees, in the block): each with its mirror image.
    c, s = math.cos(math.radians(2 * axis)), math.sin(math.radians(2 * axis))
    local = [*points, *((c * x + s * y, s * x - c * y) for x, y in points)]
    sx, sy = scale * flip[0], scale * flip[1]
    at = (10.0, 20.0)
    insert = InsertEntity(block="B", insert=at, scale=(sx, sy, 1.0), rotation=rotation, exploded=tuple(
        LineEntity(start=p, end=p) for p in _drawn(InsertEntity(block="B", insert=at), sx, sy, rotation, local)))
    # (zero-length lines: points the symmetry check can see)
    ux, uy, turn = unmirrored(insert, 1e-4)
    assert ux > 0 and uy > 0
    unmirrored_points = _drawn(insert, ux, uy, turn, local)
    mirrored_points = _drawn(insert, sx, sy, rotation, local)
    for a, b in ((unmirrored_points, mirrored_points), (mirrored_points, unmirrored_points)):
        assert all(min(math.dist(p, q) for q in b) <= 1e-3 for p in a)

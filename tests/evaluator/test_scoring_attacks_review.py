"""Attempts a cheating or careless agent could make, found by a red-team review of the scorer:
the value a dimension shows is what the drawing states; a radius dimension is not a diameter
dimension; an invisible entity is not drawn; a circle tilted out of the drawing plane is not a
circle in plan; a text centred (right-justified, top-aligned) on the required start point is
not text starting there, while FIT and ALIGNED text running from it is. Each attack edits the
shipped gold drawing of a suite task and goes through the public evaluation, as an attempt
would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ezdxf
import pytest
from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE

from tests.evaluator.support import score_edited_gold

_score = score_edited_gold


def _dimensions(doc: Any) -> list[Any]:
    dims = list(doc.modelspace().query("DIMENSION"))
    assert dims
    return dims


def _override_text(*texts: str) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        for dim, text in zip(_dimensions(doc), texts, strict=False):
            dim.dxf.text = text
    return edit


def _linear_factor(factor: float) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        for dim in _dimensions(doc):
            override = dim.override()
            override.update({"dimlfac": factor})
            override.commit()
            override.render()
    return edit


def test_the_unedited_gold_scores_full(tmp_path: Path) -> None:
    assert _score(tmp_path, "anno-dim-linear", lambda doc: None) == (1.0, True)


@pytest.mark.parametrize(("name", "edit"), [
    ("the value overridden by a wrong number", _override_text("999", "45")),
    ("the value replaced by a word", _override_text("WIDTH", "HEIGHT")),
    ("the value hidden by a single space", _override_text(" ", " ")),
    ("every length shown twice as long (DIMLFAC 2)", _linear_factor(2.0)),
])
def test_a_dimension_that_shows_a_wrong_value_fails(tmp_path: Path, name: str, edit: Callable[[Any], None]) -> None:
    score, passed = _score(tmp_path, "anno-dim-linear", edit)
    assert not passed and score < 0.95, name


@pytest.mark.parametrize(("name", "edit"), [
    ("the measurement with a suffix", _override_text("<> mm", "<> mm")),
    ("the measured values typed by hand", None),
    ("a linear factor of one, stated", _linear_factor(1.0)),
])
def test_a_dimension_that_shows_the_measured_value_passes(
        tmp_path: Path, name: str, edit: Callable[[Any], None] | None) -> None:
    if edit is None:
        doc = ezdxf.readfile(SHIPPED_GOLD_CACHE / EVALUATOR_VERSION / "anno-dim-linear" / "gold.dxf")
        typed = [f"{d.get_measurement():g}" for d in _dimensions(doc)]
        edit = _override_text(*typed)
    assert _score(tmp_path, "anno-dim-linear", edit) == (1.0, True), name


def test_a_radius_and_a_diameter_dimension_swapped_fail(tmp_path: Path) -> None:
    def swap(doc: Any) -> None:
        # The first circle gets a diameter dimension, the second a radius one: R and Ø
        # swapped, as the prompt asks the other way round.
        # The points are picked where the gold's are (its radius dimension at 45 degrees, its
        # diameter dimension's picked point at 45 degrees): only the type differs.
        msp = doc.modelspace()
        circles = sorted(msp.query("CIRCLE"), key=lambda c: c.dxf.center.x)
        for dim in _dimensions(doc):
            msp.delete_entity(dim)
        first, second = circles[0], circles[1]
        msp.add_diameter_dim(center=first.dxf.center, radius=first.dxf.radius, angle=225).render()
        msp.add_radius_dim(center=second.dxf.center, radius=second.dxf.radius, angle=45).render()

    score, passed = _score(tmp_path, "anno-dim-radial", swap)
    assert not passed and score < 0.95


def test_entities_drawn_invisible_are_not_drawn(tmp_path: Path) -> None:
    def hide(doc: Any) -> None:
        for entity in doc.modelspace():
            entity.dxf.invisible = 1

    score, passed = _score(tmp_path, "anno-layers-plate", hide)
    assert not passed and score < 0.5


@pytest.mark.parametrize(("normal", "passes"), [
    ((1.0, 0.0, 0.0), False),  # edge on: two vertical segments in plan
    ((0.0, 0.6, 0.8), False),  # tilted: two ellipses in plan
    ((0.0, 0.0, -1.0), True),  # mirrored coordinate system: the same circles in plan
])
def test_circles_out_of_the_drawing_plane_are_not_circles_in_plan(
        tmp_path: Path, normal: tuple[float, float, float], passes: bool) -> None:
    def tilt(doc: Any) -> None:
        from ezdxf.math import OCS

        for circle in doc.modelspace().query("CIRCLE"):
            world = circle.dxf.center  # the centre stays where it is in the world
            circle.dxf.extrusion = normal
            circle.dxf.center = OCS(normal).from_wcs(world)

    score, passed = _score(tmp_path, "draft-concentric-s2026-00", tilt)
    assert passed is passes and (score == 1.0) is passes


def _refill(fill: Callable[[Any], None]) -> Callable[[Any], None]:
    """Replace the gold's one hatch (a solid 100 x 60 rectangle at (50, 50)) by ``fill``'s."""
    def edit(doc: Any) -> None:
        msp = doc.modelspace()
        (hatch,) = msp.query("HATCH")
        msp.delete_entity(hatch)
        fill(msp)
    return edit


def _patches_either_side(msp: Any) -> None:
    # One hatch of two 50 x 60 patches outside the rectangle, left and right: its area and centroid.
    hatch = msp.add_hatch(color=7)
    for x0 in (0.0, 150.0):
        hatch.paths.add_polyline_path([(x0, 50), (x0 + 50, 50), (x0 + 50, 110), (x0, 110)], is_closed=True)


def _disc_of_equal_area(msp: Any) -> None:
    import math

    hatch = msp.add_hatch(color=7)
    radius = math.sqrt(100 * 60 / math.pi)
    edges = hatch.paths.add_edge_path()
    edges.add_arc((100, 80), radius, 0, 360)


def _gradient(msp: Any) -> None:
    hatch = msp.add_hatch(color=7)
    hatch.paths.add_polyline_path([(50, 50), (150, 50), (150, 110), (50, 110)], is_closed=True)
    hatch.set_gradient((255, 0, 0), (0, 0, 255), name="LINEAR")


def _solid_again(msp: Any) -> None:
    hatch = msp.add_hatch(color=7)
    hatch.paths.add_polyline_path([(50, 50), (150, 50), (150, 110), (50, 110)], is_closed=True)


@pytest.mark.parametrize(("fill", "passes"), [
    (_patches_either_side, False),
    (_disc_of_equal_area, False),
    (_gradient, False),
    (_solid_again, True),  # the same fill drawn anew: still the gold
])
def test_a_hatch_is_the_fill_asked_for_where_it_was_asked_for(
        tmp_path: Path, fill: Callable[[Any], None], passes: bool) -> None:
    score, passed = _score(tmp_path, "anno-hatch-solid", _refill(fill))
    assert passed is passes and (score == 1.0) is passes, (fill.__name__, score)


def _as_array(block_name: str | None) -> Callable[[Any], None]:
    """The polar array of the task's holes (radius 5, 8 of them about (235, 100)) stored as AutoCAD's
    ARRAYPOLAR stores an associative one: one reference to a block of the items, each item a
    reference to a block holding the source hole; unnamed (``*U``) blocks as AutoCAD makes them,
    or blocks with names when ``block_name`` is given."""
    import math

    def edit(doc: Any) -> None:
        msp = doc.modelspace()
        holes = [c for c in msp.query("CIRCLE") if abs(c.dxf.radius - 5.0) < 1e-9]
        assert len(holes) == 8
        for hole in holes:
            msp.delete_entity(hole)
        if block_name is None:
            item, array = doc.blocks.new_anonymous_block("U"), doc.blocks.new_anonymous_block("U")
        else:
            item, array = doc.blocks.new(f"{block_name}_ITEM"), doc.blocks.new(block_name)
        item.add_circle((310.0, 100.0), 5.0)
        cx, cy = 235.0, 100.0
        for k in range(8):
            turn = math.radians(45 * k)
            at = (cx - (math.cos(turn) * cx - math.sin(turn) * cy), cy - (math.sin(turn) * cx + math.cos(turn) * cy))
            array.add_blockref(item.name, at, dxfattribs={"rotation": 45 * k})
        msp.add_blockref(array.name, (0, 0))
    return edit


def test_an_associative_array_as_autocad_stores_it_is_the_array_drawn(tmp_path: Path) -> None:
    assert _score(tmp_path, "edit-polar-array-s2026-00", _as_array(None)) == (1.0, True)


def test_the_same_array_in_a_named_block_is_still_a_block_nobody_asked_for(tmp_path: Path) -> None:
    score, passed = _score(tmp_path, "edit-polar-array-s2026-00", _as_array("HOLES_ARRAY"))
    assert not passed and score < 0.95


def _justify(halign: int, valign: int = 0, *, at_natural_end: bool = False) -> Callable[[Any], None]:
    """Every text given this justification. Its alignment point is the required start point, or
    with ``at_natural_end`` the end of the text's own width from there (ALIGNED and FIT run
    between the two points, so the text is then drawn exactly where the left-justified one is)."""
    from ezdxf.fonts import fonts

    def edit(doc: Any) -> None:
        texts = list(doc.modelspace().query("TEXT"))
        assert len(texts) == 2
        for text in texts:
            x, y, _ = text.dxf.insert
            width = fonts.make_font("txt", text.dxf.height).text_width(text.dxf.text) if at_natural_end else 0.0
            text.dxf.halign, text.dxf.valign = halign, valign
            text.dxf.align_point = (x + width, y)
    return edit


@pytest.mark.parametrize(("name", "halign"), [("fit", 5), ("aligned", 3)])
def test_text_fitted_between_its_start_and_its_end_is_the_left_justified_text(
        tmp_path: Path, name: str, halign: int) -> None:
    assert _score(tmp_path, "anno-text-title", _justify(halign, at_natural_end=True)) == (1.0, True), name


@pytest.mark.parametrize(("name", "halign", "valign"), [
    ("centred on the start point", 1, 0),
    ("ending at the start point", 2, 0),
    ("its middle at the start point", 4, 0),
    ("hanging below the start point", 0, 3),
])
def test_text_justified_to_another_point_of_it_is_not_where_asked(
        tmp_path: Path, name: str, halign: int, valign: int) -> None:
    # The prompt asks for text starting at the point; a text whose centre (end, top) is there
    # is drawn somewhere else, whatever its insertion point says.
    score, passed = _score(tmp_path, "anno-text-title", _justify(halign, valign))
    assert not passed and score < 0.95, name


def _radial_override(radius_text: str, diameter_text: str) -> Callable[[Any], None]:
    """Override the texts of the radial task's radius (R40) and diameter (Ø50) dimensions."""
    def edit(doc: Any) -> None:
        for dim in _dimensions(doc):
            dim.dxf.text = radius_text if dim.dimtype == 4 else diameter_text
    return edit


@pytest.mark.parametrize(("name", "radius_text", "diameter_text"), [
    ("a count before the sign", "4X R40", "2x %%c50"),
    ("a count and a note", "2 x R40 TYP.", "2X \u00d850 THRU"),
    ("the signs alone", "R40", "%%c50"),
])
def test_a_radial_dimension_shows_the_size_after_its_sign_whatever_comes_before(
        tmp_path: Path, name: str, radius_text: str, diameter_text: str) -> None:
    assert _score(tmp_path, "anno-dim-radial", _radial_override(radius_text, diameter_text)) == (1.0, True), name


@pytest.mark.parametrize(("name", "radius_text", "diameter_text"), [
    ("a count of the right size's number", "40X R2", "50x %%c3"),
    ("the wrong size after the sign", "4X R45", "2x %%c55"),
])
def test_a_radial_dimension_whose_sign_shows_another_size_fails(
        tmp_path: Path, name: str, radius_text: str, diameter_text: str) -> None:
    score, passed = _score(tmp_path, "anno-dim-radial", _radial_override(radius_text, diameter_text))
    assert not passed and score < 0.95, name


def _each_text(change: Callable[[Any], None]) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        texts = list(doc.modelspace().query("TEXT"))
        assert len(texts) == 2
        for text in texts:
            change(text)
    return edit


def _run_to(halign: int, dx: float, dy: float) -> Callable[[Any], None]:
    """ALIGNED or FIT from the required start point to a point ``(dx, dy)`` away."""
    def change(text: Any) -> None:
        x, y, _ = text.dxf.insert
        text.dxf.halign = halign
        text.dxf.align_point = (x + dx, y + dy)
    return change


def _seen_from_below(text: Any) -> None:
    x, y, z = text.dxf.insert
    text.dxf.extrusion = (0, 0, -1)
    text.dxf.insert = (-x, y, z)  # the same point in the mirrored coordinate system


@pytest.mark.parametrize(("name", "change"), [
    ("FIT stretched 500 mm long", _run_to(5, 500, 0)),
    ("ALIGNED run 500 mm long (drawn 55 mm tall)", _run_to(3, 500, 0)),
    ("FIT run straight up", _run_to(5, 0, 200)),
    ("FIT run backwards", _run_to(5, -100, 0)),
    ("ALIGNED squeezed to a thousandth of a millimetre", _run_to(3, 0.001, 0)),
    ("ten times as wide", lambda text: setattr(text.dxf, "width", 10.0)),
    ("half again as wide", lambda text: setattr(text.dxf, "width", 1.5)),
    ("drawn backwards", lambda text: setattr(text.dxf, "text_generation_flag", 2)),
    ("drawn upside down", lambda text: setattr(text.dxf, "text_generation_flag", 4)),
    ("seen from below (mirrored)", _seen_from_below),
])
def test_text_drawn_out_of_shape_is_not_the_text_asked_for(
        tmp_path: Path, name: str, change: Callable[[Any], None]) -> None:
    score, passed = _score(tmp_path, "anno-text-title", _each_text(change))
    assert not passed and score < 0.95, name


def test_a_text_a_little_wider_is_still_the_text(tmp_path: Path) -> None:
    assert _score(tmp_path, "anno-text-title", _each_text(lambda text: setattr(text.dxf, "width", 1.2))) == (1.0, True)


@pytest.mark.parametrize(("name", "radius_text", "diameter_text"), [
    ("no space after the count", "4XR40", "2x%%c50"),
    ("the count on a line of its own", "2 PLCS\\PR40", "2 HOLES\\P%%c50"),
    ("AutoCAD's unicode diameter sign", "R40", "2X \\U+220550"),
    ("ISO and JIS diameter signs", "4-R40", "2-\u03a650"),
    ("the size shown by the other sign", "%%c80", "R25"),
])
def test_more_ways_to_show_the_right_radial_size_pass(
        tmp_path: Path, name: str, radius_text: str, diameter_text: str) -> None:
    assert _score(tmp_path, "anno-dim-radial", _radial_override(radius_text, diameter_text)) == (1.0, True), name


@pytest.mark.parametrize(("name", "radius_text", "diameter_text"), [
    ("no space after a count of the right number", "40XR2", "50X%%c3"),
    ("the right number under the other sign", "%%c40", "R50"),
])
def test_more_ways_to_show_a_wrong_radial_size_fail(
        tmp_path: Path, name: str, radius_text: str, diameter_text: str) -> None:
    score, passed = _score(tmp_path, "anno-dim-radial", _radial_override(radius_text, diameter_text))
    assert not passed and score < 0.95, name

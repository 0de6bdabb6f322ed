"""ScreenGeometry: exact corner/centre mapping, round trips, vendor limit fits, PNG scaling."""

from __future__ import annotations

import builtins
import io
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocad_bench.errors import MissingExtraError
from autocad_bench.providers import geometry as geometry_module
from autocad_bench.providers.geometry import (
    ANTHROPIC_MAX_LONG_EDGE,
    ANTHROPIC_MAX_PIXELS,
    OPENAI_HIGH_DETAIL_MAX_EDGE,
    OPENAI_HIGH_DETAIL_SHORT_EDGE,
    RESAMPLING,
    ScreenGeometry,
    scale_png,
)
from autocad_bench.providers.models import DisplaySize

DESKTOP = DisplaySize(width=1920, height=1080)


def geometry(width: int, height: int) -> ScreenGeometry:
    return ScreenGeometry(DESKTOP, DisplaySize(width=width, height=height))


@pytest.mark.parametrize(
    ("width", "height"), [(1280, 720), (1024, 576), (1366, 768), (1920, 1080)], ids=str
)
def test_corners_and_centre_map_exactly(width: int, height: int) -> None:
    g = geometry(width, height)
    assert g.to_desktop(0, 0) == (0, 0)
    assert g.to_desktop(width - 1, 0) == (1919, 0)
    assert g.to_desktop(0, height - 1) == (0, 1079)
    assert g.to_desktop(width - 1, height - 1) == (1919, 1079)
    assert g.to_desktop(width // 2, height // 2) == (960, 540)
    assert g.to_shown(0, 0) == (0, 0)
    assert g.to_shown(1919, 1079) == (width - 1, height - 1)
    assert g.to_shown(960, 540) == (width // 2, height // 2)


def test_stated_rounding_rule_values() -> None:
    g = geometry(1280, 720)  # 1.5 desktop pixels per shown pixel
    assert g.to_desktop(1, 1) == (2, 2)  # floor(1.5 * 1.5) = 2
    assert g.to_desktop(2, 2) == (3, 3)  # floor(2.5 * 1.5) = 3
    assert g.to_desktop(100.4, 0) == (151, 0)  # fractions follow the same rule
    assert g.to_desktop(-5, 5000) == (0, 1079)  # clamped
    assert g.to_shown(1919, 0) == (1279, 0)


def test_identity_is_exact_everywhere() -> None:
    g = ScreenGeometry.identity(DESKTOP)
    assert g.is_identity
    for x, y in [(0, 0), (1919, 1079), (960, 540), (17, 1033)]:
        assert g.to_desktop(x, y) == (x, y)
        assert g.to_shown(x, y) == (x, y)


def test_normalized_corners_and_centre() -> None:
    g = geometry(1280, 720)
    assert g.from_normalized(0, 0) == (0, 0)
    assert g.from_normalized(1000, 1000) == (1919, 1079)
    assert g.from_normalized(500, 500) == (960, 540)
    assert g.from_normalized(999, 999) == (1918, 1078)
    assert g.from_normalized(50, 50, scale=100) == (960, 540)


def test_non_finite_coordinates_raise() -> None:
    g = geometry(1280, 720)
    with pytest.raises(ValueError):
        g.to_desktop(float("nan"), 0)
    with pytest.raises(ValueError):
        g.from_normalized(0, float("inf"))


shown_sizes = st.tuples(st.integers(1, 1920), st.integers(1, 1080)).map(lambda s: geometry(*s))


@given(shown_sizes, st.integers(0, 1919), st.integers(0, 1079))
def test_desktop_round_trip_stays_within_one_cell(g: ScreenGeometry, x: int, y: int) -> None:
    back_x, back_y = g.to_desktop(*g.to_shown(x, y))
    # One shown pixel covers W / w desktop pixels; the round trip lands in that cell.
    cell_x = Fraction(g.desktop.width, g.shown.width)
    cell_y = Fraction(g.desktop.height, g.shown.height)
    assert abs(back_x - x) <= cell_x / 2 + Fraction(1, 2)
    assert abs(back_y - y) <= cell_y / 2 + Fraction(1, 2)


@given(shown_sizes, st.data())
def test_shown_round_trip_is_exact_when_downscaling(g: ScreenGeometry, data: st.DataObject) -> None:
    x = data.draw(st.integers(0, g.shown.width - 1))
    y = data.draw(st.integers(0, g.shown.height - 1))
    assert g.to_shown(*g.to_desktop(x, y)) == (x, y)


@given(shown_sizes, st.integers(-5, 1925), st.integers(-5, 1925))
def test_mappings_are_monotone(g: ScreenGeometry, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert g.to_desktop(low, 0)[0] <= g.to_desktop(high, 0)[0]
    assert g.to_shown(low, low)[1] <= g.to_shown(high, high)[1]
    assert g.from_normalized(low, 0)[0] <= g.from_normalized(high, 0)[0]


def test_fit_anthropic_limits() -> None:
    g = ScreenGeometry.fit(DESKTOP, max_long_edge=ANTHROPIC_MAX_LONG_EDGE, max_pixels=ANTHROPIC_MAX_PIXELS)
    assert (g.shown.width, g.shown.height) == (1430, 804)
    assert g.shown.width * g.shown.height <= ANTHROPIC_MAX_PIXELS
    # One more pixel of long edge would break the pixel limit.
    assert ANTHROPIC_MAX_PIXELS < 1431 * 805


def test_fit_openai_high_detail() -> None:
    g = ScreenGeometry.fit(
        DESKTOP, max_long_edge=OPENAI_HIGH_DETAIL_MAX_EDGE, max_short_edge=OPENAI_HIGH_DETAIL_SHORT_EDGE
    )
    assert (g.shown.width, g.shown.height) == (1366, 768)


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"max_width": 1280}, (1280, 720)),
        ({"max_long_edge": 1024}, (1024, 576)),
        ({"max_height": 720}, (1280, 720)),
        ({"max_pixels": 1280 * 720}, (1280, 720)),
        ({"max_long_edge": 4000}, (1920, 1080)),
        ({}, (1920, 1080)),
    ],
)
def test_fit_simple_limits(limits: dict[str, int], expected: tuple[int, int]) -> None:
    g = ScreenGeometry.fit(DESKTOP, **limits)
    assert (g.shown.width, g.shown.height) == expected
    assert g.is_identity == (expected == (1920, 1080))


@given(
    st.integers(1, 4000),
    st.integers(1, 4000),
    st.integers(1, 3000),
    st.integers(1, 10_000_000),
)
def test_fit_respects_limits_and_is_largest(width: int, height: int, edge: int, pixels: int) -> None:
    desktop = DisplaySize(width=width, height=height)
    g = ScreenGeometry.fit(desktop, max_long_edge=edge, max_pixels=pixels)
    long_edge = max(g.shown.width, g.shown.height)
    assert g.shown.width <= width and g.shown.height <= height
    if g.is_identity:
        return
    short_edge = min(g.shown.width, g.shown.height)
    assert long_edge <= edge
    assert g.shown.width * g.shown.height <= pixels or short_edge == 1
    grown = ScreenGeometry.fit(desktop, max_long_edge=long_edge + 1, max_pixels=10**12)
    bigger = grown.shown
    assert max(bigger.width, bigger.height) > edge or bigger.width * bigger.height > pixels


def test_fit_rejects_non_positive_limits() -> None:
    with pytest.raises(ValueError):
        ScreenGeometry.fit(DESKTOP, max_pixels=0)


def test_smart_resize_frames() -> None:
    assert ScreenGeometry.smart_resize(DESKTOP).shown == DisplaySize(width=1932, height=1092)
    assert ScreenGeometry.smart_resize(DESKTOP, factor=32).shown == DisplaySize(width=1920, height=1088)
    small = ScreenGeometry.smart_resize(DESKTOP, max_pixels=1280 * 28 * 28)
    assert small.shown.width % 28 == 0 and small.shown.height % 28 == 0
    assert small.shown.width * small.shown.height <= 1280 * 28 * 28


def test_scale_png_identity_returns_same_bytes_without_pillow(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_pillow(name: str, *args: object, **kwargs: object) -> object:
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError("no PIL")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_pillow)
    data = b"\x89PNG not even decoded"
    assert scale_png(data, ScreenGeometry.identity(DESKTOP)) is data
    hint = r"Pillow .* is not installed: pip install \"autocad-bench\[openweight\]\""
    with pytest.raises(MissingExtraError, match=hint):
        scale_png(data, geometry(1280, 720))


def test_scale_png_resizes_with_lanczos() -> None:
    image_module = pytest.importorskip("PIL.Image")
    assert RESAMPLING == "LANCZOS" and hasattr(image_module.Resampling, RESAMPLING)
    buffer = io.BytesIO()
    image_module.new("RGB", (1920, 1080), (10, 200, 30)).save(buffer, format="PNG")
    scaled = scale_png(buffer.getvalue(), geometry(1280, 720))
    with image_module.open(io.BytesIO(scaled)) as image:
        assert image.size == (1280, 720)
        assert image.getpixel((640, 360)) == (10, 200, 30)
    with pytest.raises(ValueError, match="expected the desktop size"):
        scale_png(scaled, geometry(1024, 576))


def test_module_constants_are_documented() -> None:
    assert geometry_module.ANTHROPIC_MAX_LONG_EDGE == 1568
    assert geometry_module.OPENAI_HIGH_DETAIL_SHORT_EDGE == 768

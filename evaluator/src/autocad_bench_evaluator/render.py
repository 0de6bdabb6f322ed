"""Deterministic raster renders of drawing metadata with Pillow.

Gold and candidate are rendered into the SAME :class:`View` (the union of their extents with a
fixed pixel margin on a fixed canvas, 1600x1200 by default), so their pixels are comparable
and :mod:`autocad_bench_evaluator.diff` can overlay them. Curves are sampled with the same
fixed step as the scorer, texts use Pillow's built-in bitmap font (no system fonts, so output
does not vary between machines), and PNG bytes carry no metadata or timestamps: the same
input gives the same bytes with the same Pillow version.

Rendering never raises for odd geometry; entities without drawable geometry are skipped.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from autocad_bench_evaluator.geometry import Point, polyline_points, sample_arc, sample_circle
from autocad_bench_evaluator.metadata import (
    ArcEntity,
    CircleEntity,
    DimensionEntity,
    DrawingMetadata,
    EllipseEntity,
    Entity,
    Extents2D,
    HatchEntity,
    InsertEntity,
    LineEntity,
    PointEntity,
    PolylineEntity,
    Primitive,
    SolidEntity,
    SplineEntity,
    TextEntity,
    ellipse_points,
)

CANVAS_SIZE = (1600, 1200)
MARGIN_PX = 40
LINE_WIDTH = 2
INK = 0
BACKGROUND = 255


@dataclass(frozen=True, slots=True)
class View:
    """Maps drawing coordinates to pixels: uniform scale, Y up, centred in the canvas."""

    min_x: float
    min_y: float
    scale: float
    width: int
    height: int
    offset_x: float
    offset_y: float

    def to_px(self, p: Point) -> tuple[float, float]:
        """Pixel position of drawing point ``p`` (rounded to 1/100 px for stable output)."""
        x = self.offset_x + (p[0] - self.min_x) * self.scale
        y = self.height - (self.offset_y + (p[1] - self.min_y) * self.scale)
        return (round(x, 2), round(y, 2))


def view_for(extents: Iterable[Extents2D | None], size: tuple[int, int] = CANVAS_SIZE, margin: int = MARGIN_PX) -> View:
    """The view that shows the union of ``extents`` (a unit box when all are empty)."""
    boxes = [e for e in extents if e is not None]
    if boxes:
        lo_x = min(b.min[0] for b in boxes)
        lo_y = min(b.min[1] for b in boxes)
        hi_x = max(b.max[0] for b in boxes)
        hi_y = max(b.max[1] for b in boxes)
    else:
        lo_x, lo_y, hi_x, hi_y = 0.0, 0.0, 1.0, 1.0
    span_x = max(hi_x - lo_x, 1e-9)
    span_y = max(hi_y - lo_y, 1e-9)
    if span_x <= 1e-9 and span_y <= 1e-9:
        span_x = span_y = 1.0
        lo_x -= 0.5
        lo_y -= 0.5
    width, height = size
    scale = min((width - 2 * margin) / span_x, (height - 2 * margin) / span_y)
    offset_x = (width - span_x * scale) / 2
    offset_y = (height - span_y * scale) / 2
    return View(lo_x, lo_y, scale, width, height, offset_x, offset_y)


def translated_extents(metadata: DrawingMetadata, translation: Point) -> Extents2D | None:
    """``metadata.extents`` moved by ``translation`` (the scorer's alignment)."""
    ext = metadata.extents
    if ext is None:
        return None
    dx, dy = translation
    return Extents2D(min=(ext.min[0] + dx, ext.min[1] + dy), max=(ext.max[0] + dx, ext.max[1] + dy))


_FONT: ImageFont.ImageFont | None = None


def bitmap_font() -> ImageFont.ImageFont:
    """Pillow's built-in bitmap font (identical on every machine)."""
    global _FONT
    if _FONT is None:
        _FONT = ImageFont.load_default_imagefont()
    return _FONT


class _Painter:
    def __init__(self, draw: ImageDraw.ImageDraw, view: View, translation: Point, ink: int):
        self.draw = draw
        self.view = view
        self.dx, self.dy = translation
        self.ink = ink

    def px(self, p: Point) -> tuple[float, float]:
        return self.view.to_px((p[0] + self.dx, p[1] + self.dy))

    def path(self, points: Sequence[Point]) -> None:
        if len(points) < 2:
            return
        self.draw.line([self.px(p) for p in points], fill=self.ink, width=LINE_WIDTH, joint=None)

    def entity(self, e: Entity | Primitive) -> None:
        if isinstance(e, LineEntity):
            self.path([e.start, e.end])
        elif isinstance(e, CircleEntity):
            self.path(sample_circle(e.center, e.radius))
        elif isinstance(e, ArcEntity):
            self.path(sample_arc(e.center, e.radius, e.start_angle, e.end_angle))
        elif isinstance(e, PolylineEntity):
            self.path(polyline_points(e.vertices, e.bulges, e.closed))
        elif isinstance(e, EllipseEntity):
            self.path(ellipse_points(e))
        elif isinstance(e, SplineEntity):
            self.path(list(e.points))
        elif isinstance(e, PointEntity):
            x, y = self.px(e.location)
            self.draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=self.ink)
        elif isinstance(e, TextEntity):
            self.text(e)
        elif isinstance(e, HatchEntity):
            for loop in e.boundaries:
                if len(loop) < 3:
                    continue
                pts = [self.px(p) for p in loop]
                if e.solid:
                    self.draw.polygon(pts, fill=self.ink)
                else:
                    self.draw.line([*pts, pts[0]], fill=self.ink, width=1)
        elif isinstance(e, SolidEntity):
            if e.extents is not None:
                lo, hi = e.extents.min, e.extents.max
                self.path([(lo[0], lo[1]), (hi[0], lo[1]), (hi[0], hi[1]), (lo[0], hi[1]), (lo[0], lo[1])])
        elif isinstance(e, InsertEntity):
            for sub in e.exploded:
                self.entity(sub)
        elif isinstance(e, DimensionEntity):
            for sub in e.graphics:
                self.entity(sub)

    def text(self, e: TextEntity) -> None:
        content = e.content.replace("\n", " ").strip()
        if not content:
            return
        safe = content.encode("latin-1", errors="replace").decode("latin-1")[:200]
        x, y = self.px(e.insert)
        # bitmap glyphs are 11 px tall; anchor the baseline at the insertion point
        self.draw.text((round(x), round(y) - 11), safe, fill=self.ink, font=bitmap_font())


def render_image(
    metadata: DrawingMetadata,
    view: View,
    *,
    translation: Point = (0.0, 0.0),
) -> Image.Image:
    """A greyscale ("L") image, black ink on white, of the model space of ``metadata`` in
    ``view`` (moved by ``translation``). Greyscale keeps PNG encoding fast and small."""
    image = Image.new("L", (view.width, view.height), BACKGROUND)
    painter = _Painter(ImageDraw.Draw(image), view, translation, INK)
    for entity in metadata.model.entities:
        painter.entity(entity)
    return image


def ink_mask(image: Image.Image) -> Image.Image:
    """The "L" ink mask (255 = ink) of a render made by :func:`render_image`."""
    return image.convert("L").point(lambda v: 255 if v < 128 else 0)


def render_mask(metadata: DrawingMetadata, view: View, *, translation: Point = (0.0, 0.0)) -> Image.Image:
    """A mode-"L" ink mask (255 = ink) of the model space, for diffs."""
    image = Image.new("L", (view.width, view.height), 0)
    painter = _Painter(ImageDraw.Draw(image), view, translation, 255)
    for entity in metadata.model.entities:
        painter.entity(entity)
    return image


def png_bytes(image: Image.Image) -> bytes:
    """PNG encoding without metadata chunks (deterministic for a given Pillow version)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=3)
    return buffer.getvalue()


def render_png(
    metadata: DrawingMetadata,
    view: View | None = None,
    *,
    translation: Point = (0.0, 0.0),
) -> bytes:
    """PNG bytes of ``metadata`` in ``view`` (default: its own extents on the fixed canvas)."""
    view = view or view_for([translated_extents(metadata, translation)])
    return png_bytes(render_image(metadata, view, translation=translation))

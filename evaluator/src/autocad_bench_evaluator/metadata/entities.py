"""The entity models of drawing metadata: one model per scoreable entity type (LINE, CIRCLE,
ARC, polylines, ELLIPSE, SPLINE, POINT, texts, HATCH, 3D bodies, other types), DIMENSION and
block references (INSERT), the :data:`Primitive` and :data:`Entity` unions, and the number
rounding every coordinate goes through (:data:`MAX_COORDINATE`, ``_round``, ``_p2``, ``_p3``).

Coordinates are world coordinates (WCS) projected on the XY plane, in drawing units.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field

from autocad_bench.models import StrictModel
from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.metadata.limits import BadNumber

Point3 = tuple[float, float, float]


MAX_COORDINATE = 1e20
"""Larger magnitudes (and inf/nan) make the entity holding them unreadable: no real drawing
has them, and bounding them keeps every derived product finite."""


def _round(value: float) -> float:
    # 9 decimals keep sub-nanometre detail while making JSON output stable across platforms
    number = float(value)
    if not math.isfinite(number) or abs(number) > MAX_COORDINATE:
        raise BadNumber(f"non-finite or out-of-range number ({number!r})")
    rounded = round(number, 9)
    return 0.0 if rounded == 0.0 else rounded


def _p2(value: Any) -> Point:
    return (_round(value[0]), _round(value[1]))


def _p3(value: Any) -> Point3:
    return (_round(value[0]), _round(value[1]), _round(value[2]) if len(value) > 2 else 0.0)


class _EntityBase(StrictModel):
    layer: str = "0"
    handle: str | None = None


class LineEntity(_EntityBase):
    """A straight segment (LINE, and the straight parts of exploded blocks)."""

    kind: Literal["LINE"] = "LINE"
    start: Point
    end: Point


class CircleEntity(_EntityBase):
    """A full circle."""

    kind: Literal["CIRCLE"] = "CIRCLE"
    center: Point
    radius: float


class ArcEntity(_EntityBase):
    """A circular arc running counter-clockwise from ``start_angle`` to ``end_angle`` (degrees)."""

    kind: Literal["ARC"] = "ARC"
    center: Point
    radius: float
    start_angle: float
    end_angle: float


class PolylineEntity(_EntityBase):
    """LWPOLYLINE or 2D/3D POLYLINE: vertices, per-vertex bulge (to the next vertex), closed flag."""

    kind: Literal["POLYLINE"] = "POLYLINE"
    source: str = "LWPOLYLINE"
    closed: bool = False
    vertices: tuple[Point, ...]
    bulges: tuple[float, ...] = ()


class EllipseEntity(_EntityBase):
    """An ellipse or elliptical arc (parameters in radians, as in DXF)."""

    kind: Literal["ELLIPSE"] = "ELLIPSE"
    center: Point
    major_axis: Point
    ratio: float
    start_param: float = 0.0
    end_param: float = 2 * math.pi


class SplineEntity(_EntityBase):
    """A spline; ``points`` is a bounded approximation used for scoring and rendering."""

    kind: Literal["SPLINE"] = "SPLINE"
    degree: int = 3
    closed: bool = False
    control_points: tuple[Point, ...] = ()
    fit_points: tuple[Point, ...] = ()
    points: tuple[Point, ...]


class PointEntity(_EntityBase):
    """A POINT."""

    kind: Literal["POINT"] = "POINT"
    location: Point


class TextEntity(_EntityBase):
    """TEXT, MTEXT or a block attribute: plain content, insertion point, height, rotation."""

    kind: Literal["TEXT"] = "TEXT"
    source: str = "TEXT"
    content: str
    insert: Point
    height: float = 0.0
    rotation: float = 0.0
    halign: int = 0
    """TEXT and ATTRIB justification, DXF group 72 (0 left, 1 centre, 2 right, 3 aligned,
    4 middle, 5 fit); ``insert`` is then the point the text is placed by (see the reader).
    MTEXT keeps 0."""
    valign: int = 0
    """TEXT and ATTRIB vertical justification, DXF group 73 (0 baseline, 1 bottom, 2 middle, 3 top)."""
    width_factor: float = 1.0
    """How much wider than its font the text is drawn (DXF group 41; for an ALIGNED or FIT text
    stretched out of shape, its run against its characters: see the reader). MTEXT keeps 1."""
    mirrored: int = 0
    """DXF group 71 bits as drawn: 2 backwards (also a text seen from below), 4 upside down."""


class HatchEntity(_EntityBase):
    """A HATCH: pattern name, solid fill flag and flattened boundary loops."""

    kind: Literal["HATCH"] = "HATCH"
    pattern: str = ""
    solid: bool = False
    boundaries: tuple[tuple[Point, ...], ...] = ()


class Extents3D(StrictModel):
    """An axis-aligned 3D box."""

    min: Point3
    max: Point3

    @property
    def size(self) -> Point3:
        return (self.max[0] - self.min[0], self.max[1] - self.min[1], self.max[2] - self.min[2])


class SolidEntity(_EntityBase):
    """3DSOLID, REGION, BODY, SURFACE, MESH or POLYFACE: extents and volume where measurable.

    ``status`` is ``"unknown"`` (with ``reason``) when the geometry cannot be evaluated here,
    e.g. ACIS data with curved faces or a version ezdxf cannot decode.
    """

    kind: Literal["SOLID3D"] = "SOLID3D"
    source: str
    status: Literal["measured", "unknown"]
    extents: Extents3D | None = None
    volume: float | None = None
    area: float | None = None
    centroid: Point3 | None = None
    reason: str = ""


class OtherEntity(_EntityBase):
    """Any other entity type: counted and listed, not scored."""

    kind: Literal["OTHER"] = "OTHER"
    source: str


Primitive = Annotated[
    LineEntity
    | CircleEntity
    | ArcEntity
    | PolylineEntity
    | EllipseEntity
    | SplineEntity
    | PointEntity
    | TextEntity
    | HatchEntity
    | SolidEntity
    | OtherEntity,
    Field(discriminator="kind"),
]
"""An entity that holds no other entities."""


class DimensionEntity(_EntityBase):
    """A DIMENSION: type, measurement, defining points and its rendered graphics.

    ``dimtype`` is one of linear, aligned, angular, diameter, radius, angular3p, ordinate,
    arc, unknown. ``measurement`` is a length, or degrees for angular types. ``graphics`` is
    the dimension's block geometry, used for rendering only.
    """

    kind: Literal["DIMENSION"] = "DIMENSION"
    dimtype: str
    measurement: float | None = None
    defpoints: tuple[Point, ...] = ()
    text_override: str = ""
    graphics: tuple[Primitive, ...] = ()


class InsertEntity(_EntityBase):
    """A block reference; ``exploded`` holds its contents in world coordinates (nested
    references flattened, layer ``0`` inheriting the reference's layer)."""

    kind: Literal["INSERT"] = "INSERT"
    block: str
    insert: Point
    scale: Point3 = (1.0, 1.0, 1.0)
    rotation: float = 0.0
    attributes: dict[str, str] = Field(default_factory=dict)
    exploded: tuple[Primitive, ...] = ()


Entity = Annotated[
    LineEntity
    | CircleEntity
    | ArcEntity
    | PolylineEntity
    | EllipseEntity
    | SplineEntity
    | PointEntity
    | TextEntity
    | HatchEntity
    | SolidEntity
    | OtherEntity
    | DimensionEntity
    | InsertEntity,
    Field(discriminator="kind"),
]
"""Any entity of a space or a block."""

"""Geometry derived from metadata: primitives with block references exploded
(:func:`iter_primitives`), outline points (:func:`entity_points`, :func:`ellipse_points`), 2D
extents (:func:`extents_of`), the isolated physical 3D extents (:func:`physical_extents`), and
the texts and dimensions of the model space (:func:`texts`, :func:`dimensions`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from autocad_bench_evaluator.geometry import (
    Point,
    bounds,
    polyline_points,
    sample_arc,
    sample_circle,
)
from autocad_bench_evaluator.metadata.drawing import DrawingMetadata, Extents2D, Physical3D
from autocad_bench_evaluator.metadata.entities import (
    ArcEntity,
    CircleEntity,
    DimensionEntity,
    EllipseEntity,
    Entity,
    Extents3D,
    HatchEntity,
    InsertEntity,
    LineEntity,
    Point3,
    PointEntity,
    PolylineEntity,
    Primitive,
    SolidEntity,
    SplineEntity,
    TextEntity,
    _p2,
    _round,
)


def iter_primitives(entities: Iterable[Entity]) -> Iterator[Primitive]:
    """Every primitive of ``entities`` with block references replaced by their exploded
    contents; dimensions are skipped (their graphics are annotation, not geometry)."""
    for entity in entities:
        if isinstance(entity, InsertEntity):
            yield from entity.exploded
        elif isinstance(entity, DimensionEntity):
            continue
        else:
            yield entity


def entity_points(entity: Entity | Primitive) -> list[Point]:
    """Representative outline points of one entity (for extents and rendering bounds)."""
    if isinstance(entity, LineEntity):
        return [entity.start, entity.end]
    if isinstance(entity, CircleEntity):
        return sample_circle(entity.center, entity.radius)
    if isinstance(entity, ArcEntity):
        return sample_arc(entity.center, entity.radius, entity.start_angle, entity.end_angle)
    if isinstance(entity, PolylineEntity):
        return polyline_points(entity.vertices, entity.bulges, entity.closed)
    if isinstance(entity, EllipseEntity):
        return ellipse_points(entity)
    if isinstance(entity, SplineEntity):
        return list(entity.points)
    if isinstance(entity, PointEntity):
        return [entity.location]
    if isinstance(entity, TextEntity):
        return [entity.insert]
    if isinstance(entity, HatchEntity):
        return [p for loop in entity.boundaries for p in loop]
    if isinstance(entity, SolidEntity):
        if entity.extents is None:
            return []
        lo, hi = entity.extents.min, entity.extents.max
        return [(lo[0], lo[1]), (hi[0], hi[1])]
    if isinstance(entity, InsertEntity):
        return [p for sub in entity.exploded for p in entity_points(sub)] or [entity.insert]
    if isinstance(entity, DimensionEntity):
        return [p for sub in entity.graphics for p in entity_points(sub)] or list(entity.defpoints)
    return []


def ellipse_points(entity: EllipseEntity) -> list[Point]:
    """Sampled outline of an ellipse or elliptical arc."""
    cx, cy = entity.center
    mx, my = entity.major_axis
    # minor axis: major rotated +90 degrees, scaled by ratio
    nx, ny = -my * entity.ratio, mx * entity.ratio
    start, end = entity.start_param, entity.end_param
    sweep = (end - start) % (2 * math.pi)
    if sweep < 1e-12:
        sweep = 2 * math.pi
    steps = max(8, math.ceil(math.degrees(sweep) / 5.0))
    out: list[Point] = []
    for i in range(steps + 1):
        t = start + sweep * i / steps
        out.append((cx + mx * math.cos(t) + nx * math.sin(t), cy + my * math.cos(t) + ny * math.sin(t)))
    return out


def extents_of(entities: Iterable[Entity]) -> Extents2D | None:
    """2D extents of ``entities`` (dimension graphics included), or None when empty."""
    box = bounds(p for e in entities for p in entity_points(e))
    if box is None:
        return None
    return Extents2D(min=_p2(box[0]), max=_p2(box[1]))


def physical_extents(entities: Iterable[Entity]) -> Physical3D:
    """Union of the 3D boxes of every solid and mesh (exploded block contents included)."""
    solids = [e for e in iter_primitives(entities) if isinstance(e, SolidEntity)]
    if not solids:
        return Physical3D(status="none")
    measured = [s for s in solids if s.status == "measured" and s.extents is not None]
    unknown = [s for s in solids if s not in measured]
    extents: Extents3D | None = None
    if measured:
        boxes = [s.extents for s in measured if s.extents is not None]
        extents = Extents3D(
            min=(min(b.min[0] for b in boxes), min(b.min[1] for b in boxes), min(b.min[2] for b in boxes)),
            max=(max(b.max[0] for b in boxes), max(b.max[1] for b in boxes), max(b.max[2] for b in boxes)),
        )
    sources = tuple(sorted({s.source for s in solids}))
    volumes = [s.volume for s in measured]
    volume = _round(sum(v for v in volumes if v is not None)) if volumes and None not in volumes else None
    areas = [s.area for s in measured]
    area = _round(sum(a for a in areas if a is not None)) if areas and None not in areas else None
    centroid: Point3 | None = None
    if volume is not None and volume > 0 and all(s.centroid is not None for s in measured):
        weights = [(s.volume or 0.0, s.centroid or (0.0, 0.0, 0.0)) for s in measured]
        total = sum(w for w, _ in weights)
        centroid = (
            _round(sum(w * c[0] for w, c in weights) / total),
            _round(sum(w * c[1] for w, c in weights) / total),
            _round(sum(w * c[2] for w, c in weights) / total),
        )
    if unknown:
        reasons = sorted({s.reason for s in unknown if s.reason})
        return Physical3D(
            status="unknown",
            extents=extents,
            volume=None,
            bodies=len(solids),
            sources=sources,
            reason="; ".join(reasons)[:500],
        )
    return Physical3D(
        status="measured",
        extents=extents,
        volume=volume,
        area=area,
        centroid=centroid,
        bodies=len(solids),
        sources=sources,
    )


def texts(metadata: DrawingMetadata) -> list[TextEntity]:
    """Every text of the model space, block-reference attributes and exploded texts included."""
    out: list[TextEntity] = []
    for entity in metadata.model.entities:
        if isinstance(entity, TextEntity):
            out.append(entity)
        elif isinstance(entity, InsertEntity):
            out.extend(e for e in entity.exploded if isinstance(e, TextEntity))
    return out


def dimensions(metadata: DrawingMetadata) -> list[DimensionEntity]:
    """Every DIMENSION of the model space."""
    return [e for e in metadata.model.entities if isinstance(e, DimensionEntity)]

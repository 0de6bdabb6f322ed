"""The reduction of a drawing to scoreable items (step 1 of scoring): ``_Builder`` turns the
model-space entities into matchable kinds (segments, arcs, circles, points, curves, hatches,
block references), texts, dimensions and closed profiles (closed chains of lines and arcs
included); ``_side`` assembles them with the circle groups, characteristic sizes, layers and
3D extents of one drawing. Also the layer and text normalisation, the hidden layers and the
object type a drafter chose (:func:`object_type`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from autocad_bench_evaluator.geometry import (
    Point,
    bulge_arc,
    path_length,
    polar,
    sample_arc,
    sample_bulge,
)
from autocad_bench_evaluator.metadata import (
    ArcEntity,
    CircleEntity,
    DimensionEntity,
    DrawingMetadata,
    EllipseEntity,
    Entity,
    HatchEntity,
    InsertEntity,
    LineEntity,
    OtherEntity,
    Physical3D,
    PointEntity,
    PolylineEntity,
    Primitive,
    SolidEntity,
    SplineEntity,
    TextEntity,
    ellipse_points,
)
from autocad_bench_evaluator.scoring.symmetry import BlockSymmetry, block_symmetry, unmirrored
from autocad_bench_evaluator.spec import ScoringSpec, Tolerance

Array = NDArray[np.float64]
Index = NDArray[np.intp]

_MAX_SNAP_PAIRS = 400_000


def text_anchor(e: TextEntity) -> float:
    """What a text's ``insert`` is the point of, as a number to compare: 0 for the start of the
    baseline (left-justified TEXT, ALIGNED and FIT, which run from there, and MTEXT, whose
    attachment is not judged), else a code of the justification (the centre, the right end,
    the top ... of the text), plus a code for a text drawn backwards or upside down. The same
    point with another anchor is text somewhere else."""
    mirrored = 1000.0 * e.mirrored  # backwards or upside down: drawn across the point, not from it
    if e.source == "MTEXT" or (e.valign == 0 and e.halign in (0, 3, 5)):
        return mirrored
    return mirrored + float(1 + e.halign + 10 * e.valign)


def _norm_layer(name: str) -> str:
    return name.casefold()


_WS = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Case-folded text with runs of whitespace collapsed (how texts are compared)."""
    return _WS.sub(" ", text).strip().casefold()


@dataclass
class _Kind:
    """Items of one matchable kind: positional data (translated), sizes (not), layers, anchors."""

    pos: Array  # (n, k) coordinates, alternating x/y columns
    size: Array  # (n, m) translation-invariant values
    layers: list[str]
    labels: list[str] = field(default_factory=list)  # block name, hatch pattern, text, dim family
    curves: list[Array] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.layers)

    def anchors(self) -> Array:
        if self.n == 0:
            return np.zeros((0, 2))
        return self.pos[:, 0:2]

    def shifted(self, dx: float, dy: float) -> _Kind:
        if self.n == 0 or (dx == 0.0 and dy == 0.0):
            return self
        offset = np.zeros(self.pos.shape[1])
        offset[0::2] = dx
        offset[1::2] = dy
        curves = [c + np.array([dx, dy]) for c in self.curves]
        return replace(self, pos=self.pos + offset, curves=curves)


@dataclass
class _Side:
    kinds: dict[str, _Kind]
    texts: _Kind
    dims: _Kind
    profiles: _Kind  # pos: centroid; size: area, perimeter
    circles_for_holes: Array  # (n, 3) cx, cy, r
    sizes: dict[str, Array]
    layers: set[str]
    physical: Physical3D | None
    geometry_extents: tuple[Point, Point] | None
    layer_props: dict[str, tuple[int, str]] = field(default_factory=dict)  # colour, linetype
    types: dict[str, int] = field(default_factory=dict)  # object type -> top-level count

    def shifted(self, dx: float, dy: float) -> _Side:
        if dx == 0.0 and dy == 0.0:
            return self
        circles = self.circles_for_holes.copy()
        if len(circles):
            circles[:, 0] += dx
            circles[:, 1] += dy
        ext = self.geometry_extents
        if ext is not None:
            ext = ((ext[0][0] + dx, ext[0][1] + dy), (ext[1][0] + dx, ext[1][1] + dy))
        return replace(
            self,
            kinds={k: v.shifted(dx, dy) for k, v in self.kinds.items()},
            texts=self.texts.shifted(dx, dy),
            dims=self.dims.shifted(dx, dy),
            profiles=self.profiles.shifted(dx, dy),
            circles_for_holes=circles,
            geometry_extents=ext,
        )


class _Builder:
    def __init__(self, tolerance: Tolerance) -> None:
        self.tol = tolerance
        self.rows: dict[str, list[tuple[list[float], list[float], str, str]]] = {
            k: [] for k in ("segment", "arc", "circle", "point", "curve", "hatch", "insert")
        }
        self.curves: list[Array] = []
        self.texts: list[tuple[list[float], list[float], str, str]] = []
        self.dims: list[tuple[list[float], list[float], str, str]] = []
        self.profiles: list[tuple[list[float], list[float], str, str]] = []
        self.chain_edges: list[tuple[Point, Point, list[Point]]] = []
        self.layers: set[str] = set()
        self.extent_points: list[Point] = []
        self._symmetries: dict[tuple[str, tuple[float, float, float]], BlockSymmetry] = {}

    # geometry --------------------------------------------------------------------------

    def segment(self, a: Point, b: Point, layer: str, *, chain: bool) -> None:
        if math.dist(a, b) <= 1e-9:
            return
        # orientation-free storage: endpoints in lexicographic order
        p, q = (a, b) if a <= b else (b, a)
        mid = ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)
        self.rows["segment"].append(([mid[0], mid[1], p[0], p[1], q[0], q[1]], [math.dist(p, q)], layer, ""))
        self.extent_points.extend((a, b))
        if chain:
            self.chain_edges.append((a, b, [a, b]))

    def arc(self, center: Point, radius: float, start: float, end: float, layer: str, *, chain: bool) -> None:
        if radius <= 1e-9:
            return
        s, e = polar(center, radius, start), polar(center, radius, end)
        self.rows["arc"].append(([center[0], center[1], s[0], s[1], e[0], e[1]], [radius], layer, ""))
        pts = sample_arc(center, radius, start, end)
        self.extent_points.extend(pts)
        if chain:
            self.chain_edges.append((s, e, pts))

    def circle(self, center: Point, radius: float, layer: str) -> None:
        if radius <= 1e-9:
            return
        self.rows["circle"].append(([center[0], center[1]], [radius], layer, ""))
        self.extent_points.extend([(center[0] - radius, center[1] - radius), (center[0] + radius, center[1] + radius)])

    def curve(self, points: Sequence[Point], layer: str, closed: bool) -> None:
        if len(points) < 2:
            return
        arr = np.asarray(points, dtype=float)
        c = arr.mean(axis=0)
        length = path_length(points)
        self.rows["curve"].append(([float(c[0]), float(c[1])], [length], layer, ""))
        self.curves.append(arr)
        self.extent_points.extend(points)
        if closed and len(points) >= 3:
            self.profile(list(points), layer)

    def profile(self, ring: list[Point], layer: str) -> None:
        area, cx, cy = _area_centroid(ring)
        perimeter = path_length([*ring, ring[0]] if ring[0] != ring[-1] else ring)
        if area <= 1e-12 or perimeter <= 1e-9:
            return
        self.profiles.append(([cx, cy], [area, perimeter], layer, ""))

    def polyline(self, e: PolylineEntity, layer: str) -> None:
        verts = e.vertices
        count = len(verts)
        if count < 2:
            return
        segments = count if e.closed else count - 1
        for i in range(segments):
            a, b = verts[i], verts[(i + 1) % count]
            bulge = e.bulges[i] if i < len(e.bulges) else 0.0
            if abs(bulge) < 1e-12 or a == b:
                self.segment(a, b, layer, chain=not e.closed)
            else:
                center, radius, start, end = bulge_arc(a, b, bulge)
                self.arc(center, radius, start, end, layer, chain=not e.closed)
        if e.closed and count >= 2:
            ring: list[Point] = [verts[0]]
            for i in range(count):
                bulge = e.bulges[i] if i < len(e.bulges) else 0.0
                ring.extend(sample_bulge(verts[i], verts[(i + 1) % count], bulge)[1:])
            self.profile(ring[:-1], layer)

    def primitive(self, e: Primitive) -> None:
        layer = _norm_layer(e.layer)
        if isinstance(e, TextEntity):
            content = normalize_text(e.content)
            if content:
                self.texts.append(
                    ([e.insert[0], e.insert[1]], [e.height, e.rotation % 360.0, text_anchor(e), e.width_factor],
                     layer, content)
                )
                self.layers.add(layer)
            return
        before = sum(len(v) for v in self.rows.values()) + len(self.profiles)
        if isinstance(e, LineEntity):
            self.segment(e.start, e.end, layer, chain=True)
        elif isinstance(e, CircleEntity):
            self.circle(e.center, e.radius, layer)
        elif isinstance(e, ArcEntity):
            self.arc(e.center, e.radius, e.start_angle, e.end_angle, layer, chain=True)
        elif isinstance(e, PolylineEntity):
            self.polyline(e, layer)
        elif isinstance(e, EllipseEntity):
            closed = abs((e.end_param - e.start_param) % (2 * math.pi)) < 1e-9
            self.curve(ellipse_points(e), layer, closed)
        elif isinstance(e, SplineEntity):
            self.curve(list(e.points), layer, e.closed)
        elif isinstance(e, PointEntity):
            self.rows["point"].append(([e.location[0], e.location[1]], [], layer, ""))
            self.extent_points.append(e.location)
        elif isinstance(e, HatchEntity):
            area, cx, cy, total = 0.0, 0.0, 0.0, 0.0
            filled: list[tuple[Point, ...]] = []
            for loop in e.boundaries:
                if len(loop) >= 3:
                    a, x, y = _area_centroid(list(loop))
                    area += a
                    cx += a * x
                    cy += a * y
                    total += a
                    if a > 0:
                        filled.append(loop)
            if total > 0:
                cx, cy = cx / total, cy / total
            elif e.boundaries and e.boundaries[0]:
                cx, cy = e.boundaries[0][0]
            else:
                return
            pattern = e.pattern.strip().casefold()
            label = "solid" if e.solid or pattern == "solid" else f"pattern:{pattern}"
            # Where the fill reaches, relative to its centroid (a translation moves both): two
            # patches either side of a rectangle, or a disc spilling out of it, can have the
            # rectangle's area and centroid but not its extent.
            # Only loops that enclose area (a loop folded onto a line fills nothing).
            reached = filled or [loop for loop in e.boundaries if loop]
            xs = [p[0] for loop in reached for p in loop]
            ys = [p[1] for loop in reached for p in loop]
            reach = [min(xs) - cx, min(ys) - cy, max(xs) - cx, max(ys) - cy]
            self.rows["hatch"].append(([cx, cy], [area, *reach], layer, label))
        if sum(len(v) for v in self.rows.values()) + len(self.profiles) > before:
            self.layers.add(layer)

    def entity(self, e: Entity) -> None:
        if isinstance(e, InsertEntity):
            layer = _norm_layer(e.layer)
            # A turn by the block's own symmetry draws the same thing (see ``symmetry``); one
            # block at one scale has one period, however often it is inserted.
            key = (e.block.casefold(), e.scale)
            symmetry = self._symmetries.get(key)
            if symmetry is None:
                symmetry = self._symmetries[key] = block_symmetry(e, self.tol.geometric)
            # A mirrored reference that draws what an unmirrored one draws is that one.
            sx, sy, rotation = unmirrored(e, self.tol.geometric, symmetry)
            self.rows["insert"].append(
                (
                    [e.insert[0], e.insert[1]],
                    [sx, sy, rotation, symmetry.period],
                    layer,
                    e.block.casefold(),
                )
            )
            self.layers.add(layer)
            for sub in e.exploded:
                self.primitive(sub)
        elif isinstance(e, DimensionEntity):
            self.dimension(e)
        else:
            self.primitive(e)

    def dimension(self, e: DimensionEntity) -> None:
        if e.measurement is None:
            return
        family, value = _dim_family(e.dimtype, e.measurement)
        points = list(e.defpoints[1:]) or list(e.defpoints)
        if not points:
            return
        px = sum(p[0] for p in points) / len(points)
        py = sum(p[1] for p in points) / len(points)
        # Where the dimension line runs (prompts state it: "dimension line at y = 20"): for linear
        # and aligned dimensions the first definition point lies on it, level with the second
        # extension line's origin, so their difference is the line's normal.
        line, normal = e.defpoints[0] if e.defpoints else (px, py), (0.0, 0.0)
        if e.dimtype in ("linear", "aligned") and len(e.defpoints) >= 3:
            nx, ny = line[0] - e.defpoints[2][0], line[1] - e.defpoints[2][1]
            length = math.hypot(nx, ny)
            if length > 1e-9:
                normal = (nx / length, ny / length)
        layer = _norm_layer(e.layer)
        self.dims.append(([px, py, line[0], line[1]], [value, normal[0], normal[1]], layer, family))
        self.layers.add(layer)

    # closed chains ---------------------------------------------------------------------

    def chain_profiles(self) -> None:
        edges = self.chain_edges
        if len(edges) < 2 or len(edges) > 50_000:
            return
        raw = np.asarray([p for a, b, _ in edges for p in (a, b)], dtype=float)
        # exact duplicates collapse first, so a star of many lines from one point stays cheap
        ends, inverse = np.unique(np.round(raw, 9), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        tree = cKDTree(ends)
        if int(tree.count_neighbors(tree, self.tol.geometric)) > _MAX_SNAP_PAIRS:
            return  # pathological clustering: no closed profile is recognised
        pairs = tree.query_pairs(r=self.tol.geometric, output_type="ndarray")
        graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(ends), len(ends)))
        _, labels = connected_components(graph, directed=False)
        node = [int(labels[i]) for i in inverse]
        incident: dict[int, list[int]] = {}
        for k in range(len(edges)):
            a, b = node[2 * k], node[2 * k + 1]
            if a == b:
                continue
            incident.setdefault(a, []).append(k)
            incident.setdefault(b, []).append(k)
        seen: set[int] = set()
        for start_edge in range(len(edges)):
            if start_edge in seen or node[2 * start_edge] == node[2 * start_edge + 1]:
                continue
            ring, used, ok = self._walk(start_edge, node, incident)
            seen.update(used)
            if ok and len(ring) >= 3:
                self.profile(ring, "")

    def _walk(self, start: int, node: list[int], incident: dict[int, list[int]]) -> tuple[list[Point], list[int], bool]:
        edges = self.chain_edges
        used = [start]
        ring: list[Point] = list(edges[start][2])
        first, current = node[2 * start], node[2 * start + 1]
        previous = start
        while current != first:
            options = incident.get(current, [])
            if len(options) != 2:
                return ring, used, False
            nxt = options[0] if options[1] == previous else options[1]
            if nxt in used:
                return ring, used, False
            pts = edges[nxt][2]
            if node[2 * nxt] == current:
                ring.extend(pts[1:])
                current = node[2 * nxt + 1]
            else:
                ring.extend(list(reversed(pts))[1:])
                current = node[2 * nxt]
            used.append(nxt)
            previous = nxt
            if len(used) > len(edges):
                return ring, used, False
        if len(incident.get(first, [])) != 2:
            return ring, used, False
        return ring[:-1], used, True


def _area_centroid(ring: list[Point]) -> tuple[float, float, float]:
    """Absolute area and area centroid of a ring (vertex mean for degenerate rings)."""
    n = len(ring)
    a2 = cx = cy = 0.0
    x0, y0 = ring[0]
    for i in range(n):
        x1, y1 = ring[i][0] - x0, ring[i][1] - y0
        x2, y2 = ring[(i + 1) % n][0] - x0, ring[(i + 1) % n][1] - y0
        cross = x1 * y2 - x2 * y1
        a2 += cross
        cx += (x1 + x2) * cross
        cy += (y1 + y2) * cross
    if abs(a2) < 1e-12:
        mx = sum(p[0] for p in ring) / n
        my = sum(p[1] for p in ring) / n
        return 0.0, mx, my
    return abs(a2) / 2.0, x0 + cx / (3.0 * a2), y0 + cy / (3.0 * a2)


def _dim_family(dimtype: str, measurement: float) -> tuple[str, float]:
    if dimtype in ("angular", "angular3p"):
        return "angle", measurement
    # A radius and a diameter dimension of one circle are not interchangeable: a prompt that
    # asks for either names it, and the drawing shows "R25" against "Ø50".
    if dimtype == "radius":
        return "radius", 2.0 * measurement  # on the diameter's scale: the same tolerance per size
    if dimtype == "diameter":
        return "diameter", measurement
    return "length", measurement


def _kind(rows: list[tuple[list[float], list[float], str, str]], pos_cols: int, size_cols: int) -> _Kind:
    if not rows:
        return _Kind(np.zeros((0, pos_cols)), np.zeros((0, size_cols)), [])
    pos = np.asarray([r[0] for r in rows], dtype=float).reshape(len(rows), pos_cols)
    size = np.asarray([r[1] for r in rows], dtype=float).reshape(len(rows), size_cols)
    return _Kind(pos, size, [r[2] for r in rows], [r[3] for r in rows])


def hidden_layers(metadata: DrawingMetadata) -> set[str]:
    """Layers that are off or frozen: nothing on them shows on paper, so it is not drawn."""
    return {_norm_layer(layer.name) for layer in metadata.layers if not layer.on or layer.frozen}


def _left_out(entity: Entity | Primitive, ignore: set[str], hidden: set[str]) -> bool:
    layer = _norm_layer(entity.layer)
    # An ignored layer (Defpoints) may hold dimension definition points and nothing else:
    # whatever else is drawn there counts, so it cannot hide junk.
    return layer in hidden or (layer in ignore and isinstance(entity, PointEntity))


def _side(metadata: DrawingMetadata, spec: ScoringSpec) -> _Side:
    ignore = {_norm_layer(name) for name in spec.ignore_layers}
    hidden = hidden_layers(metadata)
    builder = _Builder(spec.tolerance)
    types: dict[str, int] = {}
    for entity in metadata.model.entities:
        if _left_out(entity, ignore, hidden):
            continue
        if isinstance(entity, InsertEntity) and (ignore or hidden):
            entity = entity.model_copy(
                update={"exploded": tuple(e for e in entity.exploded if not _left_out(e, ignore, hidden))}
            )
        if isinstance(entity, InsertEntity) and _unnamed_block(entity.block):
            # AutoCAD keeps an associative array (ARRAYPOLAR and ARRAYRECT by default) as one
            # reference to an unnamed block of its items: what is drawn is the items, as if
            # each were drawn on its own; no prompt asks for a block nobody named.
            for sub in entity.exploded:
                builder.primitive(sub)
                kind = object_type(sub)
                types[kind] = types.get(kind, 0) + 1
            continue
        builder.entity(entity)
        kind = object_type(entity)
        types[kind] = types.get(kind, 0) + 1
    builder.chain_profiles()
    rows = builder.rows
    kinds = {
        "segment": _kind(rows["segment"], 6, 1),
        "arc": _kind(rows["arc"], 6, 1),
        "circle": _kind(rows["circle"], 2, 1),
        "point": _kind(rows["point"], 2, 0),
        "curve": _kind(rows["curve"], 2, 1),
        "hatch": _kind(rows["hatch"], 2, 5),
        "insert": _kind(rows["insert"], 2, 4),
    }
    kinds["curve"].curves = builder.curves
    circles = kinds["circle"]
    holes = np.hstack([circles.pos, circles.size]) if circles.n else np.zeros((0, 3))
    from autocad_bench_evaluator.geometry import bounds

    box = bounds(builder.extent_points)
    sizes: dict[str, Array] = {
        "length": kinds["segment"].size[:, 0].copy(),
        "radius": np.concatenate([kinds["circle"].size[:, 0], kinds["arc"].size[:, 0]]),
        "extent": np.asarray([box[1][0] - box[0][0], box[1][1] - box[0][1]]) if box else np.zeros(0),
    }
    return _Side(
        kinds=kinds,
        texts=_kind(builder.texts, 2, 4),
        dims=_kind(builder.dims, 4, 3),
        profiles=_kind(builder.profiles, 2, 2),
        circles_for_holes=holes,
        sizes=sizes,
        layers=builder.layers,
        physical=metadata.physical_3d,
        geometry_extents=box,
        layer_props={
            _norm_layer(layer.name): (abs(layer.color), layer.linetype.strip().casefold()) for layer in metadata.layers
        },
        types=types,
    )


def _unnamed_block(name: str) -> bool:
    """An unnamed (``*U``) block: AutoCAD's associative arrays and other anonymous groups."""
    return name[:2].upper() == "*U"


def object_type(entity: Entity) -> str:
    """The kind of object a drafter chose, as prompts state it ("one closed polyline", "three
    separate LINE objects", "a single-line text"): the entity type, polylines split into closed
    and open (LWPOLYLINE and 2D POLYLINE alike), texts by their source (TEXT, MTEXT, ATTRIB),
    solids and other entities by their DXF type."""
    if isinstance(entity, PolylineEntity):
        return "POLYLINE closed" if entity.closed else "POLYLINE open"
    if isinstance(entity, TextEntity | SolidEntity | OtherEntity):
        return f"{entity.kind} {entity.source}"
    return entity.kind

"""Deterministic scoring of a candidate drawing against its gold drawing.

:func:`score_drawing` compares two :class:`DrawingMetadata` under a :class:`ScoringSpec` and
returns a :class:`ScoreReport`; :func:`invalid_report` is the zero report of an invalid
drawing. The same inputs always give byte-identical :meth:`ScoreReport.to_json_bytes`
(sorted keys, floats rounded to 6 decimals, no timestamps).

How it works:

1. Both drawings are reduced to scoreable items of the model space (entities on off or frozen
   layers, and POINTs on ``spec.ignore_layers``, left out): straight segments (LINEs and
   straight polyline segments), circular arcs (ARCs and bulged polyline segments), circles,
   points, curves (ellipses and splines, sampled), hatches, block references, texts and
   dimensions; plus closed profiles, circle groups, characteristic sizes, the layers that
   carry items with their table properties, and the 3D extents. Block references count as a
   reference *and* contribute their exploded contents, so a rectangle drawn as four LINEs or as
   one closed polyline scores the same geometry.
2. Position ``"free"``: candidate-to-gold translations are proposed by voting over pairs of
   same-kind anchor points (plus extents alignment), each proposal is scored, the best is
   refined by the least-squares translation of its matched pairs. Translating the candidate
   therefore does not change the score. ``"fixed"`` uses no translation: moving the drawing by
   more than the tolerance fails.
3. Each kind is matched one-to-one by an optimal assignment
   (``scipy.optimize.linear_sum_assignment``) maximising the summed credit. A pair's normalised
   error ``e`` is its worst deviation divided by that quantity's tolerance; credit is 1 for
   ``e <= 1`` and falls linearly to 0 at ``e = 1 + CREDIT_FALLOFF`` (1.5). A component's score
   is the Dice/F1 measure ``2 * credit / (gold items + candidate items)``: missing and extra
   items both cost.
4. Component scores are combined with the spec's weights over the *applicable* components
   (a component is not applicable when neither drawing has anything it measures). Then every
   *defect* costs on top (:func:`_penalised`): the defects of a component are
   ``gold + candidate - 2 * credit`` summed over its parts (a missing or extra item is one, a
   wrong item two, partial credit a fraction), and the total is the weighted mean times
   ``1 - DEFECT_COST * min(1, defects)``. One whole defect anywhere therefore caps the total at
   0.9 of the weighted mean, clearly below a 0.95 threshold, however large the drawing; a
   drawing without defects (the gold) keeps its weighted mean, exactly 1.0. Edit tasks then
   rescale ``(raw - baseline) / (1 - baseline)``. The total passes at ``spec.pass_threshold``
   when required layers and texts are present.

What is compared, and within which tolerance. ``tol`` is ``spec.tolerance.geometric``, an
absolute distance in drawing units that applies to positions and sizes alike, whatever the
size (``tolerance.relative_size`` is ignored):

* segments: both end points within ``tol``; arcs: centre, radius and both end points;
  circles: centre and radius; points: location; curves: Hausdorff distance of the samples.
* hatches: area centroid within ``tol``, area within about ``4 * tol * sqrt(area)`` (a
  boundary within ``tol``), and the fill: solid fill versus pattern, and the pattern name. A
  hatch with the wrong fill is half a match (one defect); an extra hatch is an extra item.
* block references: block name, insertion point within ``tol``, scale factors within
  :data:`SCALE_TOLERANCE`, rotation within :data:`ANGLE_TOLERANCE_DEG`.
* texts (``text``): content (case and whitespace folded; a different text earns half its
  difflib ratio), insertion point within ``tol``, height within ``min(tol, 10% of the gold
  height)``, rotation within :data:`ANGLE_TOLERANCE_DEG`. The right words placed, sized or
  turned wrong are half a match.
* ``dimensions``: DIMENSION measurements (lengths within ``tol``, angles within
  :data:`ANGLE_TOLERANCE_DEG`) of the same family (length, diameter, angle) with the measured
  points within ``tol`` (the right value on the wrong feature is half a match); plus the
  multisets of segment lengths, circle and arc radii and the drawing's width and height, each
  within ``tol``.
* ``topology``: closed profiles (closed polylines and curves, closed chains of lines and arcs):
  centroid and perimeter within ``tol``, area within ``tol * perimeter``; circle groups of one
  radius: their counts and centre spacings (within ``tol``), translation- and rotation-free.
* ``layers``: the names of layers that carry items (Dice), the layer of every matched item,
  and the table properties of the gold's layers that carry items: every such layer's colour
  when some has a colour other than 7, and its linetype when some has one other than
  Continuous (a property left at its default on every gold layer was not asked for); a
  property the candidate's same-named layer lacks or has otherwise is a defect.
* ``extents3d`` (schema 4): the physical 3D box's sizes within ``tol``, its minimum corner
  within ``tol`` when the position is fixed, the volume within ``tol`` times half the box's
  surface (a candidate whose bodies are not closed surfaces has no volume: a defect), the
  surface area within ``tol`` times four times the box's edge sum, the volume centroid relative
  to the box corner within ``tol`` (a mirrored or rearranged part moves it) and the number of
  bodies (a duplicated or un-united body is a defect). When the gold is made of ACIS solids,
  MESH or POLYFACE bodies do not stand in for them: the component scores 0 with the reason.

Nothing here raises for odd geometry: degenerate items are skipped. A spec whose
``task_id`` differs from the caller's is the caller's business.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from autocad_bench.models import StrictModel
from autocad_bench_evaluator.geometry import (
    Point,
    bulge_arc,
    path_length,
    polar,
    sample_arc,
    sample_bulge,
)
from autocad_bench_evaluator.invalid import InvalidClass
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
    canonical_json,
    ellipse_points,
)
from autocad_bench_evaluator.spec import ScoringSpec, Tolerance

Array = NDArray[np.float64]
Index = NDArray[np.intp]
COMPONENTS: tuple[str, ...] = ("entities", "dimensions", "layers", "topology", "text", "extents3d")
ROUND_DIGITS = 6
ANGLE_TOLERANCE_DEG = 0.5
"""Tolerance of every angle (degrees): block-reference and text rotation, angular dimensions."""
SCALE_TOLERANCE = 1e-3
"""Tolerance of a block reference's scale factors (unitless)."""
TEXT_HEIGHT_FRACTION = 0.1
"""A text height agrees within ``min(tolerance.geometric, TEXT_HEIGHT_FRACTION * gold height)``."""
CREDIT_FALLOFF = 0.5
"""Credit falls from 1 at a normalised error of 1 to 0 at ``1 + CREDIT_FALLOFF``."""
DEFECT_COST = 0.1
"""Share of the total that one whole defect (a missing, extra or wrong item) costs on top of the
component scores; see :func:`_penalised`."""
DEFAULT_LAYER_COLOUR = 7
DEFAULT_LINETYPE = "continuous"
_PRUNE_PRODUCT = 250_000
_PRUNE_K = 8
_VOTE_CAP = 400
_HYPOTHESES = 8
_MAX_PATTERN_HOLES = 60
_TEXT_COMPARE = 200
_MAX_SNAP_PAIRS = 400_000


# --- report -----------------------------------------------------------------------------


def _r(value: float) -> float:
    rounded = round(float(value), ROUND_DIGITS)
    return 0.0 if rounded == 0.0 or not math.isfinite(rounded) else rounded


class ComponentScore(StrictModel):
    """One component: its score in [0, 1], its weight, and what was compared.

    ``gold``/``candidate`` count compared items, ``matched`` is the summed credit of the
    optimal assignment. A component that is not ``applicable`` does not enter the total.
    """

    score: float = Field(ge=0.0, le=1.0)
    weight: float = Field(ge=0.0)
    applicable: bool
    gold: int = 0
    candidate: int = 0
    matched: float = 0.0
    details: dict[str, float | int | str] = Field(default_factory=dict)


class ScoreReport(StrictModel):
    """``score.json``: the deterministic score of one attempt (separate from the vision judge)."""

    kind: Literal["deterministic"] = "deterministic"
    task_id: str
    evaluator_version: str
    schema_version: int
    valid: bool
    reason: str = ""
    invalid_class: InvalidClass | None = None
    score: float = Field(ge=0.0, le=1.0)
    raw_score: float | None = Field(
        default=None, description="the weighted total before the edit-task rescaling (None when no baseline)"
    )
    defects: float | None = Field(
        default=None,
        ge=0.0,
        description="whole items missing, extra or wrong over the weighted components (each costs 10%, at most one)",
    )
    passed: bool
    pass_threshold: float
    position: Literal["fixed", "free"]
    translation: Point = (0.0, 0.0)
    components: dict[str, ComponentScore] = Field(default_factory=dict)
    required_layers: dict[str, bool] = Field(default_factory=dict)
    required_text: dict[str, bool] = Field(default_factory=dict)
    gold_sha256: str | None = None
    candidate_sha256: str | None = None

    def to_json_bytes(self) -> bytes:
        """Canonical bytes of ``score.json`` (sorted keys, rounded floats, trailing newline)."""
        return canonical_json(self.model_dump(mode="json"))


_UNITS = {
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
"""DXF ``$INSUNITS`` codes (0 is unitless)."""


def units_mismatch(gold: DrawingMetadata, candidate: DrawingMetadata) -> str | None:
    """Why the candidate's declared units rule out a comparison, or None when they match (or
    either side declares none: ``$INSUNITS`` absent or 0)."""
    want, got = gold.source.units, candidate.source.units
    if not want or not got or want == got:
        return None
    return (
        f"the drawing declares its units as {_UNITS.get(got, f'code {got}')} ($INSUNITS {got}); the task is "
        f"drawn in {_UNITS.get(want, f'code {want}')} ($INSUNITS {want}), so its coordinates cannot be compared"
    )


def invalid_report(
    spec: ScoringSpec,
    evaluator_version: str,
    reason: str,
    *,
    invalid_class: InvalidClass | None = None,
    gold_sha256: str | None = None,
) -> ScoreReport:
    """The deterministic zero report of an invalid or missing drawing."""
    return ScoreReport(
        task_id=spec.task_id,
        evaluator_version=evaluator_version,
        schema_version=spec.schema_version,
        valid=False,
        reason=reason,
        invalid_class=invalid_class,
        score=0.0,
        passed=False,
        pass_threshold=spec.pass_threshold,
        position=spec.position,
        required_layers={name: False for name in spec.required_layers},
        required_text={text: False for text in spec.required_text},
        gold_sha256=gold_sha256,
    )


# --- items ------------------------------------------------------------------------------


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
                self.texts.append(([e.insert[0], e.insert[1]], [e.height, e.rotation % 360.0], layer, content))
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
            for loop in e.boundaries:
                if len(loop) >= 3:
                    a, x, y = _area_centroid(list(loop))
                    area += a
                    cx += a * x
                    cy += a * y
                    total += a
            if total > 0:
                cx, cy = cx / total, cy / total
            elif e.boundaries and e.boundaries[0]:
                cx, cy = e.boundaries[0][0]
            else:
                return
            pattern = e.pattern.strip().casefold()
            label = "solid" if e.solid or pattern == "solid" else f"pattern:{pattern}"
            self.rows["hatch"].append(([cx, cy], [area], layer, label))
        if sum(len(v) for v in self.rows.values()) + len(self.profiles) > before:
            self.layers.add(layer)

    def entity(self, e: Entity) -> None:
        if isinstance(e, InsertEntity):
            layer = _norm_layer(e.layer)
            self.rows["insert"].append(
                (
                    [e.insert[0], e.insert[1]],
                    [e.scale[0], e.scale[1], e.rotation % 360.0],
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
    if dimtype == "radius":
        return "diameter", 2.0 * measurement
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
        "hatch": _kind(rows["hatch"], 2, 1),
        "insert": _kind(rows["insert"], 2, 3),
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
        texts=_kind(builder.texts, 2, 2),
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


# --- matching ---------------------------------------------------------------------------


def _credit(err: Array) -> Array:
    """Credit of normalised errors: 1 within tolerance, 0 beyond ``1 + CREDIT_FALLOFF``."""
    return np.clip((1.0 + CREDIT_FALLOFF - err) / CREDIT_FALLOFF, 0.0, 1.0)


@dataclass
class _Match:
    credit: float = 0.0
    pairs: list[tuple[int, int, float]] = field(default_factory=list)


def _assign(credit: Array, err: Array, layer_diff: Array | None = None) -> _Match:
    """Optimal one-to-one assignment maximising summed credit (ties: smaller error, same layer)."""
    if credit.size == 0:
        return _Match()
    tie = np.minimum(err, 1.0) * 0.5
    if layer_diff is not None:
        tie = tie + 0.5 * layer_diff
    cost = (1.0 - credit) + 1e-6 * tie
    rows, cols = linear_sum_assignment(cost)
    pairs = [(int(r), int(c), float(credit[r, c])) for r, c in zip(rows, cols, strict=True) if credit[r, c] > 0.0]
    return _Match(math.fsum(p[2] for p in pairs), pairs)


def _layer_diff(g: _Kind, c: _Kind, gi: Index, ci: Index) -> Array:
    gl = np.asarray(g.layers, dtype=object)[gi]
    cl = np.asarray(c.layers, dtype=object)[ci]
    return (gl[:, None] != cl[None, :]).astype(float)  # type: ignore[no-any-return]


def _prune(g: _Kind, c: _Kind) -> Index:
    """Indices of candidate items worth matching (all unless the problem is huge)."""
    if g.n * c.n <= _PRUNE_PRODUCT or g.n == 0:
        return np.arange(c.n)
    k = min(_PRUNE_K, c.n)
    _, idx = cKDTree(c.anchors()).query(g.anchors(), k=k)
    return np.unique(np.asarray(idx).reshape(-1))


ErrFn = Callable[[_Kind, _Kind, Index, Index], tuple[Array, Array]]


def _match_kind(g: _Kind, c: _Kind, err_fn: ErrFn) -> _Match:
    if g.n == 0 or c.n == 0:
        return _Match()
    ci = _prune(g, c)
    gi = np.arange(g.n)
    err, factor = err_fn(g, c, gi, ci)
    credit = _credit(err) * factor
    match = _assign(credit, err, _layer_diff(g, c, gi, ci))
    match.pairs = [(r, int(ci[col]), cr) for r, col, cr in match.pairs]
    return match


def _dist(a: Array, b: Array) -> Array:
    return np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])


def _size_tol(tol: Tolerance, values: Array) -> Array:
    """The tolerance of each size in ``values``: absolute, ``tol.geometric`` whatever the size
    (``tol.relative_size`` is ignored, see :class:`~autocad_bench_evaluator.spec.Tolerance`)."""
    return np.full(np.shape(values), tol.geometric, dtype=float)


def _errors(tol: Tolerance) -> dict[str, ErrFn]:
    geo = tol.geometric

    def segment(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        gp, cp = g.pos[gi], c.pos[ci]
        d_same = np.maximum(_dist(gp[:, 2:4], cp[:, 2:4]), _dist(gp[:, 4:6], cp[:, 4:6]))
        d_swap = np.maximum(_dist(gp[:, 2:4], cp[:, 4:6]), _dist(gp[:, 4:6], cp[:, 2:4]))
        t = _size_tol(tol, g.size[gi, 0])[:, None]
        return np.minimum(d_same, d_swap) / t, np.ones((len(gi), len(ci)))

    def arc(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        gp, cp = g.pos[gi], c.pos[ci]
        t = _size_tol(tol, g.size[gi, 0])[:, None]
        d_center = _dist(gp[:, 0:2], cp[:, 0:2]) / geo
        d_r = np.abs(g.size[gi, 0][:, None] - c.size[ci, 0][None, :]) / t
        d_ends = (
            np.minimum(
                np.maximum(_dist(gp[:, 2:4], cp[:, 2:4]), _dist(gp[:, 4:6], cp[:, 4:6])),
                np.maximum(_dist(gp[:, 2:4], cp[:, 4:6]), _dist(gp[:, 4:6], cp[:, 2:4])),
            )
            / t
        )
        return np.maximum(np.maximum(d_center, d_r), d_ends), np.ones((len(gi), len(ci)))

    def circle(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        t = _size_tol(tol, g.size[gi, 0])[:, None]
        d_center = _dist(g.pos[gi], c.pos[ci]) / geo
        d_r = np.abs(g.size[gi, 0][:, None] - c.size[ci, 0][None, :]) / t
        return np.maximum(d_center, d_r), np.ones((len(gi), len(ci)))

    def point(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        return _dist(g.pos[gi], c.pos[ci]) / geo, np.ones((len(gi), len(ci)))

    def curve(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        err = np.full((len(gi), len(ci)), 10.0)
        for a, i in enumerate(gi):
            gc = g.curves[int(i)]
            t = geo
            for b, j in enumerate(ci):
                cc = c.curves[int(j)]
                if float(np.hypot(*(gc.mean(axis=0) - cc.mean(axis=0)))) > 4 * t + float(g.size[int(i), 0]):
                    continue
                d = _hausdorff(gc, cc)
                err[a, b] = d / t
        return err, np.ones((len(gi), len(ci)))

    def hatch(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        ga = g.size[gi, 0][:, None]
        ca = c.size[ci, 0][None, :]
        # a boundary within ``geo`` of the gold changes the area by about perimeter * geo
        area_tol = np.maximum(geo * np.sqrt(np.maximum(ga, 0.0)) * 4.0, 1e-9)
        err = np.maximum(_dist(g.pos[gi], c.pos[ci]) / geo, np.abs(ga - ca) / area_tol)
        gl = np.asarray(g.labels, dtype=object)[gi]
        cl = np.asarray(c.labels, dtype=object)[ci]
        factor = np.where(gl[:, None] == cl[None, :], 1.0, 0.5)
        return err, factor

    def insert(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        d = _dist(g.pos[gi], c.pos[ci]) / geo
        gs, cs = g.size[gi], c.size[ci]
        stol = np.full(gs[:, 0:2].shape, SCALE_TOLERANCE)
        ds = np.maximum(
            np.abs(gs[:, 0][:, None] - cs[:, 0][None, :]) / stol[:, 0][:, None],
            np.abs(gs[:, 1][:, None] - cs[:, 1][None, :]) / stol[:, 1][:, None],
        )
        dr = np.abs(gs[:, 2][:, None] - cs[:, 2][None, :]) % 360.0
        dr = np.minimum(dr, 360.0 - dr) / ANGLE_TOLERANCE_DEG
        gl = np.asarray(g.labels, dtype=object)[gi]
        cl = np.asarray(c.labels, dtype=object)[ci]
        factor = (gl[:, None] == cl[None, :]).astype(float)
        return np.maximum(np.maximum(d, ds), dr), factor

    return {
        "segment": segment,
        "arc": arc,
        "circle": circle,
        "point": point,
        "curve": curve,
        "hatch": hatch,
        "insert": insert,
    }


def _hausdorff(a: Array, b: Array) -> float:
    from scipy.spatial.distance import directed_hausdorff

    return max(float(directed_hausdorff(a, b)[0]), float(directed_hausdorff(b, a)[0]))


def _dice(credit: float, n_gold: int, n_cand: int) -> float:
    total = n_gold + n_cand
    return 1.0 if total == 0 else min(1.0, 2.0 * credit / total)


# --- components -------------------------------------------------------------------------


@dataclass
class _Component:
    score: float
    applicable: bool
    gold: int = 0
    candidate: int = 0
    matched: float = 0.0
    details: dict[str, float | int | str] = field(default_factory=dict)
    defects: float = 0.0
    """Whole items missing, extra or wrong: ``gold + candidate - 2 * credit`` summed over parts."""


def _defects(credit: float, n_gold: int, n_cand: int) -> float:
    """Missing plus extra items of a one-to-one matching (a wrong item counts twice, partial
    credit fractionally): 0 exactly when every item on both sides matched in full."""
    return max(0.0, n_gold + n_cand - 2.0 * credit)


@dataclass
class _Evaluation:
    components: dict[str, _Component]
    total: float
    anchor_pairs: list[tuple[Point, Point, float]]
    defects: float = 0.0


def _penalised(weighted: float, defects: float) -> float:
    """The weighted component mean less ``DEFECT_COST`` of it per whole defect, at most one.

    The components measure *how much* of the drawing is right; a drawing with a single missing,
    extra or wrong item is still not what was asked, however large the rest. So any one whole
    defect caps the total at ``1 - DEFECT_COST`` (0.9) of the weighted mean: below the pass
    threshold by a clear margin, while a drawing with no defect keeps its weighted mean (1.0 for
    the gold). Partial credit (an item a little beyond tolerance) costs fractionally.
    """
    return weighted * (1.0 - DEFECT_COST * min(1.0, max(0.0, defects)))


def _entities(g: _Side, c: _Side, errs: dict[str, ErrFn]) -> tuple[_Component, list[tuple[str, _Match]]]:
    credit = 0.0
    n_g = n_c = 0
    details: dict[str, float | int | str] = {}
    matches: list[tuple[str, _Match]] = []
    for name, fn in errs.items():
        gk, ck = g.kinds[name], c.kinds[name]
        if gk.n == 0 and ck.n == 0:
            continue
        match = _match_kind(gk, ck, fn)
        matches.append((name, match))
        credit += match.credit
        n_g += gk.n
        n_c += ck.n
        details[f"{name}.gold"] = gk.n
        details[f"{name}.candidate"] = ck.n
        details[f"{name}.matched"] = _r(match.credit)
    score, applicable, defects = _dice(credit, n_g, n_c), n_g + n_c > 0, _defects(credit, n_g, n_c)
    # the objects drawn: a rectangle asked for as one closed polyline is not four LINEs
    gt, ct = g.types, c.types
    t_g, t_c = sum(gt.values()), sum(ct.values())
    if t_g + t_c:
        same = sum(min(count, ct.get(kind, 0)) for kind, count in gt.items())
        types = _dice(same, t_g, t_c)
        score = (score + types) / 2 if applicable else types
        applicable = True
        defects += _defects(same, t_g, t_c)
        details["types.score"] = _r(types)
        details["types.gold"] = ", ".join(f"{k} x{v}" for k, v in sorted(gt.items()))[:300]
        details["types.candidate"] = ", ".join(f"{k} x{v}" for k, v in sorted(ct.items()))[:300]
    return _Component(score, applicable, n_g, n_c, credit, details, defects), matches


def _texts(g: _Side, c: _Side, tol: Tolerance) -> tuple[_Component, _Match]:
    gt, ct = g.texts, c.texts
    if gt.n == 0 and ct.n == 0:
        return _Component(1.0, False), _Match()
    if gt.n == 0 or ct.n == 0:
        return _Component(0.0, True, gt.n, ct.n, defects=float(gt.n + ct.n)), _Match()
    ci = _prune(gt, ct)
    gi = np.arange(gt.n)
    content = np.zeros((gt.n, len(ci)))
    for i, gl in enumerate(gt.labels):
        for b, j in enumerate(ci):
            content[i, b] = _text_similarity(gl, ct.labels[int(j)])
    gh, gr = gt.size[:, 0], gt.size[:, 1]
    ch, cr = ct.size[ci, 0], ct.size[ci, 1]
    pos_err = _dist(gt.pos, ct.pos[ci]) / tol.geometric
    height_tol = np.maximum(np.minimum(tol.geometric, TEXT_HEIGHT_FRACTION * np.abs(gh)), 1e-9)[:, None]
    height_err = np.abs(gh[:, None] - ch[None, :]) / height_tol
    turn = np.abs(gr[:, None] - cr[None, :]) % 360.0
    rot_err = np.minimum(turn, 360.0 - turn) / ANGLE_TOLERANCE_DEG
    err = np.maximum(np.maximum(pos_err, height_err), rot_err)
    # the right words in the wrong place, size or direction are half a text
    credit = content * (0.5 + 0.5 * _credit(err))
    match = _assign(credit, err, _layer_diff(gt, ct, gi, ci))
    details: dict[str, float | int | str] = {}
    if match.pairs:
        placed = _credit(np.asarray([err[r, col] for r, col, _ in match.pairs]))
        details["placement.score"] = _r(float(placed.mean()))
    match.pairs = [(r, int(ci[col]), c) for r, col, c in match.pairs]
    return (
        _Component(
            _dice(match.credit, gt.n, ct.n),
            True,
            gt.n,
            ct.n,
            match.credit,
            details,
            defects=_defects(match.credit, gt.n, ct.n),
        ),
        match,
    )


@functools.lru_cache(maxsize=65536)
def _text_similarity(gold: str, candidate: str) -> float:
    """1 for equal normalised texts, else half their difflib similarity ratio."""
    if gold == candidate:
        return 1.0
    matcher = difflib.SequenceMatcher(None, gold[:_TEXT_COMPARE], candidate[:_TEXT_COMPARE], autojunk=False)
    return 0.5 * matcher.ratio()


def _dimensions(g: _Side, c: _Side, tol: Tolerance) -> tuple[_Component, _Match]:
    parts: list[float] = []
    details: dict[str, float | int | str] = {}
    gd, cd = g.dims, c.dims
    match = _Match()
    n_g = n_c = 0
    matched = 0.0
    defects = 0.0
    if gd.n or cd.n:
        if gd.n and cd.n:
            gv, cv = gd.size[:, 0], cd.size[:, 0]
            gl = np.asarray(gd.labels, dtype=object)
            cl = np.asarray(cd.labels, dtype=object)
            t = np.where(gl == "angle", ANGLE_TOLERANCE_DEG, tol.geometric)[:, None]
            same = (gl[:, None] == cl[None, :]).astype(float)
            size_err = np.abs(gv[:, None] - cv[None, :]) / t
            pos_err = _dist(gd.pos[:, 0:2], cd.pos[:, 0:2]) / tol.geometric
            # the offset between the two dimension lines, along the gold line's normal
            gn = gd.size[:, 1:3]
            gap = (gd.pos[:, None, 2:4] - cd.pos[None, :, 2:4]) * gn[:, None, :]
            pos_err = np.maximum(pos_err, np.abs(gap.sum(axis=2)) / tol.geometric)
            # the right measurement of the wrong feature is half a dimension
            credit = _credit(size_err) * same * (0.5 + 0.5 * _credit(pos_err))
            gi, ci = np.arange(gd.n), np.arange(cd.n)
            match = _assign(credit, size_err, _layer_diff(gd, cd, gi, ci))
        part = _dice(match.credit, gd.n, cd.n)
        parts.append(part)
        details["dimensions.score"] = _r(part)
        details["dimensions.gold"] = gd.n
        details["dimensions.candidate"] = cd.n
        n_g += gd.n
        n_c += cd.n
        matched += match.credit
        defects += _defects(match.credit, gd.n, cd.n)
    size_credit = 0.0
    size_g = size_c = 0
    for name in ("length", "radius", "extent"):
        gv, cv = g.sizes[name], c.sizes[name]
        size_g += len(gv)
        size_c += len(cv)
        if len(gv) == 0 or len(cv) == 0:
            continue
        cidx = _prune_1d(gv, cv)
        cvs = cv[cidx]
        err = np.abs(gv[:, None] - cvs[None, :]) / _size_tol(tol, gv)[:, None]
        size_credit += _assign(_credit(err), err).credit
    if size_g + size_c:
        part = _dice(size_credit, size_g, size_c)
        parts.append(part)
        details["sizes.score"] = _r(part)
        details["sizes.gold"] = size_g
        details["sizes.candidate"] = size_c
        defects += _defects(size_credit, size_g, size_c)
    if not parts:
        return _Component(1.0, False), match
    return _Component(sum(parts) / len(parts), True, n_g, n_c, matched, details, defects), match


def _prune_1d(gold: Array, cand: Array) -> Index:
    if len(gold) * len(cand) <= _PRUNE_PRODUCT:
        return np.arange(len(cand))
    order = np.argsort(cand, kind="stable")
    sorted_c = cand[order]
    picks: set[int] = set()
    for value in gold:
        pos = int(np.searchsorted(sorted_c, value))
        for k in range(max(0, pos - _PRUNE_K), min(len(cand), pos + _PRUNE_K)):
            picks.add(int(order[k]))
    return np.asarray(sorted(picks), dtype=int)


def _topology(g: _Side, c: _Side, tol: Tolerance) -> _Component:
    parts: list[float] = []
    details: dict[str, float | int | str] = {}
    defects = 0.0
    gp, cp = g.profiles, c.profiles
    if gp.n or cp.n:
        credit = 0.0
        if gp.n and cp.n:
            area_g, per_g = gp.size[:, 0], gp.size[:, 1]
            area_c, per_c = cp.size[:, 0], cp.size[:, 1]
            # a boundary within ``geometric`` of the gold's: area within perimeter * geometric
            area_tol = np.maximum(tol.geometric * per_g, 1e-9)[:, None]
            per_tol = _size_tol(tol, per_g)[:, None]
            err = np.maximum(
                np.maximum(
                    _dist(gp.pos, cp.pos) / tol.geometric,
                    np.abs(area_g[:, None] - area_c[None, :]) / area_tol,
                ),
                np.abs(per_g[:, None] - per_c[None, :]) / per_tol,
            )
            credit = _assign(_credit(err), err).credit
        part = _dice(credit, gp.n, cp.n)
        parts.append(part)
        defects += _defects(credit, gp.n, cp.n)
        details.update({"profiles.score": _r(part), "profiles.gold": gp.n, "profiles.candidate": cp.n})
    gh, ch = g.circles_for_holes, c.circles_for_holes
    if len(gh) or len(ch):
        part, hole_details, hole_defects = _hole_patterns(gh, ch, tol)
        parts.append(part)
        defects += hole_defects
        details.update(hole_details)
    if not parts:
        return _Component(1.0, False)
    return _Component(sum(parts) / len(parts), True, gp.n + len(gh), cp.n + len(ch), details=details, defects=defects)


def _radius_classes(radii: Array, tol: Tolerance) -> list[tuple[float, float]]:
    """Disjoint radius intervals, each a chain of radii within tolerance of each other."""
    classes: list[tuple[float, float]] = []
    for r in sorted(float(x) for x in radii):
        if classes and r - classes[-1][1] <= tol.geometric * 0.5:
            classes[-1] = (classes[-1][0], r)
        else:
            classes.append((r, r))
    return classes


def _hole_patterns(gh: Array, ch: Array, tol: Tolerance) -> tuple[float, dict[str, float | int | str], float]:
    """Circle groups of equal radius: counts per group and the multiset of centre spacings.

    Both are translation- and rotation-invariant, so a hole pattern drawn in the right shape
    but elsewhere still earns this part.
    """
    classes = _radius_classes(np.concatenate([gh[:, 2], ch[:, 2]]), tol)
    count_credit = 0.0
    spacing_credit = 0.0
    spacing_g = spacing_c = 0
    for lo, hi in classes:
        g = _first_holes(gh[(gh[:, 2] >= lo) & (gh[:, 2] <= hi)])
        c = _first_holes(ch[(ch[:, 2] >= lo) & (ch[:, 2] <= hi)])
        count_credit += min(len(g), len(c))
        dg, dc = _spacings(g), _spacings(c)
        spacing_g += len(dg)
        spacing_c += len(dc)
        if len(dg) and len(dc):
            cidx = _prune_1d(dg, dc)
            err = np.abs(dg[:, None] - dc[cidx][None, :]) / _size_tol(tol, dg)[:, None]
            spacing_credit += _assign(_credit(err), err).credit
    counts = _dice(count_credit, len(gh), len(ch))
    defects = _defects(count_credit, len(gh), len(ch))
    parts = [counts]
    details: dict[str, float | int | str] = {
        "holes.gold": len(gh),
        "holes.candidate": len(ch),
        "holes.count": _r(counts),
    }
    if spacing_g + spacing_c:
        spacing = _dice(spacing_credit, spacing_g, spacing_c)
        parts.append(spacing)
        defects += _defects(spacing_credit, spacing_g, spacing_c)
        details["holes.spacing"] = _r(spacing)
    return sum(parts) / len(parts), details, defects


def _first_holes(circles: Array) -> Array:
    """At most ``_MAX_PATTERN_HOLES`` circles, chosen independently of order and position."""
    if len(circles) <= _MAX_PATTERN_HOLES:
        return circles
    rel = circles[:, 0:2] - circles[:, 0:2].min(axis=0)
    order = np.lexsort((np.round(rel[:, 1], 6), np.round(rel[:, 0], 6)))
    return circles[order[:_MAX_PATTERN_HOLES]]


def _spacings(circles: Array) -> Array:
    n = len(circles)
    if n < 2:
        return np.zeros(0)
    d = _dist(circles[:, 0:2], circles[:, 0:2])
    iu = np.triu_indices(n, k=1)
    return np.sort(d[iu])


def _layers(g: _Side, c: _Side, matched: list[tuple[str, _Kind, _Kind, _Match]]) -> _Component:
    """Layer names that carry items, the layer of each matched item, and the stated properties
    (colour, linetype) of the gold's layers that carry items."""
    if not g.layers and not c.layers:
        return _Component(1.0, False)
    shared = len(g.layers & c.layers)
    names = _dice(float(shared), len(g.layers), len(c.layers))
    defects = _defects(float(shared), len(g.layers), len(c.layers))
    agree = total = 0.0
    for _, gk, ck, match in matched:
        for gi, ci, credit in match.pairs:
            total += credit
            if gk.layers[gi] == ck.layers[ci]:
                agree += credit
    details: dict[str, float | int | str] = {"names.score": _r(names)}
    parts = [names]
    if total > 0:
        assignment = agree / total
        details["assignment.score"] = _r(assignment)
        parts.append(assignment)
        defects += total - agree
    checked, right = _layer_properties(g, c)
    if checked:
        properties = right / checked
        details["properties.score"] = _r(properties)
        details["properties.checked"] = checked
        parts.append(properties)
        defects += checked - right
    score = sum(parts) / len(parts)
    return _Component(score, True, len(g.layers), len(c.layers), float(shared), details, defects)


def _layer_properties(g: _Side, c: _Side) -> tuple[int, int]:
    """(checked, agreeing) layer properties: the colour of every gold layer that carries items
    when some such layer has a colour other than 7, likewise the linetype when some has one other
    than Continuous (a property the gold leaves at its default everywhere was not asked for).
    A layer the candidate lacks agrees on nothing."""
    used = sorted(name for name in g.layers if name in g.layer_props)
    checked = right = 0
    for index, default in ((0, DEFAULT_LAYER_COLOUR), (1, DEFAULT_LINETYPE)):
        if not any(g.layer_props[name][index] != default for name in used):
            continue
        for name in used:
            checked += 1
            theirs = c.layer_props.get(name)
            if theirs is not None and theirs[index] == g.layer_props[name][index]:
                right += 1
    return checked, right


SOLID_SOURCES = frozenset({"3DSOLID", "BODY", "REGION", "SURFACE"})
"""ACIS entity types: a gold made of these asks for solids, which MESH/POLYFACE cannot stand in for."""


def _extents3d(g: _Side, c: _Side, tol: Tolerance, position: str) -> _Component:
    gp, cp = g.physical, c.physical
    if gp is None or cp is None:
        return _Component(0.0, True, details={"reason": "schema v4 metadata missing"}, defects=1.0)
    if gp.status == "none":
        none = cp.status == "none"
        return _Component(1.0 if none else 0.0, True, 0, cp.bodies, defects=0.0 if none else 1.0)
    if cp.status != "measured" or cp.extents is None or gp.extents is None:
        reason = "candidate has no 3D body" if cp.status == "none" else f"candidate 3D extents unknown: {cp.reason}"
        return _Component(0.0, True, gp.bodies, cp.bodies, details={"reason": reason[:300]}, defects=1.0)
    stand_ins = sorted(set(cp.sources) - set(gp.sources) - ({"BODY"} if "3DSOLID" in gp.sources else set()))
    if set(gp.sources) <= SOLID_SOURCES and stand_ins:
        # the task asks for solids: a mesh or polyface with the right box is not one
        reason = f"the task asks for solids; {', '.join(stand_ins)} bodies do not count"
        return _Component(0.0, True, gp.bodies, cp.bodies, details={"reason": reason}, defects=1.0)
    gs, cs = gp.extents.size, cp.extents.size
    parts = [float(_credit(np.asarray([abs(a - b) / tol.geometric]))[0]) for a, b in zip(gs, cs, strict=True)]
    defects = sum(1.0 - p for p in parts)
    details: dict[str, float | int | str] = {"size.score": _r(sum(parts) / 3)}
    scores = [sum(parts) / 3]
    if position == "fixed":
        d = math.dist(gp.extents.min, cp.extents.min)
        pos = float(_credit(np.asarray([d / tol.geometric]))[0])
        scores.append(pos)
        defects += 1.0 - pos
        details["position.score"] = _r(pos)
    if gp.volume is not None and cp.volume is not None and gp.volume > 0:
        # faces within ``geometric`` of the gold's: the volume within about half the gold box's
        # surface times ``geometric``
        a, b, h = gs
        vol_tol = max(tol.geometric * (a * b + b * h + h * a), tol.geometric**3)
        vol = float(_credit(np.asarray([abs(gp.volume - cp.volume) / vol_tol]))[0])
        scores.append(vol)
        defects += 1.0 - vol
        details["volume.score"] = _r(vol)
    elif gp.volume is not None:
        # the gold's volume is known, the candidate's is not: an open or broken surface
        scores.append(0.0)
        defects += 1.0
        details["volume.score"] = 0.0
        details["reason"] = "the candidate's bodies are not closed surfaces: their volume is undefined"
    if gp.area is not None and cp.area is not None and gp.area > 0:
        # every face within ``geometric``: the surface within about the box's edge length times it
        area_tol = max(tol.geometric * 4.0 * sum(gs), tol.geometric**2)
        area = float(_credit(np.asarray([abs(gp.area - cp.area) / area_tol]))[0])
        scores.append(area)
        defects += 1.0 - area
        details["area.score"] = _r(area)
    if gp.centroid is not None and cp.centroid is not None:
        # where the material sits inside the box: a mirrored or rearranged part moves it
        offset_g = np.subtract(gp.centroid, gp.extents.min)
        offset_c = np.subtract(cp.centroid, cp.extents.min)
        shape = float(_credit(np.asarray([float(np.linalg.norm(offset_g - offset_c)) / tol.geometric]))[0])
        scores.append(shape)
        defects += 1.0 - shape
        details["centroid.score"] = _r(shape)
    bodies = 1.0 if gp.bodies == cp.bodies else 0.0
    scores.append(bodies)
    defects += 1.0 - bodies
    details["bodies.gold"], details["bodies.candidate"] = gp.bodies, cp.bodies
    return _Component(sum(scores) / len(scores), True, gp.bodies, cp.bodies, details=details, defects=defects)


def _evaluate(g: _Side, c: _Side, spec: ScoringSpec, errs: dict[str, ErrFn]) -> _Evaluation:
    tol = spec.tolerance
    weights = spec.weights.as_dict()
    entities, matches = _entities(g, c, errs)
    texts, text_match = _texts(g, c, tol)
    dims, dim_match = _dimensions(g, c, tol)
    matched = [(name, g.kinds[name], c.kinds[name], m) for name, m in matches]
    matched.append(("text", g.texts, c.texts, text_match))
    matched.append(("dimension", g.dims, c.dims, dim_match))
    components = {
        "entities": entities,
        "dimensions": dims,
        "layers": _layers(g, c, matched) if weights["layers"] > 0 else _Component(1.0, False),
        "topology": _topology(g, c, tol) if weights["topology"] > 0 else _Component(1.0, False),
        "text": texts,
        "extents3d": _extents3d(g, c, tol, spec.position) if weights["extents3d"] > 0 else _Component(1.0, False),
    }
    num = den = defects = 0.0
    for name, comp in components.items():
        w = weights[name]
        if w > 0 and comp.applicable:
            num += w * comp.score
            den += w
            defects += comp.defects
    total = _penalised(num / den if den > 0 else 1.0, defects)
    pairs: list[tuple[Point, Point, float]] = []
    for _, gk, ck, m in matched:
        ga, ca = gk.anchors(), ck.anchors()
        for gi, ci, credit in m.pairs:
            pairs.append(((float(ga[gi, 0]), float(ga[gi, 1])), (float(ca[ci, 0]), float(ca[ci, 1])), credit))
    return _Evaluation(components, total, pairs, defects)


# --- translation --------------------------------------------------------------------------


def _anchor_sets(side: _Side) -> dict[str, Array]:
    out = {name: k.anchors() for name, k in side.kinds.items()}
    out["text"] = side.texts.anchors()
    out["dimension"] = side.dims.anchors()
    return out


def _hypotheses(g: _Side, c: _Side, tol: Tolerance) -> list[Point]:
    """Candidate-to-gold translations worth trying, best-supported first."""
    bin_size = 2.0 * tol.geometric
    phase = 0.318309886  # keeps round-number translations away from bin boundaries
    votes: dict[tuple[int, int], list[Point]] = {}
    ga, ca = _anchor_sets(g), _anchor_sets(c)
    for name in sorted(ga):
        gpts, cpts = ga[name], ca[name]
        if len(gpts) == 0 or len(cpts) == 0:
            continue
        gpts, cpts = _thin(gpts), _thin(cpts)
        diff = (gpts[:, None, :] - cpts[None, :, :]).reshape(-1, 2)
        keys = np.floor(diff / bin_size + phase).astype(np.int64)
        for (kx, ky), (dx, dy) in zip(keys.tolist(), diff.tolist(), strict=True):
            votes.setdefault((kx, ky), []).append((dx, dy))
    ranked = sorted(votes.items(), key=lambda item: (-len(item[1]), item[0]))[:_HYPOTHESES]
    out: list[Point] = []
    for _, vectors in ranked:
        arr = np.asarray(vectors)
        out.append((float(np.median(arr[:, 0])), float(np.median(arr[:, 1]))))
    ge, ce = g.geometry_extents, c.geometry_extents
    if ge is not None and ce is not None:
        out.append((ge[0][0] - ce[0][0], ge[0][1] - ce[0][1]))
        out.append(((ge[0][0] + ge[1][0] - ce[0][0] - ce[1][0]) / 2, (ge[0][1] + ge[1][1] - ce[0][1] - ce[1][1]) / 2))
    return out or [(0.0, 0.0)]


def _thin(points: Array) -> Array:
    if len(points) <= _VOTE_CAP:
        return points
    rel = points - points.min(axis=0)
    order = np.lexsort((np.round(rel[:, 1], 6), np.round(rel[:, 0], 6)))
    step = math.ceil(len(points) / _VOTE_CAP)
    return points[order[::step]]


def _refine(pairs: list[tuple[Point, Point, float]]) -> Point | None:
    weight = math.fsum(p[2] for p in pairs)
    if weight <= 0:
        return None
    dx = math.fsum((g[0] - c[0]) * w for g, c, w in pairs) / weight
    dy = math.fsum((g[1] - c[1]) * w for g, c, w in pairs) / weight
    return (dx, dy)


def _align(g: _Side, c: _Side, spec: ScoringSpec, errs: dict[str, ErrFn]) -> tuple[Point, _Evaluation]:
    if spec.position == "fixed":
        return (0.0, 0.0), _evaluate(g, c, spec, errs)
    best: tuple[Point, _Evaluation] | None = None
    for t in _hypotheses(g, c, spec.tolerance):
        ev = _evaluate(g, c.shifted(*t), spec, errs)
        if best is None or ev.total > best[1].total + 1e-12:
            best = (t, ev)
    assert best is not None
    for _ in range(2):
        t0, ev0 = best
        delta = _refine(ev0.anchor_pairs)
        if delta is None or math.hypot(*delta) < 1e-12:
            break
        t1 = (t0[0] + delta[0], t0[1] + delta[1])
        ev1 = _evaluate(g, c.shifted(*t1), spec, errs)
        if ev1.total + 1e-12 >= ev0.total:
            best = (t1, ev1)
        else:
            break
    return best


# --- entry point ------------------------------------------------------------------------


def required_layers_present(candidate: DrawingMetadata, names: Iterable[str]) -> dict[str, bool]:
    """For each required layer: whether at least one candidate model-space entity is on it
    (a layer that is off or frozen shows nothing, so it does not count)."""
    used = {_norm_layer(e.layer) for e in candidate.model.entities}
    for e in candidate.model.entities:
        if isinstance(e, InsertEntity):
            used.update(_norm_layer(sub.layer) for sub in e.exploded)
    used -= hidden_layers(candidate)
    return {name: _norm_layer(name) in used for name in names}


def required_text_present(candidate: DrawingMetadata, texts_required: Iterable[str]) -> dict[str, bool]:
    """For each required text: whether it occurs in some candidate text (normalised substring)."""
    from autocad_bench_evaluator.metadata import texts

    contents = [normalize_text(t.content) for t in texts(candidate)]
    contents += [normalize_text(e.text_override) for e in candidate.model.entities if isinstance(e, DimensionEntity)]
    return {text: any(normalize_text(text) in c for c in contents) for text in texts_required}


def score_drawing(
    gold: DrawingMetadata, candidate: DrawingMetadata, spec: ScoringSpec, evaluator_version: str
) -> ScoreReport:
    """Score ``candidate`` against ``gold``; deterministic and translation-invariant when free.

    A candidate that declares other drawing units than the gold (``$INSUNITS``, both set and
    not unitless) scores 0 with the reason: its coordinates mean other lengths.
    """
    layers_ok = required_layers_present(candidate, spec.required_layers)
    text_ok = required_text_present(candidate, spec.required_text)

    def report(score: float, passed: bool, **rest: Any) -> ScoreReport:
        return ScoreReport(
            task_id=spec.task_id,
            evaluator_version=evaluator_version,
            schema_version=spec.schema_version,
            valid=True,
            score=score,
            passed=passed,
            pass_threshold=spec.pass_threshold,
            position=spec.position,
            required_layers=layers_ok,
            required_text=text_ok,
            gold_sha256=gold.source.sha256,
            candidate_sha256=candidate.source.sha256,
            **rest,
        )

    mismatch = units_mismatch(gold, candidate)
    if mismatch is not None:
        return report(0.0, False, reason=mismatch)
    errs = _errors(spec.tolerance)
    g = _side(gold, spec)
    c = _side(candidate, spec)
    translation, ev = _align(g, c, spec, errs)
    weights = spec.weights.as_dict()
    components = {
        name: ComponentScore(
            score=_r(min(1.0, max(0.0, comp.score))),
            weight=_r(weights[name]),
            applicable=comp.applicable and weights[name] > 0,
            gold=comp.gold,
            candidate=comp.candidate,
            matched=_r(comp.matched),
            details={
                k: (_r(v) if isinstance(v, float) else v)
                for k, v in sorted(
                    ({**comp.details, "defects": comp.defects} if comp.applicable else comp.details).items()
                )
            },
        )
        for name, comp in ev.components.items()
    }
    raw = min(1.0, max(0.0, ev.total))
    extra: dict[str, Any] = {}
    if spec.baseline > 0.0:
        # Edit tasks: the unchanged template already scores ``baseline``; only the change counts.
        extra["raw_score"] = _r(raw)
        raw = min(1.0, max(0.0, (raw - spec.baseline) / (1.0 - spec.baseline)))
    total = _r(raw)
    passed = total >= spec.pass_threshold and all(layers_ok.values()) and all(text_ok.values())
    return report(
        total,
        passed,
        translation=(_r(translation[0]), _r(translation[1])),
        components=components,
        defects=_r(ev.defects),
        **extra,
    )

"""Drafting operations: one description drives the gold, the LibreCAD solution and the AutoCAD script.

A family describes an instance as a list of :data:`Op` values (a line, a circle, a closed
polyline, a text, a layer, a dimension, a solid hatch). Each op knows how to

* add itself to an ezdxf document (the gold drawing, or the template of an edit task),
* append the LibreCAD steps that draw it (:class:`~autocad_bench_evaluator.suite.librecad.LibreCADScript`),
* write the AutoCAD command lines that draw it (``.scr``), and
* name a point on its outline where a click selects it (:meth:`pick`), for edit tasks.

Because the three outputs come from one value, a generated instance cannot have a gold that
its own reference solution does not draw. Layers are ops too: :class:`Layer` creates a layer
and makes it current, so every later op lands on it (as in both applications).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ezdxf.document import Drawing

from autocad_bench_evaluator.suite.generators._shapes import Pt, arc_mid, polar, scr_point, scr_points
from autocad_bench_evaluator.suite.librecad import COLOR_ACI, LibreCADScript, fmt

ACI_NAME: dict[int, str] = {aci: name for name, aci in COLOR_ACI.items()}
"""The LibreCAD colour-box entry of each pure AutoCAD colour index."""
COLOR_WORD: dict[int, str] = {1: "red", 2: "yellow", 3: "green", 4: "cyan", 5: "blue", 6: "magenta", 7: "white"}


@dataclass
class GoldState:
    """What the gold builder tracks while adding ops: the current layer."""

    layer: str = "0"


def _attribs(state: GoldState) -> dict[str, str]:
    return {"layer": state.layer}


@dataclass(frozen=True)
class Line:
    """A LINE entity from ``a`` to ``b``; edit tasks select it with a click on its midpoint."""

    a: Pt
    b: Pt

    def gold(self, doc: Drawing, state: GoldState) -> None:
        doc.modelspace().add_line(self.a, self.b, dxfattribs=_attribs(state))

    def librecad(self, script: LibreCADScript) -> None:
        script.lines(self.a, self.b)

    def autocad(self) -> list[str]:
        return [f"_.LINE {scr_point(self.a)} {scr_point(self.b)} "]

    def pick(self) -> Pt:
        return ((self.a[0] + self.b[0]) / 2, (self.a[1] + self.b[1]) / 2)

    def moved(self, dx: float, dy: float) -> Line:
        return Line(_add(self.a, dx, dy), _add(self.b, dx, dy))


@dataclass(frozen=True)
class Circle:
    """A CIRCLE entity; edit tasks select it with a click on its rightmost point (angle 0)."""

    center: Pt
    radius: float

    def gold(self, doc: Drawing, state: GoldState) -> None:
        doc.modelspace().add_circle(self.center, self.radius, dxfattribs=_attribs(state))

    def librecad(self, script: LibreCADScript) -> None:
        script.circle(self.center, self.radius)

    def autocad(self) -> list[str]:
        return [f"_.CIRCLE {scr_point(self.center)} {fmt(self.radius)}"]

    def pick(self) -> Pt:
        return polar(self.center, self.radius, 0.0)

    def moved(self, dx: float, dy: float) -> Circle:
        return Circle(_add(self.center, dx, dy), self.radius)


@dataclass(frozen=True)
class Arc:
    """A counter-clockwise arc from ``start`` to ``end`` degrees (drawn in LibreCAD through 3 points)."""

    center: Pt
    radius: float
    start: float
    end: float

    def gold(self, doc: Drawing, state: GoldState) -> None:
        doc.modelspace().add_arc(self.center, self.radius, self.start, self.end, dxfattribs=_attribs(state))

    def points(self) -> tuple[Pt, Pt, Pt]:
        c, r = self.center, self.radius
        return polar(c, r, self.start), arc_mid(c, r, self.start, self.end), polar(c, r, self.end)

    def librecad(self, script: LibreCADScript) -> None:
        script.arc3(*self.points())

    def autocad(self) -> list[str]:
        first, _, last = self.points()
        return [f"_.ARC _C {scr_point(self.center)} {scr_point(first)} {scr_point(last)}"]

    def pick(self) -> Pt:
        return self.points()[1]

    def moved(self, dx: float, dy: float) -> Arc:
        return Arc(_add(self.center, dx, dy), self.radius, self.start, self.end)


@dataclass(frozen=True)
class Poly:
    """One polyline through ``points``; ``rect`` draws a closed axis-aligned rectangle with the rect tool."""

    points: tuple[Pt, ...]
    closed: bool = True
    rect: bool = False

    @classmethod
    def rectangle(cls, corner: Pt, width: float, height: float) -> Poly:
        x, y = corner
        return cls(((x, y), (x + width, y), (x + width, y + height), (x, y + height)), closed=True, rect=True)

    def gold(self, doc: Drawing, state: GoldState) -> None:
        doc.modelspace().add_lwpolyline(list(self.points), close=self.closed, dxfattribs=_attribs(state))

    def librecad(self, script: LibreCADScript) -> None:
        if self.rect:
            script.rectangle(self.points[0], self.points[2])
        else:
            script.polyline(self.points, closed=self.closed)

    def autocad(self) -> list[str]:
        if self.rect:
            return [f"_.RECTANG {scr_point(self.points[0])} {scr_point(self.points[2])}"]
        points = scr_points(list(self.points))
        return [f"_.PLINE {points} _C" if self.closed else f"_.PLINE {points} "]  # a trailing space ends PLINE

    def pick(self) -> Pt:
        a, b = self.points[0], self.points[1]
        return ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)

    def moved(self, dx: float, dy: float) -> Poly:
        return Poly(tuple(_add(p, dx, dy) for p in self.points), self.closed, self.rect)


@dataclass(frozen=True)
class Text:
    """A single-line TEXT, left aligned on its baseline at ``insert``."""

    content: str
    height: float
    insert: Pt

    def gold(self, doc: Drawing, state: GoldState) -> None:
        doc.modelspace().add_text(self.content, height=self.height, dxfattribs=_attribs(state)).set_placement(
            self.insert
        )

    def librecad(self, script: LibreCADScript) -> None:
        script.text(self.content, self.height, self.insert)

    def autocad(self) -> list[str]:
        return ["_.TEXT", scr_point(self.insert), fmt(self.height), "0", self.content, ""]

    def pick(self) -> Pt:
        return self.insert


@dataclass(frozen=True)
class Layer:
    """Create layer ``name`` with AutoCAD colour ``aci`` (a pure colour) and make it current."""

    name: str
    aci: int = 7

    def gold(self, doc: Drawing, state: GoldState) -> None:
        if self.name not in doc.layers:
            doc.layers.add(self.name, color=self.aci)
        state.layer = self.name

    def librecad(self, script: LibreCADScript) -> None:
        script.add_layer(self.name, ACI_NAME[self.aci])

    def autocad(self) -> list[str]:
        return ["-LAYER", "_M", self.name, "_C", str(self.aci), self.name, ""]

    def pick(self) -> Pt:  # pragma: no cover - a layer has no outline
        raise TypeError("a layer cannot be picked")


@dataclass(frozen=True)
class DimLinear:
    """A horizontal (``dh``) or vertical (``dv``) dimension from ``p1`` to ``p2``, line through ``location``."""

    kind: str
    p1: Pt
    p2: Pt
    location: Pt

    def gold(self, doc: Drawing, state: GoldState) -> None:
        vertical = self.kind == "dv"
        base = (self.p2[0], self.location[1]) if not vertical else (self.location[0], self.p2[1])
        dim = doc.modelspace().add_linear_dim(
            base=base,
            p1=self.p1,
            p2=self.p2,
            angle=90.0 if vertical else 0.0,
            dimstyle="Standard",
            dxfattribs=_attribs(state),
        )
        dim.render()
        dim.dimension.dxf.defpoint = (*base, 0.0)  # on the dimension line, level with p2 (as both CADs store it)

    def librecad(self, script: LibreCADScript) -> None:
        script.dim_linear(self.kind, self.p1, self.p2, self.location)

    def autocad(self) -> list[str]:
        return [f"_.DIMLINEAR {scr_point(self.p1)} {scr_point(self.p2)} {scr_point(self.location)}"]

    def pick(self) -> Pt:  # pragma: no cover - dimensions are never edited by the families
        raise TypeError("dimensions are not picked")


@dataclass(frozen=True)
class DimRadial:
    """A radius (``dimradius``) or diameter (``dimdiameter``) dimension of a circle, leader at ``angle``."""

    kind: str
    center: Pt
    radius: float
    angle: float = 45.0
    reach: float = 20.0

    def gold(self, doc: Drawing, state: GoldState) -> None:
        msp = doc.modelspace()
        if self.kind == "dimradius":
            msp.add_radius_dim(
                center=self.center,
                radius=self.radius,
                angle=self.angle,
                dimstyle="Standard",
                dxfattribs=_attribs(state),
            ).render()
            return
        dim = msp.add_diameter_dim(
            center=self.center, radius=self.radius, angle=self.angle, dimstyle="Standard", dxfattribs=_attribs(state)
        )
        dim.render()
        entity = dim.dimension  # both CADs keep the picked side's point as defpoint4
        entity.dxf.defpoint, entity.dxf.defpoint4 = entity.dxf.defpoint4, entity.dxf.defpoint

    def location(self) -> Pt:
        return polar(self.center, self.radius + self.reach, self.angle)

    def librecad(self, script: LibreCADScript) -> None:
        script.dim_circle(self.kind, polar(self.center, self.radius, 0.0), self.location())

    def autocad(self) -> list[str]:
        command = "_.DIMRADIUS" if self.kind == "dimradius" else "_.DIMDIAMETER"
        return [f"{command} {scr_point(polar(self.center, self.radius, 0.0))} {scr_point(self.location())}"]

    def pick(self) -> Pt:  # pragma: no cover
        raise TypeError("dimensions are not picked")


@dataclass(frozen=True)
class SolidHatch:
    """A SOLID hatch of the closed ``boundary`` (already drawn), selected by a click on ``edge``."""

    boundary: tuple[Pt, ...]
    edge: Pt
    inside: Pt

    def gold(self, doc: Drawing, state: GoldState) -> None:
        hatch = doc.modelspace().add_hatch(color=256, dxfattribs=_attribs(state))
        hatch.set_solid_fill(color=256)
        hatch.paths.add_polyline_path(list(self.boundary), is_closed=True)

    def librecad(self, script: LibreCADScript) -> None:
        script.hatch_solid(self.edge)

    def autocad(self) -> list[str]:
        return ["-HATCH", "_P", "_SOLID", scr_point(self.inside), ""]

    def pick(self) -> Pt:  # pragma: no cover
        raise TypeError("hatches are not picked")


@dataclass(frozen=True)
class DimAligned:
    """An aligned dimension from ``p1`` to ``p2`` whose dimension line passes through ``location``."""

    p1: Pt
    p2: Pt
    location: Pt

    def gold(self, doc: Drawing, state: GoldState) -> None:
        (x1, y1), (x2, y2) = self.p1, self.p2
        length = math.hypot(x2 - x1, y2 - y1)
        mid = ((x1 + x2) / 2, (y1 + y2) / 2)
        # signed distance of the dimension line from p1-p2 (positive: left of p1 -> p2)
        distance = (-(y2 - y1) * (self.location[0] - mid[0]) + (x2 - x1) * (self.location[1] - mid[1])) / length
        dim = doc.modelspace().add_aligned_dim(
            p1=self.p1, p2=self.p2, distance=distance, dimstyle="Standard", dxfattribs=_attribs(state)
        )
        dim.render()
        entity = dim.dimension
        entity.dxf.dimtype = 33  # aligned (ezdxf writes a rotated linear dimension)
        entity.dxf.defpoint = (x2 + self.location[0] - mid[0], y2 + self.location[1] - mid[1], 0.0)

    def librecad(self, script: LibreCADScript) -> None:
        script.dim_linear("da", self.p1, self.p2, self.location)

    def autocad(self) -> list[str]:
        return [f"_.DIMALIGNED {scr_point(self.p1)} {scr_point(self.p2)} {scr_point(self.location)}"]

    def pick(self) -> Pt:  # pragma: no cover
        raise TypeError("dimensions are not picked")


@dataclass(frozen=True)
class SymbolBlock:
    """Block ``name`` (a circle of ``radius`` and a centre cross of half-length ``arm``, base point
    at the centre) drawn at ``points[0]``, turned into the block there and inserted at the rest.

    In LibreCAD the block is made from *everything drawn so far* (select all), so a plan must
    put this op first.
    """

    name: str
    radius: float
    arm: float
    points: tuple[Pt, ...]

    def gold(self, doc: Drawing, state: GoldState) -> None:
        block = doc.blocks.new(self.name, base_point=(0.0, 0.0))
        block.add_circle((0.0, 0.0), self.radius)
        block.add_line((-self.arm, 0.0), (self.arm, 0.0))
        block.add_line((0.0, -self.arm), (0.0, self.arm))
        for at in self.points:
            doc.modelspace().add_blockref(self.name, at, dxfattribs=_attribs(state))

    def librecad(self, script: LibreCADScript) -> None:
        x, y = self.points[0]
        script.circle((x, y), self.radius)
        script.lines((x - self.arm, y), (x + self.arm, y))
        script.lines((x, y - self.arm), (x, y + self.arm))
        script.create_block(self.name, (x, y))
        if len(self.points) > 1:
            script.insert_block(0, self.points[1:])

    def autocad(self) -> list[str]:
        x, y = self.points[0]
        r, a = self.radius, self.arm
        lines = [
            f"_.CIRCLE {scr_point((x, y))} {fmt(r)}",
            f"_.LINE {scr_point((x - a, y))} {scr_point((x + a, y))} ",
            f"_.LINE {scr_point((x, y - a))} {scr_point((x, y + a))} ",
            "-BLOCK",
            self.name,
            scr_point((x, y)),
            "_C",
            scr_point((x - max(r, a) - 2, y - max(r, a) - 2)),
            scr_point((x + max(r, a) + 2, y + max(r, a) + 2)),
            "",
        ]
        for at in self.points:
            lines += ["-INSERT", self.name, scr_point(at), "1", "1", "0"]
        return lines

    def pick(self) -> Pt:  # pragma: no cover
        raise TypeError("blocks are not picked")


Op = Line | Circle | Arc | Poly | Text | Layer | DimLinear | DimRadial | DimAligned | SolidHatch | SymbolBlock
Shape = Line | Circle | Arc | Poly
"""Ops an edit task may select, move or erase."""


@dataclass(frozen=True)
class Erase:
    """Select the template entities through ``picks`` (one click each) and erase them."""

    picks: tuple[Pt, ...]

    def librecad(self, script: LibreCADScript) -> None:
        script.select_at(*self.picks)
        script.erase_selection()

    def autocad(self) -> list[str]:
        return ["_.ERASE", *(scr_point(p) for p in self.picks), ""]


@dataclass(frozen=True)
class UseLayer:
    """Make the existing layer ``name`` current (the template already defines it)."""

    name: str
    layers: tuple[str, ...] = field(default=())

    def librecad(self, script: LibreCADScript) -> None:
        from autocad_bench_evaluator.suite.generators.annotation import layer_row

        script.activate_layer(layer_row(self.name, self.layers))

    def autocad(self) -> list[str]:
        return ["-LAYER", "_S", self.name, ""]


@dataclass(frozen=True)
class Modify:
    """Select the template entities through ``picks`` and apply one modify command to them.

    ``command`` is ``move`` or ``copy`` (by ``target - base``), ``rotate`` (about ``base`` by
    ``angle`` degrees counter-clockwise), ``scale`` (about ``base`` by ``factor``) or ``mirror``
    (about the line ``base``-``axis_end``, keeping the originals when ``keep``). ``result`` are
    the shapes the command leaves behind: the gold gets them, and the plan's ``erased`` removes
    the originals the command deletes. LibreCAD runs its own command (``mv``, ``ro``, ``sz``,
    ``mi`` and their option dialogs); AutoCAD gets MOVE, COPY, ROTATE, SCALE or MIRROR.
    """

    picks: tuple[Pt, ...]
    command: str
    result: tuple[Line | Circle | Arc | Poly, ...]
    base: Pt
    target: Pt = (0.0, 0.0)
    angle: float = 0.0
    factor: float = 1.0
    axis_end: Pt = (0.0, 0.0)
    keep: bool = False

    def gold(self, doc: Drawing, state: GoldState) -> None:
        for shape in self.result:
            shape.gold(doc, state)

    def librecad(self, script: LibreCADScript) -> None:
        script.select_at(*self.picks)
        if self.command in ("move", "copy"):
            script.move_selection(self.base, self.target, copy=self.command == "copy")
        elif self.command == "rotate":
            script.rotate_selection(self.base, self.angle)
        elif self.command == "scale":
            script.scale_selection(self.base, self.factor)
        elif self.command == "mirror":
            script.mirror_selection(self.base, self.axis_end, keep_original=self.keep)
        else:  # pragma: no cover - a programming error in a family
            raise ValueError(f"unknown modify command {self.command!r}")

    def autocad(self) -> list[str]:
        picks = [scr_point(p) for p in self.picks]
        base = scr_point(self.base)
        if self.command == "move":
            return ["_.MOVE", *picks, "", base, scr_point(self.target)]
        if self.command == "copy":
            return ["_.COPY", *picks, "", base, scr_point(self.target), ""]
        if self.command == "rotate":
            return ["_.ROTATE", *picks, "", base, fmt(self.angle)]
        if self.command == "scale":
            return ["_.SCALE", *picks, "", base, fmt(self.factor)]
        return ["_.MIRROR", *picks, "", base, scr_point(self.axis_end), "_N" if self.keep else "_Y"]


Step = Op | Erase | UseLayer | Modify
"""What a reference solution does, in order."""


def _add(p: Pt, dx: float, dy: float) -> Pt:
    return (round(p[0] + dx, 9), round(p[1] + dy, 9))


def rotate(p: Pt, center: Pt, angle_deg: float) -> Pt:
    """``p`` rotated counter-clockwise about ``center`` (rounded to 9 decimals)."""
    a = math.radians(angle_deg)
    x, y = p[0] - center[0], p[1] - center[1]
    return (
        round(center[0] + x * math.cos(a) - y * math.sin(a), 9),
        round(center[1] + x * math.sin(a) + y * math.cos(a), 9),
    )

"""Tier "3d" (AutoCAD track only): extrude, revolve and boolean operations on 3D solids.

Gold solids are polyhedral ACIS bodies built by ezdxf from meshes (curved faces approximated
by :data:`SEGMENTS` facets); scoring uses their isolated physical 3D extents (schema v4),
which the approximation reproduces exactly because a vertex sits on every axis direction.
"""

from __future__ import annotations

import math
from typing import Any

from ezdxf.addons.pycsg import CSG
from ezdxf.document import Drawing
from ezdxf.render import forms

from autocad_bench_evaluator.suite.definitions import AUTOCAD_ONLY, TaskDefinition
from autocad_bench_evaluator.suite.drawing import View, add_solid_from_mesh

SEGMENTS = 64
"""Facets around a cylinder (a multiple of 4: extents stay exact)."""

SCORING = {
    "schema_version": 4,
    "position": "fixed",
    "weights": {"entities": 0.3, "dimensions": 0.0, "layers": 0.0, "topology": 0.0, "text": 0.0, "extents3d": 0.7},
    "pass_threshold": 0.95,
    "ignore_layers": ["Defpoints"],
}
VIEW = View(center=(60.0, 40.0), height=200.0)


def box(x0: float, y0: float, z0: float, dx: float, dy: float, dz: float) -> Any:
    """A closed box mesh from the corner ``(x0, y0, z0)`` with sizes ``dx`` x ``dy`` x ``dz``."""
    return forms.cube(center=False).scale(dx, dy, dz).translate(x0, y0, z0)


def cylinder_z(cx: float, cy: float, z0: float, radius: float, height: float) -> Any:
    """A cylinder mesh along z, axis through ``(cx, cy)``, from ``z0`` up to ``z0 + height``."""
    return forms.cylinder(count=SEGMENTS, radius=radius, top_center=(0, 0, height)).translate(cx, cy, z0)


def cylinder_x(x0: float, radius: float, length: float) -> Any:
    """A cylinder on the x axis from ``x0`` to ``x0 + length``."""
    mesh = forms.cylinder(count=SEGMENTS, radius=radius, top_center=(0, 0, length))
    mesh.rotate_y(math.pi / 2)  # z axis onto x axis
    return mesh.translate(x0, 0, 0)


Polyline = list[tuple[float, float, float]]


def box_edges(x0: float, y0: float, z0: float, dx: float, dy: float, dz: float) -> list[Polyline]:
    """The twelve edges of a box as two rings and four vertical lines."""
    x1, y1, z1 = x0 + dx, y0 + dy, z0 + dz
    ring = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]
    edges: list[Polyline] = [[(x, y, z) for x, y in ring] for z in (z0, z1)]
    edges += [[(x, y, z0), (x, y, z1)] for x, y in ring[:4]]
    return edges


def circle_edges(center: tuple[float, float, float], radius: float, axis: str, length: float) -> list[Polyline]:
    """End circles and four isolines of a cylinder along ``axis`` ("x" or "z") from ``center``."""

    def at(t: float, angle: float, r: float = radius) -> tuple[float, float, float]:
        u, v = r * math.cos(angle), r * math.sin(angle)
        cx, cy, cz = center
        return (cx + t, cy + u, cz + v) if axis == "x" else (cx + u, cy + v, cz + t)

    steps = [2 * math.pi * i / SEGMENTS for i in range(SEGMENTS + 1)]
    edges: list[Polyline] = [[at(t, a) for a in steps] for t in (0.0, length)]
    edges += [[at(0.0, a), at(length, a)] for a in (0.0, math.pi / 2, math.pi, 3 * math.pi / 2)]
    return edges


def _extrude_gold(doc: Drawing) -> None:
    add_solid_from_mesh(doc, box(0, 0, 0, 120, 80, 15))


def _revolve_gold(doc: Drawing) -> None:
    shaft = CSG(cylinder_x(0, 20, 60)) + CSG(cylinder_x(60, 12.5, 40))
    add_solid_from_mesh(doc, shaft.mesh())


def _subtract_gold(doc: Drawing) -> None:
    plate = CSG(box(0, 0, 0, 100, 60, 20)) - CSG(cylinder_z(50, 30, 0, 10, 20))
    add_solid_from_mesh(doc, plate.mesh())


def _union_gold(doc: Drawing) -> None:
    bracket = CSG(box(0, 0, 0, 80, 60, 10)) + CSG(box(0, 0, 10, 10, 60, 50))
    add_solid_from_mesh(doc, bracket.mesh())


def _bracket_edges() -> list[Polyline]:
    """The outline of the L section extruded along y (the union hides the shared face)."""
    section = [(0, 0), (80, 0), (80, 10), (10, 10), (10, 60), (0, 60), (0, 0)]
    edges: list[Polyline] = [[(float(x), y, float(z)) for x, z in section] for y in (0.0, 60.0)]
    edges += [[(float(x), 0.0, float(z)), (float(x), 60.0, float(z))] for x, z in section[:6]]
    return edges


TASKS: tuple[TaskDefinition, ...] = (
    TaskDefinition(
        task_id="solid-extrude-plate",
        title="Extruded plate",
        brief=(
            "Make a 3D solid plate: draw a closed rectangle 120 by 80 with one corner at (0,0) in the XY plane "
            "and extrude it 15 in the +Z direction, giving one solid from (0,0,0) to (120,80,15)."
        ),
        tier="3d",
        apps=AUTOCAD_ONLY,
        gold=_extrude_gold,
        wireframe=lambda: box_edges(0, 0, 0, 120, 80, 15),
        scoring=SCORING,
        view=VIEW,
        autocad=("_.RECTANG 0,0 120,80", "_.EXTRUDE", "_L", "", "15"),
    ),
    TaskDefinition(
        task_id="solid-revolve-shaft",
        title="Revolved stepped shaft",
        brief=(
            "Make a stepped shaft as one 3D solid by revolving a closed profile 360 degrees about the X axis: "
            "diameter 40 from x = 0 to x = 60, then diameter 25 from x = 60 to x = 100. The profile in the XY "
            "plane runs (0,0), (0,20), (60,20), (60,12.5), (100,12.5), (100,0)."
        ),
        tier="3d",
        apps=AUTOCAD_ONLY,
        gold=_revolve_gold,
        wireframe=lambda: circle_edges((0, 0, 0), 20, "x", 60) + circle_edges((60, 0, 0), 12.5, "x", 40),
        scoring=SCORING,
        view=VIEW,
        autocad=(
            "_.PLINE 0,0 0,20 60,20 60,12.5 100,12.5 100,0 _C",
            "_.REVOLVE",
            "_L",
            "",
            "_X",
            "360",
        ),
    ),
    TaskDefinition(
        task_id="solid-subtract-plate-hole",
        title="Plate with a drilled hole (subtract)",
        brief=(
            "Make a 3D box from (0,0,0) to (100,60,20) and subtract a cylinder of diameter 20 through its full "
            "thickness with its axis vertical at (50,30), leaving one solid plate with a through hole."
        ),
        tier="3d",
        apps=AUTOCAD_ONLY,
        gold=_subtract_gold,
        wireframe=lambda: box_edges(0, 0, 0, 100, 60, 20) + circle_edges((50, 30, 0), 10, "z", 20),
        scoring=SCORING,
        view=VIEW,
        autocad=(
            "_.BOX 0,0,0 100,60,20",
            "_.CYLINDER 50,30,0 10 20",
            "_.SUBTRACT",
            "(entnext)",
            "",
            "_L",
            "",
        ),
    ),
    TaskDefinition(
        task_id="solid-union-bracket",
        title="L bracket from two boxes (union)",
        brief=(
            "Make an L-shaped bracket as one 3D solid: a base box from (0,0,0) to (80,60,10) and an upright box "
            "from (0,0,10) to (10,60,60), joined with a union."
        ),
        tier="3d",
        apps=AUTOCAD_ONLY,
        gold=_union_gold,
        wireframe=lambda: _bracket_edges(),
        scoring=SCORING,
        view=VIEW,
        autocad=(
            "_.BOX 0,0,0 80,60,10",
            "_.BOX 0,0,10 10,60,60",
            "_.UNION",
            "_ALL",
            "",
        ),
    ),
)

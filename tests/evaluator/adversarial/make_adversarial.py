"""The committed adversarial set: one family's representative attacked in every cheap way.

Run from the repository root to regenerate the committed drawings and their manifest::

    UV_PYTHON_DOWNLOADS=never uv run python tests/evaluator/adversarial/make_adversarial.py

(``--family ID`` limits the run to some families, ``--out DIR`` writes somewhere else; a partial
run writes a partial manifest.) It writes ``<family>--<attack>.dxf`` next to this file for the
representative instance of every family of :func:`~autocad_bench_evaluator.suite.families.families`
(the family's first instance in :func:`~autocad_bench_evaluator.suite.registry.list_tasks` order),
plus ``bounds.json``: for each file its task, family, attack, what was done and the bound
``tests/evaluator/test_adversarial_sets.py`` enforces when it scores the file against the task's
gold.

The attacks (every one built with ezdxf from the instance's gold or template document, seeded by
the task id, written with the suite's deterministic writer
:func:`~autocad_bench_evaluator.suite.drawing.document_bytes`):

============== =================================================================== =====================
attack         drawing                                                             bound
============== =================================================================== =====================
empty          the template as it is (for an edit task: the no-op)                  score == 0
shotgun        the template plus 200 lines and 200 circles (radii 1..100) spread    score < 0.05
               over x 0..400, y 0..200
junk           the gold plus 60 random lines and circles                            not passed
duplicated     every model-space entity of the gold twice                           not passed
scaled         the gold scaled 1.02 about the centre of its extents                 not passed
shifted        the gold moved by (3, 2)                                             fixed: not passed;
                                                                                    free: passed, 1.0
mirrored       the gold mirrored about the vertical line through its extents        not passed, or
               centre                                                               n/a (symmetric)
wrong-layer    every gold entity on layer "0" (on "ADVERSARIAL" if it all was on    not passed
               "0"); only where layers are scored (required layers or a positive
               layers weight)
redraw-on-top  edit tasks: the template with the whole gold drawn over it (the      not passed
               lazy edit that never erases)
============== =================================================================== =====================

``mirrored`` is "n/a (symmetric)" when the mirror maps the gold onto itself: the sets of
geometric descriptors (lines, arcs, circles, exploded polylines and block references, hatch
boundaries, texts, dimension points, ACIS mesh faces, each with its layer, coordinates rounded to
1e-4) of the gold and of the mirrored gold are equal. The mirror keeps the extents, so a drawing
congruent to its mirror image up to a translation is one the mirror maps onto itself; then the
mirrored drawing *is* the gold and must pass, on fixed and free tasks alike.

Attacks that pass today because of a scoring hole are listed in :data:`KNOWN_HOLES` (family,
attack -> why); the manifest carries the explanation as ``known_hole`` and the test expects
them to fail their bound (``xfail(strict=True)``): closing the hole turns the test red until the
entry is removed here and the set is regenerated.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezdxf import bbox
from ezdxf.document import Drawing
from ezdxf.math import Matrix44

HERE = Path(__file__).resolve().parent
MANIFEST_NAME = "bounds.json"
MANIFEST = HERE / MANIFEST_NAME
REGENERATE = "UV_PYTHON_DOWNLOADS=never uv run python tests/evaluator/adversarial/make_adversarial.py"

_ACIS = frozenset({"3DSOLID", "REGION", "BODY", "SURFACE"})

# --- attacks and bounds ---------------------------------------------------------------------

EMPTY = "empty"
SHOTGUN = "shotgun"
JUNK = "junk"
DUPLICATED = "duplicated"
SCALED = "scaled"
SHIFTED = "shifted"
MIRRORED = "mirrored"
WRONG_LAYER = "wrong-layer"
REDRAW_ON_TOP = "redraw-on-top"
ATTACKS: tuple[str, ...] = (EMPTY, SHOTGUN, JUNK, DUPLICATED, SCALED, SHIFTED, MIRRORED, WRONG_LAYER, REDRAW_ON_TOP)

BOUND_ZERO = "score == 0"
BOUND_SHOTGUN = "score < 0.05"
BOUND_FAIL = "not passed"
BOUND_PASS = "passed (score 1.0)"
BOUND_SYMMETRIC = "n/a (symmetric)"
BOUNDS: dict[str, str] = {
    BOUND_ZERO: "the report's score is exactly 0.0",
    BOUND_SHOTGUN: "the report's score is below SHOTGUN_MAX (0.05)",
    BOUND_FAIL: "the report is not passed",
    BOUND_PASS: "the report is passed and its score is 1.0 within 1e-6 (translation invariance of free tasks)",
    BOUND_SYMMETRIC: "the mirror maps the gold onto itself: the drawing is the gold and must pass (sanity check)",
}
SHOTGUN_MAX = 0.05
SHOTGUN_LINES = 200
SHOTGUN_CIRCLES = 200
JUNK_ENTITIES = 60
AREA = (0.0, 0.0, 400.0, 200.0)
"""The working area the shotgun and the junk are spread over: x 0..400, y 0..200."""
SCALE = 1.02
SHIFT = (3.0, 2.0)
ATTACK_LAYER = "ADVERSARIAL"

KNOWN_HOLES: dict[tuple[str, str], str] = {}
"""(family id, attack) -> why that attack meets no bound today. Filled from the test's findings;
remove an entry (and regenerate) once scoring closes the hole."""


@dataclass(frozen=True)
class Attack:
    """One attack drawing of a representative: ``bytes`` are the DXF file."""

    family: str
    skill: str
    task_id: str
    position: str
    attack: str
    description: str
    bound: str
    data: bytes

    @property
    def filename(self) -> str:
        return f"{self.family}--{self.attack}.dxf"

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "task_id": self.task_id,
            "family": self.family,
            "skill": self.skill,
            "position": self.position,
            "attack": self.attack,
            "description": self.description,
            "bound": self.bound,
        }
        hole = KNOWN_HOLES.get((self.family, self.attack))
        if hole is not None:
            entry["known_hole"] = hole
        return entry


# --- geometry helpers -----------------------------------------------------------------------


def _acis_meshes(entity: Any) -> list[Any]:
    from ezdxf.acis.dxf import load_dxf
    from ezdxf.acis.mesh import mesh_from_body

    return [mesh for body in load_dxf(entity) for mesh in mesh_from_body(body)]


def extents_centre(doc: Drawing) -> tuple[float, float, float]:
    """Centre of the model space's bounding box (ACIS bodies by their mesh vertices)."""
    msp = doc.modelspace()
    lo = [math.inf] * 3
    hi = [-math.inf] * 3

    def add(point: Iterable[float]) -> None:
        for i, v in enumerate(point):
            lo[i] = min(lo[i], v)
            hi[i] = max(hi[i], v)

    flat = [e for e in msp if e.dxftype() not in _ACIS]
    box = bbox.extents(flat, fast=True) if flat else None
    if box is not None and box.has_data:
        add(box.extmin)
        add(box.extmax)
    for e in msp:
        if e.dxftype() in _ACIS:
            for mesh in _acis_meshes(e):
                for v in mesh.vertices:
                    add((v.x, v.y, v.z))
    if not math.isfinite(lo[0]):
        return (0.0, 0.0, 0.0)
    return ((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2)


def transform(doc: Drawing, matrix: Matrix44) -> None:
    """Apply ``matrix`` to every model-space entity; ACIS bodies through their polyhedral mesh
    (with the suite's fixed SAT header date, so the bytes stay reproducible)."""
    from autocad_bench_evaluator.suite.drawing import fixed_sat

    for e in list(doc.modelspace()):
        if e.dxftype() in _ACIS:
            from ezdxf.acis.entities import export_sat
            from ezdxf.acis.mesh import body_from_mesh

            bodies = []
            for mesh in _acis_meshes(e):
                mesh.transform(matrix)
                if matrix.determinant() < 0:  # a mirror turns the faces inside out: keep them outward
                    mesh.flip_normals()
                bodies.append(body_from_mesh(mesh))
            e.sat = fixed_sat(export_sat(bodies))  # type: ignore[attr-defined]
        else:
            e.transform(matrix)


def _about_centre(doc: Drawing, matrix: Matrix44) -> Matrix44:
    cx, cy, cz = extents_centre(doc)
    return Matrix44.chain(Matrix44.translate(-cx, -cy, -cz), matrix, Matrix44.translate(cx, cy, cz))


# --- symmetry: the gold's geometry as a set of descriptors ------------------------------------

_DIGITS = 4


def _n(value: float) -> float:
    return round(float(value), _DIGITS) + 0.0


def _p(point: Any) -> tuple[float, ...]:
    return tuple(_n(v) for v in tuple(point)[:3])


def _descriptors(entity: Any, layer: str | None = None, depth: int = 0) -> list[tuple[Any, ...]]:
    """Geometric descriptors of ``entity`` that a mirror onto itself leaves unchanged (as a set)."""
    kind = entity.dxftype()
    layer = layer if layer is not None else entity.dxf.get("layer", "0")
    if kind == "LINE":
        return [("LINE", layer, frozenset({_p(entity.dxf.start), _p(entity.dxf.end)}))]
    if kind == "CIRCLE":  # in WCS: ezdxf mirrors circles and arcs by flipping their extrusion
        return [("CIRCLE", layer, _p(entity.ocs().to_wcs(entity.dxf.center)), _n(entity.dxf.radius))]
    if kind == "ARC":
        arc = entity.construction_tool()
        ocs = entity.ocs()
        on_arc = [ocs.to_wcs(arc.center + _polar(arc.radius, a)) for a in arc.angles(3)]
        ends = frozenset({_p(on_arc[0]), _p(on_arc[2])})
        return [("ARC", layer, _p(ocs.to_wcs(arc.center)), _n(arc.radius), ends, _p(on_arc[1]))]
    if kind == "POINT":
        return [("POINT", layer, _p(entity.dxf.location))]
    if kind in ("LWPOLYLINE", "POLYLINE") or (kind == "INSERT" and depth < 4):
        found: list[tuple[Any, ...]] = []
        if kind == "INSERT":
            # The block and where it is; what it draws is in its exploded entities below. Its
            # rotation and scale factors are not: a symmetric block mirrored (negative scale)
            # or turned by its symmetry draws the same, and the scorer compares it so.
            found.append(("INSERT", layer, entity.dxf.name, _p(entity.dxf.insert)))
        for sub in entity.virtual_entities():
            sub_layer = sub.dxf.get("layer", "0")
            found.extend(_descriptors(sub, layer if kind != "INSERT" or sub_layer == "0" else sub_layer, depth + 1))
        return found
    if kind in ("TEXT", "MTEXT"):
        text = entity.dxf.text if kind == "TEXT" else entity.text
        attrs = tuple(sorted((k, repr(v)) for k, v in entity.dxfattribs(drop={"handle", "owner"}).items()))
        return [(kind, layer, text, attrs)]
    if kind == "HATCH":
        points: set[tuple[float, ...]] = set()
        for path in entity.paths:
            for vertex in getattr(path, "vertices", ()):
                points.add(_p((vertex[0], vertex[1])))
            for edge in getattr(path, "edges", ()):
                for name in ("start", "end", "center"):
                    if hasattr(edge, name):
                        points.add(_p(getattr(edge, name)))
        return [("HATCH", layer, entity.dxf.pattern_name, entity.dxf.solid_fill, frozenset(points))]
    if kind == "DIMENSION":
        names = ("defpoint", "defpoint2", "defpoint3", "defpoint4", "defpoint5")
        points = {_p(entity.dxf.get(name)) for name in names if entity.dxf.hasattr(name)}
        return [
            ("DIMENSION", layer, entity.dxf.dimtype, frozenset(points), _p(entity.dxf.get("text_midpoint", (0, 0))))
        ]
    if kind in _ACIS:
        return [(kind, layer, _plane_areas(entity))]
    return [(kind, layer, entity.dxf.handle)]  # anything else: never taken as symmetric


def _plane_areas(entity: Any) -> frozenset[tuple[float, ...]]:
    """An ACIS body as the area of its surface in every plane: (unit normal, offset, area) with
    the normal's sign made canonical. Independent of how the faces are triangulated (the CSG
    meshes of the golds are not triangulated symmetrically even where the solid is)."""
    from ezdxf.math import Vec3

    areas: dict[tuple[float, ...], float] = {}
    for mesh in _acis_meshes(entity):
        for face in mesh.faces:
            ring = [Vec3(mesh.vertices[i]) for i in face]
            newell = sum((a.cross(b) for a, b in zip(ring, ring[1:] + ring[:1], strict=True)), Vec3())
            if newell.magnitude < 1e-12:
                continue
            normal = newell.normalize()
            if next(v for v in (_n(normal.x), _n(normal.y), _n(normal.z), 1.0) if v != 0.0) < 0:
                normal = -normal
            key = (_n(normal.x), _n(normal.y), _n(normal.z), _n(normal.dot(ring[0])))
            areas[key] = areas.get(key, 0.0) + newell.magnitude / 2
    return frozenset((*key, round(area, 2) + 0.0) for key, area in areas.items())


def _polar(radius: float, degrees: float) -> Any:
    from ezdxf.math import Vec3

    return Vec3.from_deg_angle(degrees, radius)


def geometry(doc: Drawing) -> frozenset[tuple[Any, ...]]:
    """The model space as a set of geometric descriptors."""
    return frozenset(d for e in doc.modelspace() for d in _descriptors(e))


# --- the attacks ----------------------------------------------------------------------------


def _layer(doc: Drawing, name: str) -> str:
    if name not in doc.layers:
        doc.layers.add(name)
    return name


def _random_lines_and_circles(doc: Drawing, rnd: random.Random, lines: int, circles: int) -> None:
    """``lines`` lines of lengths 1..200 and ``circles`` circles of radii 1..100 over :data:`AREA`."""
    msp = doc.modelspace()
    x0, y0, x1, y1 = AREA

    def point() -> tuple[float, float]:
        return (round(rnd.uniform(x0, x1), 3), round(rnd.uniform(y0, y1), 3))

    kinds = ["line"] * lines + ["circle"] * circles
    rnd.shuffle(kinds)
    for kind in kinds:
        if kind == "line":
            sx, sy = point()
            length = rnd.uniform(1.0, 200.0)
            angle = rnd.uniform(0.0, 2 * math.pi)
            end = (round(sx + length * math.cos(angle), 3), round(sy + length * math.sin(angle), 3))
            msp.add_line((sx, sy), end)
        else:
            msp.add_circle(point(), round(rnd.uniform(1.0, 100.0), 3))


def _duplicate(doc: Drawing, source: Drawing | None = None) -> None:
    """Add a copy of every model-space entity of ``source`` (default: ``doc`` itself) to ``doc``."""
    msp = doc.modelspace()
    for e in list((source or doc).modelspace()):
        msp.add_entity(e.copy())


def _representatives() -> list[tuple[Any, str]]:
    """(family, task id of its first instance in suite order) for every family."""
    from autocad_bench_evaluator.suite import registry
    from autocad_bench_evaluator.suite.families import families

    first: dict[str, str] = {}
    for task_id in registry.list_tasks():
        first.setdefault(registry.definition(task_id).family, task_id)
    found = []
    for family in families():
        if family.family_id not in first:
            raise LookupError(f"family {family.family_id} has no instance in the default suite")
        found.append((family, first[family.family_id]))
    return found


def layers_scored(spec: Any) -> bool:
    return bool(spec.required_layers) or spec.weights.layers > 0


def family_attacks(family_id: str, task_id: str) -> list[Attack]:
    """Every attack drawing of the representative ``task_id`` of ``family_id``."""
    from autocad_bench_evaluator.suite import registry
    from autocad_bench_evaluator.suite.drawing import document_bytes

    definition = registry.definition(task_id)
    spec = definition.scoring_spec()
    skill = definition.skill
    free = spec.position == "free"
    found: list[Attack] = []

    def add(attack: str, description: str, bound: str, doc: Drawing) -> None:
        found.append(Attack(family_id, skill, task_id, spec.position, attack, description, bound, document_bytes(doc)))

    def gold() -> Drawing:
        return registry.gold_document(task_id)

    template = registry.template_document(task_id)
    add(EMPTY, "the template as it is" + (" (the no-op edit)" if skill == "edit" else ""), BOUND_ZERO, template)

    doc = registry.template_document(task_id)
    _random_lines_and_circles(doc, random.Random(f"shotgun:{task_id}"), SHOTGUN_LINES, SHOTGUN_CIRCLES)
    add(
        SHOTGUN,
        f"the template plus {SHOTGUN_LINES} lines and {SHOTGUN_CIRCLES} circles over x 0..400, y 0..200",
        BOUND_SHOTGUN,
        doc,
    )

    doc = gold()
    junk = JUNK_ENTITIES // 2
    _random_lines_and_circles(doc, random.Random(f"junk:{task_id}"), junk, JUNK_ENTITIES - junk)
    add(JUNK, f"the gold plus {junk} random lines and {JUNK_ENTITIES - junk} random circles", BOUND_FAIL, doc)

    doc = gold()
    _duplicate(doc)
    add(DUPLICATED, "every model-space entity of the gold twice", BOUND_FAIL, doc)

    doc = gold()
    transform(doc, _about_centre(doc, Matrix44.scale(SCALE)))
    add(SCALED, f"the gold scaled {SCALE} about its extents centre", BOUND_FAIL, doc)

    doc = gold()
    transform(doc, Matrix44.translate(*SHIFT, 0.0))
    add(SHIFTED, f"the gold moved by {SHIFT}", BOUND_PASS if free else BOUND_FAIL, doc)

    doc = gold()
    transform(doc, _about_centre(doc, Matrix44.scale(-1.0, 1.0, 1.0)))
    symmetric = geometry(doc) == geometry(gold())
    add(
        MIRRORED,
        "the gold mirrored about the vertical line through its extents centre"
        + (" (maps the gold onto itself)" if symmetric else ""),
        BOUND_SYMMETRIC if symmetric else BOUND_FAIL,
        doc,
    )

    if layers_scored(spec):
        doc = gold()
        entities = list(doc.modelspace())
        target = "0" if any(e.dxf.layer != "0" for e in entities) else _layer(doc, ATTACK_LAYER)
        for e in entities:
            e.dxf.layer = target
        add(WRONG_LAYER, f"every gold entity on layer {target!r}", BOUND_FAIL, doc)

    if skill == "edit":
        doc = registry.template_document(task_id)
        _duplicate(doc, gold())
        add(REDRAW_ON_TOP, "the template with the whole gold drawn over it (nothing erased)", BOUND_FAIL, doc)
    return found


def generate(out_dir: Path = HERE, family_ids: Iterable[str] | None = None) -> dict[str, Any]:
    """Write the attack drawings of every family (or of ``family_ids``) and the manifest to
    ``out_dir``; returns the manifest."""
    wanted = None if family_ids is None else set(family_ids)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Any]] = {}
    for family, task_id in _representatives():
        if wanted is not None and family.family_id not in wanted:
            continue
        for attack in family_attacks(family.family_id, task_id):
            path = out_dir / attack.filename
            if not path.is_file() or path.read_bytes() != attack.data:
                path.write_bytes(attack.data)
            files[attack.filename] = attack.entry()
    manifest = {
        "about": "adversarial drawings per family; regenerate with: " + REGENERATE,
        "bounds": BOUNDS,
        "files": files,
    }
    (out_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write to (default: next to this file)")
    parser.add_argument("--family", action="append", help="only this family (repeatable)")
    args = parser.parse_args(argv)
    if args.out.resolve() == HERE:
        if args.family is not None:
            parser.error("--family writes a partial manifest: use it with --out DIR, not on the committed set")
        for stale in HERE.glob("*.dxf"):
            stale.unlink()
    manifest = generate(args.out, args.family)
    print(f"wrote {len(manifest['files'])} adversarial drawings and {MANIFEST_NAME} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

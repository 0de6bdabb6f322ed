"""Mutations of task golds that must not pass, and the committed attack drawings made from them.

Run from the repository root to regenerate the committed attack drawings::

    UV_PYTHON_DOWNLOADS=never uv run python tests/evaluator/attacks/make_attacks.py

It writes one ``<name>.dxf`` per entry of :data:`ATTACKS` next to this file, plus
``attacks.json`` (file name -> task, hole of the attack review, what was changed). The
regression tests in ``tests/evaluator/test_scoring_requirements.py`` score the committed files;
the mutation walk there uses :func:`mutations` to build the same kinds of mutation in memory for
every task of the suite.

Every mutation edits an ezdxf document of the gold in place (``registry.gold_document``), so the
result is a drawing any CAD program could have saved.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezdxf import bbox
from ezdxf.document import Drawing
from ezdxf.math import Matrix44

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "attacks.json"

_ACIS = frozenset({"3DSOLID", "REGION", "BODY", "SURFACE"})
_TEXTS = frozenset({"TEXT", "MTEXT"})
DEFAULT_COLOUR = 7
DEFAULT_LINETYPE = "continuous"

Mutate = Callable[[Drawing], None]


@dataclass(frozen=True)
class Mutation:
    """One change of a gold: ``kind`` (the property mutated), a readable label and the edit."""

    kind: str
    label: str
    apply: Mutate


# --- geometry of the whole drawing -----------------------------------------------------------


def _acis_meshes(entity: Any) -> list[Any]:
    from ezdxf.acis.dxf import load_dxf
    from ezdxf.acis.mesh import mesh_from_body

    return [mesh for body in load_dxf(entity) for mesh in mesh_from_body(body)]


def drawing_centre(doc: Drawing) -> tuple[float, float, float]:
    """Centre of the model space's bounding box (3D bodies by their ACIS vertices)."""
    msp = doc.modelspace()
    lo = [math.inf] * 3
    hi = [-math.inf] * 3

    def add(x: float, y: float, z: float) -> None:
        for i, v in enumerate((x, y, z)):
            lo[i] = min(lo[i], v)
            hi[i] = max(hi[i], v)

    flat = [e for e in msp if e.dxftype() not in _ACIS]
    box = bbox.extents(flat, fast=True) if flat else None
    if box is not None and box.has_data:
        add(*box.extmin)
        add(*box.extmax)
    for e in msp:
        if e.dxftype() in _ACIS:
            for mesh in _acis_meshes(e):
                for v in mesh.vertices:
                    add(v.x, v.y, v.z)
    if not math.isfinite(lo[0]):
        return (0.0, 0.0, 0.0)
    return ((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2 if math.isfinite(lo[2]) else 0.0)


def transform(doc: Drawing, matrix: Matrix44) -> None:
    """Apply ``matrix`` to every model-space entity (ACIS bodies through their polyhedral mesh)."""
    for e in list(doc.modelspace()):
        if e.dxftype() in _ACIS:
            from ezdxf.acis.entities import export_sat
            from ezdxf.acis.mesh import body_from_mesh

            bodies = []
            for mesh in _acis_meshes(e):
                mesh.transform(matrix)
                bodies.append(body_from_mesh(mesh))
            e.sat = export_sat(bodies)  # type: ignore[attr-defined]
        else:
            e.transform(matrix)


def scale(factor: float) -> Mutate:
    """Scale the whole drawing by ``factor`` about the centre of its bounding box."""

    def apply(doc: Drawing) -> None:
        cx, cy, cz = drawing_centre(doc)
        transform(
            doc,
            Matrix44.chain(Matrix44.translate(-cx, -cy, -cz), Matrix44.scale(factor), Matrix44.translate(cx, cy, cz)),
        )

    return apply


def shift(dx: float, dy: float) -> Mutate:
    """Translate the whole drawing."""
    return lambda doc: transform(doc, Matrix44.translate(dx, dy, 0.0))


def add_noise(amount: float) -> Mutate:
    """Translate the whole drawing by ``amount`` in x and y (floating-point noise when tiny)."""
    return shift(amount, -amount)


# --- single properties -----------------------------------------------------------------------


def _entity(doc: Drawing, handle: str) -> Any:
    entity = doc.entitydb.get(handle)
    if entity is None:
        raise KeyError(f"no entity {handle} in the gold")
    return entity


def set_layer_colour(name: str, colour: int) -> Mutate:
    def apply(doc: Drawing) -> None:
        doc.layers.get(name).color = colour

    return apply


def set_layer_linetype(name: str, linetype: str) -> Mutate:
    def apply(doc: Drawing) -> None:
        if linetype not in doc.linetypes:
            doc.linetypes.add(linetype, pattern=[10.0, 6.0, -4.0], description=linetype)
        doc.layers.get(name).dxf.linetype = linetype

    return apply


def text_height(handle: str, factor: float) -> Mutate:
    def apply(doc: Drawing) -> None:
        e = _entity(doc, handle)
        attr = "char_height" if e.dxftype() == "MTEXT" else "height"
        e.dxf.set(attr, e.dxf.get(attr) * factor)

    return apply


def text_rotation(handle: str, degrees: float) -> Mutate:
    def apply(doc: Drawing) -> None:
        e = _entity(doc, handle)
        if e.dxftype() == "MTEXT":
            e.set_rotation(e.get_rotation() + degrees)
        else:
            e.dxf.rotation = e.dxf.get("rotation", 0.0) + degrees

    return apply


def swap_hatch_pattern(handle: str) -> Mutate:
    """A solid fill becomes ANSI31, a pattern becomes a solid fill."""

    def apply(doc: Drawing) -> None:
        e = _entity(doc, handle)
        if e.dxf.solid_fill:
            e.set_pattern_fill("ANSI31", scale=1.0)
        else:
            e.set_solid_fill()

    return apply


def add_hatch_over(handle: str) -> Mutate:
    """A solid hatch over the closed polyline or circle ``handle`` (on its layer)."""

    def apply(doc: Drawing) -> None:
        e = _entity(doc, handle)
        hatch = doc.modelspace().add_hatch(dxfattribs={"layer": e.dxf.layer})
        hatch.set_solid_fill()
        if e.dxftype() == "CIRCLE":
            path = hatch.paths.add_edge_path()
            path.add_arc(e.dxf.center, e.dxf.radius, 0.0, 360.0)
        else:
            points = [(x, y, b) for x, y, _, _, b in e.get_points("xyseb")]
            hatch.paths.add_polyline_path(points, is_closed=True)

    return apply


def move_to_layer(handle: str, layer: str) -> Mutate:
    def apply(doc: Drawing) -> None:
        if layer not in doc.layers:
            doc.layers.add(layer)
        _entity(doc, handle).dxf.layer = layer

    return apply


def drop(handle: str) -> Mutate:
    def apply(doc: Drawing) -> None:
        doc.modelspace().delete_entity(_entity(doc, handle))

    return apply


# --- what applies to a gold ------------------------------------------------------------------


def solid_as_box(kind: str) -> Mutate:
    """Replace the gold's solids by one box with their extents: a closed ``mesh`` (a MESH, not a
    solid), an ``open`` ACIS box missing its top face (no volume) or a ``closed`` ACIS box."""

    def apply(doc: Drawing) -> None:
        from autocad_bench_evaluator.suite.drawing import add_solid_from_mesh
        from ezdxf.render import forms

        msp = doc.modelspace()
        solids = [e for e in msp if e.dxftype() in _ACIS]
        points = [v for e in solids for mesh in _acis_meshes(e) for v in mesh.vertices]
        lo = (min(v.x for v in points), min(v.y for v in points), min(v.z for v in points))
        hi = (max(v.x for v in points), max(v.y for v in points), max(v.z for v in points))
        for e in solids:
            msp.delete_entity(e)
        box = forms.cube(center=False).scale(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]).translate(*lo)
        if kind == "open":
            box.faces = [f for f in box.faces if not all(abs(box.vertices[i].z - hi[2]) < 1e-9 for i in f)]
        if kind == "mesh":
            box.render_mesh(msp)
        else:
            add_solid_from_mesh(doc, box)

    return apply


def _closed_profile(e: Any) -> bool:
    if e.dxftype() == "CIRCLE":
        return True
    return e.dxftype() == "LWPOLYLINE" and bool(e.closed) and len(e) >= 3


def _hatched(doc: Drawing, e: Any) -> bool:
    """Whether some hatch of ``doc`` has the bounding box of the profile ``e``."""
    box = bbox.extents([e], fast=True)
    for h in doc.modelspace().query("HATCH"):
        hb = bbox.extents([h], fast=True)
        if (
            hb.has_data
            and box.has_data
            and hb.extmin.isclose(box.extmin, abs_tol=1e-6)
            and hb.extmax.isclose(box.extmax, abs_tol=1e-6)
        ):
            return True
    return False


def _layer_colours_stated(doc: Drawing, used: set[str]) -> bool:
    return any(abs(doc.layers.get(n).color) != DEFAULT_COLOUR for n in used if n in doc.layers)


def mutations(
    doc: Drawing,
    *,
    position: str,
    layers_scored: bool,
    seed: str,
    per_kind: int = 1,
) -> Iterator[Mutation]:
    """Every kind of mutation that applies to the gold ``doc`` (at most ``per_kind`` variants each).

    Variants (which text, which layer, which entity) are chosen by a generator seeded with
    ``seed``, so the same gold always gives the same mutations. ``doc`` is only inspected: each
    mutation is applied to a fresh copy of the gold by the caller.
    """
    rnd = random.Random(seed)
    msp = doc.modelspace()
    entities = list(msp)

    def pick(items: list[Any]) -> list[Any]:
        if len(items) <= per_kind:
            return items
        return rnd.sample(items, per_kind)

    yield Mutation("scale-1.01", "scale 1.01 about the centre", scale(1.01))
    yield Mutation("scale-0.99", "scale 0.99 about the centre", scale(0.99))
    if position == "fixed":
        yield Mutation("shift-1mm", "shift by 1 in x", shift(1.0, 0.0))
    used = {e.dxf.layer for e in entities}
    if layers_scored and _layer_colours_stated(doc, used):
        for name in pick(sorted(n for n in used if n in doc.layers)):
            colour = abs(doc.layers.get(name).color)
            new_colour = 1 if colour != 1 else 3
            yield Mutation(
                "layer-colour", f"layer {name} colour {colour} -> {new_colour}", set_layer_colour(name, new_colour)
            )
    if layers_scored and any(
        doc.layers.get(n).dxf.get("linetype", "Continuous").casefold() != DEFAULT_LINETYPE
        for n in used
        if n in doc.layers
    ):
        for name in pick(sorted(n for n in used if n in doc.layers)):
            current = doc.layers.get(name).dxf.get("linetype", "Continuous")
            other = "Continuous" if current.casefold() != DEFAULT_LINETYPE else "ATTACKDASH"
            yield Mutation(
                "layer-linetype", f"layer {name} linetype {current} -> {other}", set_layer_linetype(name, other)
            )
    texts = [e for e in entities if e.dxftype() in _TEXTS]
    for e in pick(texts):
        yield Mutation("text-height", f"text {e.dxf.handle} height x2", text_height(e.dxf.handle, 2.0))
    for e in pick(texts):
        yield Mutation("text-rotation", f"text {e.dxf.handle} rotated 90", text_rotation(e.dxf.handle, 90.0))
    for e in pick([e for e in entities if e.dxftype() == "HATCH"]):
        yield Mutation("hatch-pattern", f"hatch {e.dxf.handle} pattern swapped", swap_hatch_pattern(e.dxf.handle))
    bare = [e for e in entities if _closed_profile(e) and not _hatched(doc, e)]
    for e in pick(bare):
        yield Mutation("hatch-add", f"solid hatch over {e.dxftype()} {e.dxf.handle}", add_hatch_over(e.dxf.handle))
    if layers_scored:
        for e in pick([e for e in entities if e.dxftype() not in _ACIS]):
            others = sorted(used - {e.dxf.layer})
            target = others[0] if others else "ATTACK"
            yield Mutation(
                "layer-move", f"{e.dxftype()} {e.dxf.handle} -> layer {target}", move_to_layer(e.dxf.handle, target)
            )
    for e in pick(entities):
        yield Mutation("drop", f"drop {e.dxftype()} {e.dxf.handle}", drop(e.dxf.handle))


# --- the committed attacks -------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    name: str
    task_id: str
    hole: int
    description: str
    apply: Mutate


def _first(doc: Drawing, query: str, where: Callable[[Any], bool] = lambda e: True) -> str:
    return str(next(e.dxf.handle for e in doc.modelspace().query(query) if where(e)))


def _by_handle(query: str, make: Callable[[str], Mutate], where: Callable[[Any], bool] = lambda e: True) -> Mutate:
    def apply(doc: Drawing) -> None:
        make(_first(doc, query, where))(doc)

    return apply


ATTACKS: tuple[Attack, ...] = (
    Attack("scale-1.01-part-plate-four-holes", "part-plate-four-holes", 1, "scaled 1.01 about the centre", scale(1.01)),
    Attack("scale-0.99-part-plate-four-holes", "part-plate-four-holes", 1, "scaled 0.99 about the centre", scale(0.99)),
    Attack("shift-1mm-part-plate-four-holes", "part-plate-four-holes", 1, "moved 1 mm in x", shift(1.0, 0.0)),
    Attack("scale-1.01-prim-hexagon", "prim-hexagon", 1, "scaled 1.01 about the centre", scale(1.01)),
    Attack("scale-1.01-part-plate-hole-grid", "part-plate-hole-grid", 1, "scaled 1.01 about the centre", scale(1.01)),
    Attack(
        "layer-colour-anno-layers-plate",
        "anno-layers-plate",
        2,
        "layer HOLES colour 1 -> 3",
        set_layer_colour("HOLES", 3),
    ),
    Attack(
        "layer-colour-anno-layer-centerlines",
        "anno-layer-centerlines",
        2,
        "layer CENTER colour 4 -> 1",
        set_layer_colour("CENTER", 1),
    ),
    Attack(
        "text-height-anno-text-title",
        "anno-text-title",
        2,
        "'BRACKET A-101' at height 16 instead of 8",
        _by_handle("TEXT", lambda h: text_height(h, 2.0), lambda e: "BRACKET" in e.dxf.text),
    ),
    Attack(
        "text-rotation-anno-text-title",
        "anno-text-title",
        2,
        "'BRACKET A-101' rotated 90 degrees",
        _by_handle("TEXT", lambda h: text_rotation(h, 90.0), lambda e: "BRACKET" in e.dxf.text),
    ),
    Attack(
        "hatch-pattern-anno-hatch-solid",
        "anno-hatch-solid",
        2,
        "the SOLID hatch replaced by ANSI31",
        _by_handle("HATCH", swap_hatch_pattern),
    ),
    Attack(
        "hatch-extra-anno-hatch-solid",
        "anno-hatch-solid",
        2,
        "the circle the prompt says is not hatched filled with a SOLID hatch",
        _by_handle("CIRCLE", add_hatch_over),
    ),
    *(
        Attack(f"solid-{kind}-box-{task_id}", task_id, 0, description, solid_as_box(kind))
        for task_id in (
            "solid-extrude-plate",
            "solid-revolve-shaft",
            "solid-subtract-plate-hole",
            "solid-union-bracket",
        )
        for kind, description in (
            ("mesh", "the solid replaced by a closed MESH box with its extents"),
            ("open", "the solid replaced by an ACIS box with its extents and no top face (an open surface)"),
        )
    ),
)


def attack_bytes(attack: Attack) -> bytes:
    """The DXF bytes of ``attack`` (deterministic: the suite's fixed-metadata writer)."""
    from autocad_bench_evaluator.suite import registry
    from autocad_bench_evaluator.suite.drawing import document_bytes

    doc = registry.gold_document(attack.task_id)
    attack.apply(doc)
    return document_bytes(doc)


def main() -> int:
    manifest: dict[str, dict[str, Any]] = {}
    for attack in ATTACKS:
        name = f"{attack.name}.dxf"
        (HERE / name).write_bytes(attack_bytes(attack))
        manifest[name] = {"task_id": attack.task_id, "hole": attack.hole, "description": attack.description}
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"wrote {len(manifest)} attack drawings to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

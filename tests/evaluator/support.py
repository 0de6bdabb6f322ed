"""Helpers shared by the evaluator tests: small drawings as metadata and as real DXF files."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import ezdxf
from autocad_bench_evaluator.evaluate import EvaluationState, evaluate
from autocad_bench_evaluator.gold_cache import build_entry
from autocad_bench_evaluator.metadata import (
    CircleEntity,
    DrawingMetadata,
    Entity,
    LineEntity,
    Physical3D,
    PolylineEntity,
    SourceInfo,
    SpaceInfo,
    TextEntity,
    extents_of,
)
from autocad_bench_evaluator.spec import ScoringSpec
from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE
from ezdxf.document import Drawing
from ezdxf.filemanagement import new

SECRET = "sk-test-judge-key-8f3a1c-never-write-me"


def metadata(entities: Iterable[Entity], *, schema_version: int = 3, sha: str = "0" * 64) -> DrawingMetadata:
    """Metadata of a model space holding ``entities`` (no DXF involved)."""
    ents = tuple(entities)
    return DrawingMetadata(
        schema_version=schema_version,  # type: ignore[arg-type]
        source=SourceInfo(format="dxf", sha256=sha, size=0),
        model=SpaceInfo(name="Model", entities=ents),
        extents=extents_of(ents),
        physical_3d=Physical3D(status="none") if schema_version == 4 else None,
    )


def rectangle_lines(x: float, y: float, w: float, h: float, layer: str = "0") -> list[Entity]:
    p = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
    return [LineEntity(start=p[i], end=p[(i + 1) % 4], layer=layer) for i in range(4)]


def rectangle_polyline(x: float, y: float, w: float, h: float, layer: str = "0") -> PolylineEntity:
    return PolylineEntity(vertices=((x, y), (x + w, y), (x + w, y + h), (x, y + h)), closed=True, layer=layer)


def plate() -> list[Entity]:
    """A 100x50 plate outline, four holes on layer HOLES and a label."""
    return [
        rectangle_polyline(0, 0, 100, 50, "OUTLINE"),
        *[CircleEntity(center=(20 + 20 * i, 25), radius=4, layer="HOLES") for i in range(4)],
        TextEntity(content="PLATE A", insert=(5, 42), height=3, layer="TEXT"),
    ]


def plate_doc() -> Drawing:
    doc = new("R2010", setup=True)
    for name in ("OUTLINE", "HOLES", "TEXT", "DIMS"):
        doc.layers.add(name)
    msp = doc.modelspace()
    msp.add_lwpolyline([(0, 0), (100, 0), (100, 50), (0, 50)], close=True, dxfattribs={"layer": "OUTLINE"})
    for i in range(4):
        msp.add_circle((20 + 20 * i, 25), 4, dxfattribs={"layer": "HOLES"})
    msp.add_text("PLATE A", height=3, dxfattribs={"layer": "TEXT"}).set_placement((5, 42))
    # "Standard": ezdxf's default "EZDXF" style shows metres as centimetres (DIMLFAC 100).
    msp.add_linear_dim(base=(0, -10), p1=(0, 0), p2=(100, 0), dimstyle="Standard",
                       dxfattribs={"layer": "DIMS"}).render()
    return doc


def write_dxf(
    path: Path, build: Callable[[], Drawing] = plate_doc, mutate: Callable[[Any], None] | None = None
) -> Path:
    doc = build()
    if mutate is not None:
        mutate(doc.modelspace())
    doc.saveas(path)
    return path


def gold_cache(root: Path, task_id: str = "plate", version: str = "v1", spec: ScoringSpec | None = None) -> Path:
    """Build a gold-cache entry from :func:`plate_doc`; returns the gold DXF path."""
    gold = write_dxf(root.parent / f"{task_id}-gold.dxf")
    build_entry(root, version, gold, spec or ScoringSpec(task_id=task_id))
    return gold


def all_bytes(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def score_edited_gold(tmp_path: Path, task_id: str, edit: Callable[[Any], None]) -> tuple[float, bool]:
    """``(score, passed)`` of the shipped gold of ``task_id`` after ``edit`` changed it, through the
    public evaluation, as an attempt's drawing would be scored."""
    doc = ezdxf.readfile(SHIPPED_GOLD_CACHE / EVALUATOR_VERSION / task_id / "gold.dxf")
    edit(doc)
    path = tmp_path / "attempt.dxf"
    doc.saveas(path)
    outcome = evaluate(path, task_id, SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "ev")
    assert outcome.state is EvaluationState.DONE, outcome.error
    assert outcome.report is not None
    return outcome.report.score, outcome.report.passed

"""The drawing-level models of metadata: layers, blocks, spaces, extents, the source and
reading report, :class:`DrawingMetadata` (a readable drawing), :class:`InvalidDrawing` (a
drawing that cannot count as an attempt), :data:`ReadResult` (either), and their canonical JSON
(:func:`canonical_json`, :func:`load_metadata`, :func:`metadata_from_json_mapping`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from autocad_bench.models import StrictModel
from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.invalid import InvalidClass
from autocad_bench_evaluator.metadata.entities import Entity, Extents3D, Point3
from autocad_bench_evaluator.spec import SchemaVersion


class LayerInfo(StrictModel):
    """A layer table entry."""

    name: str
    color: int = 7
    linetype: str = "Continuous"
    on: bool = True
    frozen: bool = False
    locked: bool = False


class BlockInfo(StrictModel):
    """A named (non-anonymous) block definition with its entities in block coordinates."""

    name: str
    base_point: Point = (0.0, 0.0)
    entities: tuple[Entity, ...] = ()


class SpaceInfo(StrictModel):
    """The model space or one paper-space layout."""

    name: str
    entities: tuple[Entity, ...] = ()


class Extents2D(StrictModel):
    """An axis-aligned 2D box."""

    min: Point
    max: Point


class Physical3D(StrictModel):
    """Isolated physical 3D extents (schema v4): the union of every solid's and mesh's box.

    ``volume``, ``area`` (surface) and ``centroid`` (of the volume) are totals over the bodies,
    present only when every body is a closed surface; ``sources`` are the entity types of the
    bodies (3DSOLID, MESH, ...), sorted and without repeats.

    ``status``: ``"none"`` when the model space holds no 3D body, ``"measured"`` when every body
    was measured, ``"unknown"`` when at least one could not be (``extents`` then covers the
    measured ones only and must not be trusted for scoring).
    """

    status: Literal["none", "measured", "unknown"]
    extents: Extents3D | None = None
    volume: float | None = None
    area: float | None = None
    centroid: Point3 | None = None
    bodies: int = 0
    sources: tuple[str, ...] = ()
    reason: str = ""


class SourceInfo(StrictModel):
    """Where the metadata came from."""

    format: Literal["dxf", "dxf-binary", "dwg-adapter", "dwg-converted"]
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    dxf_version: str | None = None
    units: int | None = None


class ReadingReport(StrictModel):
    """How a DXF was read: its encoding facts, what it declared and what was kept or skipped.

    ``entities_declared`` counts the top-level entity records of the model and paper spaces
    in the file itself; ``entities_extracted`` those that became records here and
    ``unreadable`` (by type) those that could not be read and were skipped; ``unsupported``
    counts the types kept as ``OTHER`` (listed, never scored). ``notes`` quotes the first
    few reasons an entity was unreadable.
    """

    line_endings: Literal["lf", "crlf", "cr", "mixed", "binary"]
    encoding: str
    decoding_errors: int = Field(default=0, ge=0)
    dos_eof: bool = False
    recovered: bool = False
    entities_declared: int = Field(ge=0)
    entities_extracted: int = Field(ge=0)
    unreadable: dict[str, int] = Field(default_factory=dict)
    unsupported: dict[str, int] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


class DrawingMetadata(StrictModel):
    """Everything the scorer and renderer need to know about one readable drawing.

    ``reading`` is present for drawings read here (DXF, converted DWG) and absent in metadata
    the AutoCAD adapter exported on Windows.
    """

    valid: Literal[True] = True
    schema_version: SchemaVersion
    source: SourceInfo
    layers: tuple[LayerInfo, ...] = ()
    blocks: tuple[BlockInfo, ...] = ()
    model: SpaceInfo = SpaceInfo(name="Model")
    layouts: tuple[SpaceInfo, ...] = ()
    extents: Extents2D | None = None
    physical_3d: Physical3D | None = None
    reading: ReadingReport | None = None

    @model_validator(mode="after")
    def _physical_matches_schema(self) -> DrawingMetadata:
        if self.schema_version == 4 and self.physical_3d is None:
            raise ValueError("schema_version 4 metadata needs physical_3d")
        if self.schema_version == 3 and self.physical_3d is not None:
            raise ValueError("physical_3d is only part of schema_version 4")
        return self

    def to_json_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, 2-space indent, trailing newline)."""
        return canonical_json(self.model_dump(mode="json"))


class InvalidDrawing(StrictModel):
    """A drawing that cannot count as an attempt: it scores 0 with this reason.

    ``failure_class`` is one stable word (:data:`~autocad_bench_evaluator.invalid.InvalidClass`),
    ``reason`` a sentence for people, ``detail`` the parser's own words where they help.
    """

    valid: Literal[False] = False
    failure_class: InvalidClass
    reason: str
    detail: str = ""
    size: int | None = None
    sha256: str | None = None

    def to_json_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, 2-space indent, trailing newline)."""
        return canonical_json(self.model_dump(mode="json"))


ReadResult = DrawingMetadata | InvalidDrawing


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, 2-space indent, UTF-8, trailing newline."""
    import json

    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode()


def load_metadata(data: bytes | str) -> DrawingMetadata:
    """Parse and validate ``metadata.json`` content; raises pydantic ``ValidationError``."""
    return DrawingMetadata.model_validate_json(data)


def metadata_from_json_mapping(value: Mapping[str, Any]) -> ReadResult:
    """Validate a parsed ``metadata.json`` that may hold either a valid or an invalid record."""
    if value.get("valid") is False:
        return InvalidDrawing.model_validate(value)
    return DrawingMetadata.model_validate(value)

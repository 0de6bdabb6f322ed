"""Drawing metadata: what a DXF (or an exported DWG) contains, as JSON-serializable models.

:func:`read_drawing` turns a drawing file into either a :class:`DrawingMetadata` or an
:class:`InvalidDrawing`. DXF files are parsed here with ezdxf on any operating system. DWG
files are never parsed here: a :class:`DwgReader` supplies their metadata, either from the
JSON the broker's AutoCAD adapter exported next to the DWG on the Windows host
(:class:`AdapterMetadataReader`) or through a configured external converter to DXF
(:class:`ConverterDwgReader`, e.g. the ODA File Converter).

Outcomes:

* a readable drawing gives :class:`DrawingMetadata` (``schema_version`` 3 = 2D entities of the
  model space and the paper-space layouts, layers and blocks; 4 = additionally the isolated
  physical 3D extents of solids and meshes);
* a drawing that is missing, empty, too large, truncated, of the wrong signature or binary
  garbage gives an :class:`InvalidDrawing` with a reason: deterministic, never an exception,
  and the size is checked before a single byte is parsed;
* a DWG that nothing here can read raises :class:`CannotReadDrawing` ("cannot read DWG
  here: ..."): an evaluation failure, never a silent zero.

Coordinates are world coordinates (WCS) projected on the XY plane, in drawing units.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationError, model_validator

from autocad_bench.models import StrictModel
from autocad_bench_evaluator.geometry import (
    Point,
    bounds,
    polyline_points,
    sample_arc,
    sample_circle,
)
from autocad_bench_evaluator.invalid import InvalidClass
from autocad_bench_evaluator.spec import SchemaVersion

Point3 = tuple[float, float, float]

DWG_SIGNATURE = re.compile(rb"^AC10[0-9]{2}")
BINARY_DXF_SENTINEL = b"AutoCAD Binary DXF\r\n\x1a\x00"
ADAPTER_METADATA_SUFFIX = ".metadata.json"
"""The AutoCAD adapter writes ``attempt.dwg.metadata.json`` next to ``attempt.dwg``."""
ADAPTER_FORMAT = "autocad-bench-dwg-metadata"


# --- limits and errors ------------------------------------------------------------------


class ReadLimits(StrictModel):
    """Bounds on reading one drawing, enforced as the file is read, not after.

    ``max_bytes`` is checked with ``stat`` before the file is opened. ``max_tags`` (group-code
    tags) and ``max_entities`` (records in the file, and entity records extracted, exploded
    block contents included) are counted while ezdxf consumes the tag stream and while
    entities are extracted, so a file is stopped as soon as it crosses one; both are
    deterministic. ``max_text_chars`` and ``max_spline_points`` bound the work ezdxf does on
    one entity (its text and spline routines grow faster than linearly): a larger entity is
    skipped as unreadable before ezdxf touches it. ``max_seconds`` is the wall-clock safety
    net, checked every 4,096 tags and at every entity. docs/drawing-input.md gives the time
    and memory these defaults bound. ``max_memory_bytes`` applies where the read runs isolated
    (:mod:`~autocad_bench_evaluator.isolated_read`, the evaluation path): the child's address
    space may grow by that much.
    """

    max_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    max_tags: int = Field(default=300_000, ge=1)
    max_entities: int = Field(default=50_000, ge=1)
    max_seconds: float = Field(default=10.0, gt=0)
    max_text_chars: int = Field(default=16_384, ge=1)
    max_spline_points: int = Field(default=1_000, ge=4)
    max_curve_points: int = Field(default=512, ge=8)
    max_block_depth: int = Field(default=8, ge=1)
    max_memory_bytes: int = Field(default=1024 * 1024 * 1024, ge=16 * 1024 * 1024)


class CannotReadDrawing(Exception):
    """The evaluator cannot read this drawing here (a failure of the evaluator, not the model).

    Raised for a DWG without adapter metadata or converter, a failing converter, or adapter
    metadata that does not belong to the DWG. The message starts with "cannot read DWG here".
    """


class BadNumber(ValueError):
    """A number in the drawing is not finite or out of range: the entity holding it is
    unreadable (skipped and counted), never scored."""


# --- models -----------------------------------------------------------------------------


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


# --- DWG readers ------------------------------------------------------------------------


class DwgReader(Protocol):
    """Supplies metadata for a DWG file, which this process never parses itself.

    ``read`` returns metadata (at ``schema_version``), an :class:`InvalidDrawing` when the
    source says the DWG is invalid, or raises :class:`CannotReadDrawing`.
    """

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult: ...


class DwgAdapterExport(StrictModel):
    """The JSON the broker's AutoCAD adapter writes next to a DWG on the Windows host.

    ``dwg_sha256`` binds it to the exact DWG bytes; ``valid: false`` with ``reason`` reports a
    DWG that AutoCAD itself could not open.
    """

    format: Literal["autocad-bench-dwg-metadata"] = "autocad-bench-dwg-metadata"
    dwg_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    exporter: str = ""
    valid: bool = True
    reason: str = ""
    metadata: DrawingMetadata | None = None

    @model_validator(mode="after")
    def _metadata_when_valid(self) -> DwgAdapterExport:
        if self.valid and self.metadata is None:
            raise ValueError("a valid export needs metadata")
        return self


class AdapterMetadataReader:
    """Reads ``<dwg>.metadata.json`` exported by the AutoCAD adapter (see :class:`DwgAdapterExport`)."""

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult:
        """Validate and return the exported metadata; raises :class:`CannotReadDrawing` when
        the file is missing, malformed, belongs to other DWG bytes or lacks 3D data for v4."""
        export_path = adapter_metadata_path(path)
        if not export_path.is_file():
            raise CannotReadDrawing(f"cannot read DWG here: no AutoCAD adapter metadata at {export_path}")
        if export_path.stat().st_size > limits.max_bytes:
            raise CannotReadDrawing(f"cannot read DWG here: adapter metadata {export_path} is too large")
        try:
            export = DwgAdapterExport.model_validate_json(export_path.read_bytes())
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} is invalid at {where}: {first['msg']}"
            ) from None
        if export.dwg_sha256 != sha256:
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} describes other DWG bytes "
                f"(sha256 {export.dwg_sha256[:12]}..., file is {sha256[:12]}...)"
            )
        if not export.valid:
            return InvalidDrawing(
                failure_class="dwg-invalid", reason=f"AutoCAD could not open the DWG: {export.reason}", sha256=sha256
            )
        metadata = export.metadata
        assert metadata is not None  # guaranteed by the validator
        try:
            metadata.to_json_bytes()
        except ValueError:
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} holds non-finite numbers"
            ) from None
        if metadata.schema_version < schema_version:
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata is schema v{metadata.schema_version}, "
                f"the task needs v{schema_version}"
            )
        return metadata


def adapter_metadata_path(dwg: Path) -> Path:
    """Where the AutoCAD adapter's export for ``dwg`` lives."""
    return dwg.with_name(dwg.name + ADAPTER_METADATA_SUFFIX)


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)


class ConverterDwgReader:
    """Converts a DWG to DXF with an external command, then reads the DXF here.

    ``command`` is an argument list (or a shell-like string, split with :func:`shlex.split`)
    whose items may contain ``{input}``, ``{input_dir}``, ``{output_dir}``, ``{output}`` and
    ``{stem}``. The DWG is copied alone into a fresh input directory, so directory-based tools
    such as ``ODAFileConverter {input_dir} {output_dir} ACAD2018 DXF 0 1 *.DWG`` work. The
    command runs without secret-looking environment variables and is killed after
    ``timeout_s``. A failing command raises :class:`CannotReadDrawing`.
    """

    def __init__(self, command: Sequence[str] | str, *, timeout_s: float = 120.0, isolated: bool = True) -> None:
        self.command: tuple[str, ...] = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not self.command:
            raise ValueError("empty converter command")
        self.timeout_s = timeout_s
        self.isolated = isolated

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult:
        """Run the converter and read its DXF; see the class docstring for failures."""
        with tempfile.TemporaryDirectory(prefix="acb-dwg-") as tmp:
            in_dir, out_dir = Path(tmp, "in"), Path(tmp, "out")
            in_dir.mkdir()
            out_dir.mkdir()
            source = in_dir / (path.stem + ".dwg")
            shutil.copyfile(path, source)
            output = out_dir / (path.stem + ".dxf")
            fields = {
                "input": str(source),
                "input_dir": str(in_dir),
                "output_dir": str(out_dir),
                "output": str(output),
                "stem": path.stem,
            }
            argv = [part.format(**fields) for part in self.command]
            env = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
            try:
                done = subprocess.run(
                    argv, capture_output=True, timeout=self.timeout_s, env=env, check=False, stdin=subprocess.DEVNULL
                )
            except FileNotFoundError:
                raise CannotReadDrawing(f"cannot read DWG here: converter {argv[0]!r} not found") from None
            except subprocess.TimeoutExpired:
                raise CannotReadDrawing(
                    f"cannot read DWG here: converter {argv[0]!r} timed out after {self.timeout_s:g} s"
                ) from None
            if done.returncode != 0:
                tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                raise CannotReadDrawing(
                    f"cannot read DWG here: converter {argv[0]!r} exited {done.returncode}: {tail[0][:200]}"
                )
            produced = output if output.is_file() else _find_dxf(out_dir)
            if produced is None:
                raise CannotReadDrawing(f"cannot read DWG here: converter {argv[0]!r} produced no DXF")
            if self.isolated:  # the converter's output is as untrusted as the DWG it came from
                from autocad_bench_evaluator.isolated_read import read_dxf_isolated as read
            else:
                from autocad_bench_evaluator.dxf_reader import read_dxf as read
            result = read(produced, schema_version, limits, source_format="dwg-converted")
            if isinstance(result, DrawingMetadata):
                return result.model_copy(
                    update={"source": result.source.model_copy(update={"sha256": sha256, "size": path.stat().st_size})}
                )
            return InvalidDrawing(
                failure_class=result.failure_class,
                reason=f"the DWG converted to DXF is not a valid drawing: {result.reason}",
                detail=result.detail,
                sha256=sha256,
            )


def _find_dxf(directory: Path) -> Path | None:
    found = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() == ".dxf")
    return found[0] if found else None


class ChainedDwgReader:
    """Tries several readers in order; the first that does not raise wins.

    Raises :class:`CannotReadDrawing` listing every reader's reason when all fail.
    """

    def __init__(self, readers: Sequence[DwgReader]) -> None:
        self.readers = tuple(readers)

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult:
        """See the class docstring."""
        reasons: list[str] = []
        for reader in self.readers:
            try:
                return reader.read(path, sha256, schema_version, limits)
            except CannotReadDrawing as error:
                reasons.append(str(error).removeprefix("cannot read DWG here: "))
        raise CannotReadDrawing("cannot read DWG here: " + "; ".join(reasons or ["no DWG reader configured"]))


def default_dwg_reader(converter: Sequence[str] | str | None = None) -> DwgReader:
    """Adapter metadata next to the DWG first, then ``converter`` when one is configured."""
    readers: list[DwgReader] = [AdapterMetadataReader()]
    if converter:
        readers.append(ConverterDwgReader(converter))
    return ChainedDwgReader(readers)


# --- entry point ------------------------------------------------------------------------


def read_drawing(
    path: Path | None,
    schema_version: SchemaVersion = 3,
    *,
    dwg_reader: DwgReader | None = None,
    limits: ReadLimits | None = None,
    isolated: bool = False,
) -> ReadResult:
    """Read ``path`` into metadata, or an :class:`InvalidDrawing` with a reason.

    The format is decided by the file's signature, not its suffix: ``AC10xx`` is a DWG and goes
    to ``dwg_reader`` (by default the adapter export next to it; see
    :func:`default_dwg_reader`); ASCII or binary DXF is parsed here, or with ``isolated`` in a
    child process under hard memory and time limits (see
    :mod:`~autocad_bench_evaluator.isolated_read`; the evaluation path reads candidates so).
    Raises :class:`CannotReadDrawing` only for a DWG nobody here can read, and
    ``IsolatedReadError`` when the isolated child fails for a reason not the drawing's.
    """
    limits = limits or ReadLimits()
    if path is None:
        return InvalidDrawing(failure_class="no-drawing", reason="no drawing was saved")
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        return InvalidDrawing(failure_class="no-drawing", reason=f"drawing file does not exist: {path.name}")
    except OSError as error:
        return InvalidDrawing(failure_class="no-drawing", reason=f"drawing file cannot be accessed: {error.strerror}")
    if not path.is_file():
        return InvalidDrawing(failure_class="no-drawing", reason=f"drawing path is not a regular file: {path.name}")
    size = info.st_size
    refused = size_verdict(size, limits)
    if refused is not None:
        return refused
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError as error:
        return InvalidDrawing(
            failure_class="no-drawing", reason=f"drawing file cannot be read: {error.strerror}", size=size
        )
    if DWG_SIGNATURE.match(head):
        sha = _sha256_file(path)
        reader = dwg_reader or default_dwg_reader()
        return reader.read(path, sha, schema_version, limits)
    if path.suffix.lower() == ".dwg":
        return InvalidDrawing(
            failure_class="not-a-drawing", reason="file has a .dwg name but no DWG signature (AC10xx)", size=size
        )
    from autocad_bench_evaluator.dxf_reader import read_dxf

    if isolated:
        from autocad_bench_evaluator.isolated_read import read_dxf_isolated

        return read_dxf_isolated(path, schema_version, limits)
    return read_dxf(path, schema_version, limits)


def size_verdict(size: int, limits: ReadLimits) -> InvalidDrawing | None:
    """The verdict on a file's size alone (empty, or over ``max_bytes``), or None when it may
    be read."""
    if size == 0:
        return InvalidDrawing(failure_class="empty-file", reason="drawing file is empty", size=0)
    if size > limits.max_bytes:
        return InvalidDrawing(
            failure_class="too-large",
            reason=f"drawing file is {size} bytes, over the {limits.max_bytes}-byte limit",
            size=size,
        )
    return None


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- derived geometry -------------------------------------------------------------------


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


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def metadata_from_json_mapping(value: Mapping[str, Any]) -> ReadResult:
    """Validate a parsed ``metadata.json`` that may hold either a valid or an invalid record."""
    if value.get("valid") is False:
        return InvalidDrawing.model_validate(value)
    return DrawingMetadata.model_validate(value)

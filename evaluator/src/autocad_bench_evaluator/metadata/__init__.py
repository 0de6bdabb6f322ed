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

The package, one job per module (every name below is importable from
``autocad_bench_evaluator.metadata`` itself):

* :mod:`~autocad_bench_evaluator.metadata.limits`: :class:`ReadLimits` and the reading errors;
* :mod:`~autocad_bench_evaluator.metadata.entities`: the entity models and coordinate rounding;
* :mod:`~autocad_bench_evaluator.metadata.drawing`: :class:`DrawingMetadata`,
  :class:`InvalidDrawing` and the other drawing-level models, canonical JSON;
* :mod:`~autocad_bench_evaluator.metadata.dwg`: the DWG readers (adapter export, converter);
* :mod:`~autocad_bench_evaluator.metadata.read`: :func:`read_drawing`, the entry point;
* :mod:`~autocad_bench_evaluator.metadata.derived`: geometry derived from metadata (extents,
  outline points, texts and dimensions of the model space).

The DXF parser itself is :mod:`~autocad_bench_evaluator.dxf_reader`.
"""

from __future__ import annotations

from autocad_bench_evaluator.metadata.derived import (
    dimensions,
    ellipse_points,
    entity_points,
    extents_of,
    iter_primitives,
    physical_extents,
    texts,
)
from autocad_bench_evaluator.metadata.drawing import (
    BlockInfo,
    DrawingMetadata,
    Extents2D,
    InvalidDrawing,
    LayerInfo,
    Physical3D,
    ReadingReport,
    ReadResult,
    SourceInfo,
    SpaceInfo,
    canonical_json,
    load_metadata,
    metadata_from_json_mapping,
)
from autocad_bench_evaluator.metadata.dwg import (
    ADAPTER_FORMAT,
    ADAPTER_METADATA_SUFFIX,
    AdapterMetadataReader,
    ChainedDwgReader,
    ConverterDwgReader,
    DwgAdapterExport,
    DwgReader,
    adapter_metadata_path,
    default_dwg_reader,
)
from autocad_bench_evaluator.metadata.entities import (
    MAX_COORDINATE,
    ArcEntity,
    CircleEntity,
    DimensionEntity,
    EllipseEntity,
    Entity,
    Extents3D,
    HatchEntity,
    InsertEntity,
    LineEntity,
    OtherEntity,
    Point3,
    PointEntity,
    PolylineEntity,
    Primitive,
    SolidEntity,
    SplineEntity,
    TextEntity,
)
from autocad_bench_evaluator.metadata.entities import _p2 as _p2  # used by dxf_reader
from autocad_bench_evaluator.metadata.entities import _round as _round  # used by dxf_reader
from autocad_bench_evaluator.metadata.limits import (
    BadNumber,
    CannotReadDrawing,
    ReadLimits,
)
from autocad_bench_evaluator.metadata.read import (
    BINARY_DXF_SENTINEL,
    DWG_SIGNATURE,
    read_drawing,
    sha256_bytes,
    size_verdict,
)

__all__ = [
    "ADAPTER_FORMAT",
    "ADAPTER_METADATA_SUFFIX",
    "BINARY_DXF_SENTINEL",
    "DWG_SIGNATURE",
    "MAX_COORDINATE",
    "AdapterMetadataReader",
    "ArcEntity",
    "BadNumber",
    "BlockInfo",
    "CannotReadDrawing",
    "ChainedDwgReader",
    "CircleEntity",
    "ConverterDwgReader",
    "DimensionEntity",
    "DrawingMetadata",
    "DwgAdapterExport",
    "DwgReader",
    "EllipseEntity",
    "Entity",
    "Extents2D",
    "Extents3D",
    "HatchEntity",
    "InsertEntity",
    "InvalidDrawing",
    "LayerInfo",
    "LineEntity",
    "OtherEntity",
    "Physical3D",
    "Point3",
    "PointEntity",
    "PolylineEntity",
    "Primitive",
    "ReadLimits",
    "ReadResult",
    "ReadingReport",
    "SolidEntity",
    "SourceInfo",
    "SpaceInfo",
    "SplineEntity",
    "TextEntity",
    "adapter_metadata_path",
    "canonical_json",
    "default_dwg_reader",
    "dimensions",
    "ellipse_points",
    "entity_points",
    "extents_of",
    "iter_primitives",
    "load_metadata",
    "metadata_from_json_mapping",
    "physical_extents",
    "read_drawing",
    "sha256_bytes",
    "size_verdict",
    "texts",
]

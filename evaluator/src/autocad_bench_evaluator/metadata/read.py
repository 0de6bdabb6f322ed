"""The entry point of reading: :func:`read_drawing` decides a file's format by its signature
and turns it into :class:`~autocad_bench_evaluator.metadata.drawing.DrawingMetadata` or
:class:`~autocad_bench_evaluator.metadata.drawing.InvalidDrawing` (DXF parsed here, in-process
or isolated; DWG through a :class:`~autocad_bench_evaluator.metadata.dwg.DwgReader`), with the
size verdict checked before a byte is parsed and the SHA-256 helpers."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from autocad_bench_evaluator.metadata.drawing import InvalidDrawing, ReadResult
from autocad_bench_evaluator.metadata.dwg import DwgReader, default_dwg_reader
from autocad_bench_evaluator.metadata.limits import ReadLimits
from autocad_bench_evaluator.spec import SchemaVersion

DWG_SIGNATURE = re.compile(rb"^AC10[0-9]{2}")
BINARY_DXF_SENTINEL = b"AutoCAD Binary DXF\r\n\x1a\x00"


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


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()

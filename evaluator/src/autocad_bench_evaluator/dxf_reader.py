"""Reading a DXF file here: from bytes on disk to :class:`DrawingMetadata` or an
:class:`InvalidDrawing`, never an exception for anything the file holds.

The steps, each with its own failure class:

1. :mod:`~autocad_bench_evaluator.dxf_input` brings the bytes to normal form (line ends,
   Ctrl-Z, code page, text escapes) or rejects them (``not-a-drawing``, ``truncated``).
2. ezdxf loads the tag stream, strictly first and in its recover mode when the strict read
   fails or loses entities; every tag passes a :class:`TagCensus` that stops the parse at the
   first crossed bound (``tag-limit``, ``entity-limit``, ``time-limit``). Whatever ezdxf raises
   on this untrusted input (``AssertionError`` included) makes the drawing ``malformed``.
3. The consistency check: the model and paper spaces ezdxf built must hold exactly the
   entities the file declares; otherwise the drawing is ``entities-lost``, never an empty
   drawing scored 0 without a word.
4. Extraction, one entity at a time: an entity that cannot be read is skipped and counted in
   :class:`ReadingReport` (so are unreadable layers and blocks); only the limits
   (``entity-limit``, ``time-limit``, ``nesting-limit``) stop the whole drawing.

Errors of this evaluator's own code are not caught here: they end the evaluation ``failed``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from autocad_bench_evaluator.dxf_input import (
    AsciiDxf,
    InputRejected,
    LineEndings,
    TagCensus,
    ascii_dxf,
    check_binary,
    decode_escapes,
    for_recover,
)
from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.metadata import (
    ArcEntity,
    BlockInfo,
    CircleEntity,
    DimensionEntity,
    DrawingMetadata,
    EllipseEntity,
    Entity,
    Extents3D,
    HatchEntity,
    InsertEntity,
    InvalidDrawing,
    LayerInfo,
    LineEntity,
    OtherEntity,
    Point3,
    PointEntity,
    PolylineEntity,
    Primitive,
    ReadingReport,
    ReadLimits,
    ReadResult,
    SolidEntity,
    SourceInfo,
    SpaceInfo,
    SplineEntity,
    TextEntity,
    _p2,
    _round,
    extents_of,
    physical_extents,
    size_verdict,
)
from autocad_bench_evaluator.spec import SchemaVersion

_MAX_NOTES = 10


def read_dxf(
    path: Path, schema_version: SchemaVersion, limits: ReadLimits, *, source_format: str | None = None
) -> ReadResult:
    """Read the DXF at ``path`` (ASCII in any line ending and code page, or binary).

    Returns metadata or an :class:`InvalidDrawing`; raises only for faults of this evaluator
    (and ``OSError`` when the file vanishes between ``stat`` and ``read``).
    """
    size = path.stat().st_size
    refused = size_verdict(size, limits)
    if refused is not None:
        return refused
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    try:
        with _quiet_ezdxf():
            return _read(data, sha, schema_version, limits, source_format)
    except InputRejected as rejected:
        return InvalidDrawing(
            failure_class=rejected.failure_class,
            reason=rejected.reason,
            detail=rejected.detail,
            size=len(data),
            sha256=sha,
        )


def _read(
    data: bytes, sha: str, schema_version: SchemaVersion, limits: ReadLimits, source_format: str | None
) -> DrawingMetadata:
    started = time.monotonic()
    binary = check_binary(data)
    text: AsciiDxf | None = None if binary else ascii_dxf(data)

    def census() -> TagCensus:
        remaining = max(limits.max_seconds - (time.monotonic() - started), 0.0)
        return TagCensus.start(limits.max_tags, limits.max_entities, remaining)

    loaded = _load(data, text, census)
    deadline = _Deadline(limits, started)
    report = _Report()
    if text is not None:
        endings: LineEndings = text.line_endings
        encoding, decoding_errors, dos_eof = text.encoding, text.decoding_errors, text.dos_eof
    else:
        # Text in a binary file is in the code page its header names (UTF-8 from R2007 on):
        # the encoding ezdxf decoded it with.
        endings, decoding_errors, dos_eof = "binary", 0, False
        encoding = str(getattr(loaded.doc, "encoding", "") or "utf-8")
    source_format = source_format or ("dxf-binary" if binary else "dxf")
    metadata = _guarded(
        lambda: _extract(loaded.doc, schema_version, limits, deadline, report, source_format, sha, len(data))
    )
    deadline.check()  # a read that ended past the bound is refused, however it got there
    for folded in loaded.folded:
        for name, count in sorted(folded.items()):
            if len(report.notes) < _MAX_NOTES:
                report.notes.append(f"{count} {name}: " + _FOLDED_WHY[name])
    for declared, built, why in (
        (loaded.census.model_entities, loaded.model_accounted, "removed by ezdxf's repair of the damaged file"),
        (loaded.census.paper_entities, loaded.paper_accounted, "paper-space entity not loaded (never scored)"),
    ):
        for name, count in loaded.lost_by_type(declared, built).items():
            report.unreadable[name] += count
            if len(report.notes) < _MAX_NOTES:
                report.notes.append(f"{count} {name}: {why}")
    reading = ReadingReport(
        line_endings=endings,
        encoding=encoding,
        decoding_errors=decoding_errors,
        dos_eof=dos_eof,
        recovered=loaded.recovered,
        entities_declared=loaded.census.declared_space_entities,
        entities_extracted=report.top_level_records,
        unreadable=dict(sorted(report.unreadable.items())),
        unsupported=dict(sorted(report.unsupported.items())),
        notes=tuple(report.notes),
    )
    if report.top_level_records + report.top_level_skipped != loaded.space_entities:
        # Every entity ezdxf loaded is either a record or counted as unreadable; anything else
        # is a bug here, not in the drawing.
        raise RuntimeError(
            f"extraction saw {report.top_level_records + report.top_level_skipped} of "
            f"{loaded.space_entities} loaded entities"
        )
    return metadata.model_copy(update={"reading": reading})


FIT_RUN_BOUNDS = (0.3, 1.5)
"""How long an ALIGNED or FIT text's run may be against ``characters x height`` and still be
read as its natural width (proportional fonts run 0.5 to 1 times that; the bounds leave room)."""
_NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d*)?|[.,]\d+)")
_MARKED_NUMBER = re.compile(
    r"(?:(?P<diameter>[\u00d8\u00f8\u2300\u2205\u03a6\u03c6]|(?<![A-Za-z])DIA\.?)|(?<![A-WYZa-wyz])(?P<radius>R))"
    r"\s*(?P<number>\d+(?:[.,]\d*)?|[.,]\d+)"
)
"""A number right after a diameter sign (Ø, ``%%c`` as AutoCAD writes it, ⌀, ∅, Φ, DIA) or a
radius R: the feature's size, whatever comes before it ("2x Ø10" and "2XØ10" are two holes of
10; an R or DIA inside a word is no sign, except after the x of a count)."""


def _displayed_value(e: Any, dimtype: str, measured: float) -> float | None:
    """The value a dimension shows, which is what a drawing states (``None``: none shown).

    The measured value scaled by the style's linear factor (``DIMLFAC``, not for angles) where
    the text is the measurement (no override, or ``<>`` inside one); otherwise the number after
    a diameter sign or an R in the override text ("Ø80", "2x Ø10", "R25 mm"; a diameter shown
    on a radius dimension is halved, a radius on a diameter dimension doubled), else its first
    number ("120", "2 x 45°"), or none when the override shows no number (a word, or a single
    space, which hides the text). A dimension whose text says 999 over a 120 mm span states
    999, not 120.
    """
    factor = 1.0
    if dimtype not in ("angular", "angular3p"):
        try:
            factor = float(e.override().get("dimlfac", 1.0) or 1.0)
        except (TypeError, ValueError, AttributeError, KeyError):
            factor = 1.0
        if not math.isfinite(factor) or factor == 0.0:
            factor = 1.0
    override = str(e.dxf.get("text", "") or "")
    if override in ("", "<>") or "<>" in override:
        return _round(measured * factor)
    from ezdxf.tools.text import plain_mtext, plain_text

    # A line break (\P) separates words: "2 HOLES\PØ50" is not "HOLESØ50".
    shown = plain_text(str(plain_mtext(decode_escapes(override), split=False)).replace("\n", " "))
    marked = _MARKED_NUMBER.search(shown)
    if marked is not None:
        value = float(marked.group("number").replace(",", "."))
        # The sign says what the number is: Ø40 on a radius dimension shows a radius of 20,
        # R50 on a diameter dimension a diameter of 100.
        if marked.group("diameter") is not None and dimtype == "radius":
            value /= 2.0
        elif marked.group("radius") is not None and dimtype == "diameter":
            value *= 2.0
        return _round(value) if math.isfinite(value) else None
    first = _NUMBER.search(shown)
    if first is None:
        return None
    value = float(first.group(0).replace(",", "."))
    return _round(value) if math.isfinite(value) else None


def _text_content(raw: object) -> str:
    """A TEXT's or ATTRIB's text without its special codes (``%%c``, ...), ``\\U+`` escapes
    resolved: the ASCII path resolves them in the file's text before parsing, but a binary
    file's strings and ezdxf's recover reader never get that pass."""
    from ezdxf.tools.text import plain_text

    return plain_text(decode_escapes(str(raw or "")))


def _mtext_content(e: Any) -> str:
    """An MTEXT's text without inline codes, every column of a multi-column MTEXT included.

    The escapes are resolved on the assembled text: a writer may split ``\\U+043C`` across
    two of the 250-character chunks the text is stored in, where no per-line pass sees it.
    ezdxf's accurate parser, not its fast one: that one keeps ``\\~`` (a non-breaking space)
    and unterminated codes such as ``{\\C1red}`` as literal text.
    """
    from ezdxf.tools.text import plain_mtext

    raw = e.all_columns_raw_content() if e.has_columns else e.text
    return str(plain_mtext(decode_escapes(str(raw or "")), split=False))


class _NotDrawn(ValueError):
    """An entity that is not drawn in plan the way its record reads: skipped and counted."""


def _in_plan(extrusion: Any) -> None:
    """Refuse a circle or arc whose plane is not the drawing plane: seen in plan it is an
    ellipse or, edge on, a line, never the circle its centre and radius describe (an agent
    can draw one under a rotated coordinate system)."""
    x, y, z = (float(v) for v in extrusion)
    length = math.sqrt(x * x + y * y + z * z)
    if not length or abs(z) / length < 1.0 - 1e-9:
        raise _NotDrawn(f"its plane is tilted out of the drawing plane (normal {x:g}, {y:g}, {z:g}): "
                        "in plan it is not the circle its record describes")


_FOLDED_WHY = {
    "MTEXT": "further columns of a multi-column MTEXT, read as part of its first column's text",
    "LWPOLYLINE": "text frames of MTEXT, a property of the MTEXT rather than an entity of their own",
}


class _Loaded:
    """A document ezdxf built, with what the census saw and what the spaces hold now."""

    def __init__(self, doc: Any, census: TagCensus, recovered: bool,
                 removed_by_audit: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.doc = doc
        self.census = census
        self.recovered = recovered
        self.removed_by_audit = removed_by_audit
        # Iterate, never len(): a layout's length still counts entities the audit deleted.
        self.model_entities = Counter(str(e.dxftype()) for e in doc.modelspace())
        self.paper_entities = Counter(
            str(e.dxftype()) for layout in doc.layouts if not layout.is_modelspace for e in layout
        )
        self.folded = self._folded_into_mtext()
        """(model, paper): declared records ezdxf folded into an MTEXT on load (see
        :meth:`_folded_into_mtext`); declared but rightly not entities of their own."""

    def _folded_into_mtext(self) -> tuple[Counter[str], Counter[str]]:
        """Records that are parts of an MTEXT before R2018: the extra MTEXT of each further
        column (ezdxf links them to the first and takes them out of the layout; their text is
        read with it) and the LWPOLYLINE of a text frame (ezdxf deletes it; AutoCAD R2018 and
        later keep the frame as a property of the MTEXT). Only records the census saw with
        those roles count, and only when they really are missing from the loaded spaces."""
        model: Counter[str] = Counter()
        paper: Counter[str] = Counter()
        # From R2018 on the columns live inside the one MTEXT record: nothing to fold.
        for layout in self.doc.layouts if self.doc.dxfversion < "AC1032" else ():
            spaces = model if layout.is_modelspace else paper
            for entity in layout:
                if entity.dxftype() == "MTEXT" and entity.has_columns and entity._columns.linked_columns:
                    spaces["MTEXT"] += len(entity._columns.linked_columns)
        for handle in self.census.frame_handles:
            space = self.census.polylines.get(handle)
            frame = self.doc.entitydb.get(handle)
            if space is not None and (frame is None or not frame.is_alive):
                (model if space == "model" else paper)["LWPOLYLINE"] += 1
        return model, paper

    @property
    def space_entities(self) -> int:
        return sum(self.model_entities.values()) + sum(self.paper_entities.values())

    @property
    def model_accounted(self) -> Counter[str]:
        """The model space's records by type: loaded, or folded into an MTEXT."""
        return self.model_entities + self.folded[0]

    @property
    def paper_accounted(self) -> Counter[str]:
        return self.paper_entities + self.folded[1]

    @property
    def model_deficit(self) -> int:
        return max(sum(self.census.model_entities.values()) - sum(self.model_accounted.values()), 0)

    @property
    def paper_deficit(self) -> int:
        return max(sum(self.census.paper_entities.values()) - sum(self.paper_accounted.values()), 0)

    def consistent(self) -> bool:
        """Nothing declared for the model space is missing (more than declared is fine: stray
        sub-records, say, load as entities of their own). A recover read may miss what its
        audit reported removing; those are counted as unreadable."""
        allowed = self.audit_removals() if self.recovered else 0
        return self.model_deficit <= allowed

    def audit_removals(self) -> int:
        """Model-space records the audit says it removed that are really gone: only these may
        be missing. A removal names ``TYPE(#HANDLE)``. When the file declared that handle it
        must have declared it with that type; a handle the file never declared (ezdxf gives
        records without one a handle of its own, as in R12 files) excuses at most one missing
        record of that type. A removal of something else (an orphaned layout record, an
        undefined style taken off a text) excuses no lost entity."""
        matched: Counter[str] = Counter()
        unnamed: Counter[str] = Counter()
        for kind, handle in self.removed_by_audit:
            declared = self.census.model_handles.get(handle)
            if declared is None:
                unnamed[kind] += 1
                continue
            entity = self.doc.entitydb.get(handle)
            if declared == kind and (entity is None or not entity.is_alive):
                matched[kind] += 1
        missing = self.lost_by_type(self.census.model_entities, self.model_accounted)
        # Never more of a type than are missing: a removal excuses one record, once.
        return sum(min(matched[kind] + unnamed[kind], missing.get(kind, 0)) for kind in matched | unnamed)

    def lost_by_type(self, declared: Counter[str], loaded: Counter[str]) -> dict[str, int]:
        return {name: count - loaded[name] for name, count in declared.items() if count > loaded[name]}


def _load(data: bytes, text: AsciiDxf | None, census: Any) -> _Loaded:
    """Strict read, then ezdxf's recover mode when the strict read fails or loses entities."""
    strict_census = census()
    strict_error: str | None = None
    strict: _Loaded | None = None
    try:
        with _nesting_as_limit():
            strict = _Loaded(_strict(data, text, strict_census), strict_census, False)
        if strict.consistent():
            return strict
    except _NOT_THE_PARSERS:
        raise
    except Exception as error:  # ezdxf raises many types on untrusted input, AssertionError too
        strict_error = _quote(error)
    recover_census = census()
    try:
        with _nesting_as_limit():
            doc, removed = _recover(data, text, recover_census)
            recovered = _Loaded(doc, recover_census, True, removed)
    except _NOT_THE_PARSERS:
        raise
    except Exception as error:
        detail = strict_error or _quote(error)
        if strict is not None:
            _raise_lost(strict)
        raise InputRejected("malformed", "the DXF structure cannot be parsed", detail) from None
    if recovered.consistent():
        return recovered
    _raise_lost(strict if strict is not None else recovered)
    raise AssertionError("unreachable")


def _raise_lost(loaded: _Loaded) -> None:
    declared = sum(loaded.census.model_entities.values())
    built = sum(loaded.model_entities.values())
    lost = loaded.lost_by_type(loaded.census.model_entities, loaded.model_accounted)
    types = ", ".join(f"{count} {name}" for name, count in sorted(lost.items())[:8])
    raise InputRejected(
        "entities-lost",
        f"the file declares {declared} entities in its model space but the DXF parser loaded "
        f"{built}; the drawing cannot be scored faithfully",
        f"not loaded: {types}" if types else "",
    )


def _strict(data: bytes, text: AsciiDxf | None, census: TagCensus) -> Any:
    from ezdxf.document import Drawing
    from ezdxf.lldxf.tagger import ascii_tags_loader, binary_tags_loader

    if text is None:
        # Bytes that are not UTF-8 become U+FFFD, as in the ASCII path: ezdxf's default keeps
        # them as lone surrogates, which no JSON encoder (metadata, scores) accepts.
        return Drawing.load(census.wrap(binary_tags_loader(data, errors="replace")))
    return Drawing.load(census.wrap(ascii_tags_loader(io.StringIO(text.text))))


def _recover(data: bytes, text: AsciiDxf | None, census: TagCensus) -> tuple[Any, frozenset[tuple[str, str]]]:
    from ezdxf.lldxf.tagger import binary_tags_loader
    from ezdxf.recover import Recover, _load_and_audit_document, bytes_loader

    if text is None:
        tool = Recover.run(io.BytesIO(data),
                           loader=lambda _stream: census.wrap(binary_tags_loader(data, errors="replace")))
    else:
        tool = Recover.run(io.BytesIO(for_recover(text)), loader=lambda stream: census.wrap(bytes_loader(stream)))
    doc, auditor = _load_and_audit_document(tool)
    # The audit names what it removes in its messages ("Deleted entity INSERT(#18) without
    # required BLOCK definition.", "Removed unsupported entity ..."); its fixes keep no
    # reference to the entity.
    removed = frozenset(
        (kind, handle.upper())
        for fix in auditor.fixes
        if _REMOVAL.search(str(fix.message))
        for kind, handle in _NAMED_ENTITY.findall(str(fix.message))
    )
    return doc, removed


_REMOVAL = re.compile(r"\b(?:removed|deleted)\b", re.IGNORECASE)
_NAMED_ENTITY = re.compile(r"\b([A-Z][A-Z0-9_]*)\(#([0-9A-Fa-f]+)\)")


_NOT_THE_PARSERS = (InputRejected, MemoryError)
"""Raised while ezdxf works but never ezdxf's verdict on the file: a bound of ours, or the
isolated reader's memory cap. They pass every ``except Exception`` that catches ezdxf."""


@contextlib.contextmanager
def _nesting_as_limit() -> Iterator[None]:
    """Too deep a structure (Python's recursion limit inside ezdxf) is ``nesting-limit``."""
    try:
        yield
    except RecursionError:
        raise InputRejected("nesting-limit", "the drawing's structure is nested too deeply to read") from None


def _quote(error: BaseException) -> str:
    text = str(error).strip()
    first = text.splitlines()[0][:200] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


@contextlib.contextmanager
def _quiet_ezdxf() -> Iterator[None]:
    """ezdxf logs every repaired value; a candidate drawing's defects belong in the result,
    not on the evaluator's stderr."""
    logger = logging.getLogger("ezdxf")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


class _Deadline:
    """The extraction's share of the limits: entity records made and wall time."""

    def __init__(self, limits: ReadLimits, started: float) -> None:
        self.limits = limits
        self.until = started + limits.max_seconds
        self.entities = 0

    def check(self) -> None:
        if time.monotonic() > self.until:
            raise InputRejected("time-limit", f"the drawing took longer than {self.limits.max_seconds:g} s to read")

    def count(self, n: int = 1) -> None:
        self.entities += n
        if self.entities > self.limits.max_entities:
            raise InputRejected(
                "entity-limit",
                f"the drawing has more than {self.limits.max_entities} entities (block contents included)",
            )
        self.check()


class EntityTooLarge(ValueError):
    """One entity is larger than a per-entity bound: it is skipped as unreadable."""


class _Report:
    """What extraction skipped, for :class:`ReadingReport`."""

    def __init__(self) -> None:
        self.unreadable: Counter[str] = Counter()
        self.unsupported: Counter[str] = Counter()
        self.notes: list[str] = []
        self.top_level_records = 0
        self.top_level_skipped = 0

    def skip(self, kind: str, error: BaseException, handle: str | None) -> None:
        self.unreadable[kind] += 1
        if len(self.notes) < _MAX_NOTES:
            where = f" #{handle}" if handle else ""
            self.notes.append(f"{kind}{where}: {_quote(error)}"[:240])


def _guarded(extract: Callable[[], DrawingMetadata]) -> DrawingMetadata:
    """Run ``extract`` with ezdxf's own exceptions on a damaged document made ``malformed``.

    An exception raised inside ezdxf while it walks the document it built from untrusted
    bytes is the drawing's fault; one raised in this package's code is ours and propagates.
    """
    try:
        with _nesting_as_limit():
            return extract()
    except _NOT_THE_PARSERS:
        raise
    except Exception as error:
        if not _raised_in_ezdxf(error):
            raise
        raise InputRejected(
            "malformed", "the DXF parser could not interpret the drawing's structure", _quote(error)
        ) from None


def _raised_in_ezdxf(error: BaseException) -> bool:
    tb = error.__traceback__
    innermost = None
    while tb is not None:
        innermost = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return innermost is not None and "/ezdxf/" in innermost.replace("\\", "/")


# --- extraction -------------------------------------------------------------------------

_DIMTYPES = {
    0: "linear",
    1: "aligned",
    2: "angular",
    3: "diameter",
    4: "radius",
    5: "angular3p",
    6: "ordinate",
    8: "arc",
}
_ALL_DEFPOINTS = ("defpoint", "defpoint2", "defpoint3", "defpoint4", "defpoint5")
_DEFPOINTS = {
    # Only the points a dimension type defines: R12 writers (AutoCAD's and ezdxf's exporter)
    # write every group (13 to 16) for every type, the unused ones as zeros.
    0: ("defpoint", "defpoint2", "defpoint3"),
    1: ("defpoint", "defpoint2", "defpoint3"),
    2: _ALL_DEFPOINTS,
    3: ("defpoint", "defpoint4"),
    4: ("defpoint", "defpoint4"),
    5: ("defpoint", "defpoint2", "defpoint3", "defpoint4"),
    6: ("defpoint", "defpoint2", "defpoint3"),
}
_SOLID_TYPES = frozenset({"3DSOLID", "REGION", "BODY", "SURFACE", "MESH", "POLYFACE", "POLYMESH"})


class _Extractor:
    def __init__(self, limits: ReadLimits, deadline: _Deadline, measure_3d: bool, report: _Report) -> None:
        self.limits = limits
        self.deadline = deadline
        self.measure_3d = measure_3d
        self.report = report

    # one entity -> zero or one record ---------------------------------------------------

    def entity(self, e: Any, *, explode: bool, depth: int = 0, layer_override: str | None = None) -> Entity | None:
        """One record for ``e``, or None when it cannot be read (then it is counted as
        unreadable). Only the limits and too deep nesting escape."""
        self.deadline.count()
        kind, handle = "UNKNOWN", None
        try:
            kind = str(e.dxftype())
            raw_handle = e.dxf.get("handle")
            handle = str(raw_handle) if raw_handle else None
            layer = str(e.dxf.get("layer", "0"))
            if layer_override is not None and layer == "0":
                layer = layer_override
            common: dict[str, Any] = {"layer": layer, "handle": handle}
            if e.dxf.get("invisible", 0):
                raise _NotDrawn("invisible (group 60): the CAD application does not draw it")
            record = self._convert(e, kind, common, explode=explode, depth=depth)
        except (InputRejected, RecursionError):
            raise
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception as error:  # the entity's own data is unreadable: skip it, count it
            self.report.skip(kind, error, handle)
            return None
        if isinstance(record, OtherEntity) and depth == 0:
            self.report.unsupported[kind] += 1
        return record

    def _convert(self, e: Any, kind: str, common: dict[str, Any], *, explode: bool, depth: int) -> Entity | None:
        dxf = e.dxf
        if kind == "LINE":
            return LineEntity(start=_p2(dxf.start), end=_p2(dxf.end), **common)
        if kind in ("CIRCLE", "ARC"):
            _in_plan(dxf.extrusion)
        if kind == "CIRCLE":
            center = e.ocs().to_wcs(dxf.center)
            return CircleEntity(center=_p2(center), radius=_round(abs(dxf.radius)), **common)
        if kind == "ARC":
            center = e.ocs().to_wcs(dxf.center)
            start, end = e.start_point, e.end_point
            a1 = math.degrees(math.atan2(start.y - center.y, start.x - center.x))
            a2 = math.degrees(math.atan2(end.y - center.y, end.x - center.x))
            if e.dxf.extrusion.z < 0:  # mirrored OCS: the arc runs clockwise in WCS
                a1, a2 = a2, a1
            return ArcEntity(
                center=_p2(center),
                radius=_round(abs(dxf.radius)),
                start_angle=_round(a1 % 360.0),
                end_angle=_round(a2 % 360.0),
                **common,
            )
        if kind == "LWPOLYLINE":
            pts = list(e.get_points("xyb"))
            ocs = e.ocs()
            flip = dxf.extrusion.z < 0
            verts = [_p2(ocs.to_wcs((p[0], p[1], dxf.elevation))) for p in pts]
            bulges = [_round(-p[2] if flip else p[2]) for p in pts]
            return PolylineEntity(
                source="LWPOLYLINE", closed=bool(e.closed), vertices=tuple(verts), bulges=tuple(bulges), **common
            )
        if kind == "POLYLINE":
            if e.is_polygon_mesh or e.is_poly_face_mesh:
                return self._solid(e, "POLYFACE" if e.is_poly_face_mesh else "POLYMESH", common)
            points = list(e.points_in_wcs()) if e.is_2d_polyline else [v.dxf.location for v in e.vertices]
            flip = e.is_2d_polyline and dxf.extrusion.z < 0
            bulges = [
                _round((-1.0 if flip else 1.0) * float(v.dxf.get("bulge", 0.0))) if e.is_2d_polyline else 0.0
                for v in e.vertices
            ]
            return PolylineEntity(
                source="POLYLINE",
                closed=bool(e.is_closed),
                vertices=tuple(_p2(p) for p in points),
                bulges=tuple(bulges),
                **common,
            )
        if kind == "ELLIPSE":
            return EllipseEntity(
                center=_p2(dxf.center),
                major_axis=_p2(dxf.major_axis),
                ratio=_round(dxf.ratio),
                start_param=_round(dxf.start_param),
                end_param=_round(dxf.end_param),
                **common,
            )
        if kind == "SPLINE":
            return self._spline(e, common)
        if kind == "POINT":
            return PointEntity(location=_p2(dxf.location), **common)
        if kind == "TEXT" or kind == "ATTRIB":
            self._check_text(dxf.get("text", ""))
            return self._text(e, kind, common)
        if kind == "MTEXT":
            self._check_text(e.text)
            return TextEntity(
                source="MTEXT",
                content=_mtext_content(e),
                insert=_p2(dxf.insert),
                height=_round(dxf.get("char_height", 0.0)),
                rotation=_round(e.get_rotation()),
                **common,
            )
        if kind == "DIMENSION":
            return self._dimension(e, common, depth)
        if kind == "HATCH":
            return self._hatch(e, common)
        if kind == "INSERT":
            return self._insert(e, common, explode=explode, depth=depth)
        if kind in _SOLID_TYPES:
            return self._solid(e, kind, common)
        return OtherEntity(source=kind, **common)

    def _text(self, e: Any, kind: str, common: dict[str, Any]) -> TextEntity:
        """A TEXT or ATTRIB where it is drawn: the point it is placed by, its direction, height,
        stretch and mirroring.

        Justified text is placed by its alignment point, except ALIGNED (3) and FIT (5): their
        baseline runs from the insertion point to the alignment point, which fixes the text's
        direction and length whatever its rotation field says. Such a text runs from where a
        left-justified one starts; when the run is implausible for its characters (shorter
        than :data:`FIT_RUN_BOUNDS` [0] or longer than [1] times a monospaced estimate of
        ``characters x height``), it is stretched or squeezed out of shape and its width
        factor says by how much.
        """
        dxf = e.dxf
        ocs = e.ocs()
        insert = ocs.to_wcs(dxf.insert)
        halign, valign = int(dxf.get("halign", 0)), int(dxf.get("valign", 0))
        content = _text_content(dxf.get("text", ""))
        height = float(dxf.get("height", 0.0))
        rotation = float(dxf.get("rotation", 0.0))
        width = float(dxf.get("width", 1.0))
        align = dxf.get("align_point")
        if halign in (3, 5) and valign == 0 and align is not None:
            end = ocs.to_wcs(align)
            dx, dy = end[0] - insert[0], end[1] - insert[1]
            run = math.hypot(dx, dy)
            estimate = max(len(content), 1) * max(height, 1e-9)
            rotation = math.degrees(math.atan2(dy, dx)) if run > 0 else rotation
            low, high = FIT_RUN_BOUNDS
            width = 1.0 if low <= run / estimate <= high else run / estimate
        elif (halign or valign) and align is not None:
            insert = ocs.to_wcs(align)
        flags = int(dxf.get("text_generation_flag", 0)) & 6
        if ocs.uz.z < 0:  # seen from below: the text reads backwards
            flags ^= 2
        return TextEntity(
            source=kind,
            content=content,
            insert=_p2(insert),
            height=_round(height),
            rotation=_round(rotation % 360.0),
            halign=halign,
            valign=valign,
            width_factor=_round(width) if math.isfinite(width) else 1.0,
            mirrored=flags,
            **common,
        )

    def _check_text(self, text: object) -> None:
        # ezdxf's plain-text conversion grows quadratically with the length of one value
        if len(str(text)) > self.limits.max_text_chars:
            raise EntityTooLarge(f"text longer than {self.limits.max_text_chars} characters")

    def _spline(self, e: Any, common: dict[str, Any]) -> SplineEntity:
        # ezdxf's fit-point interpolation builds a dense n x n matrix; control points cost
        # about 0.2 ms each to flatten
        points = max(len(e.control_points), len(e.fit_points))
        if points > self.limits.max_spline_points:
            raise EntityTooLarge(f"spline with more than {self.limits.max_spline_points} points")
        control = [_p2(p) for p in e.control_points][: self.limits.max_curve_points]
        fit = [_p2(p) for p in e.fit_points][: self.limits.max_curve_points]
        try:
            approx = [_p2(p) for p in e.flattening(_tolerance([*e.control_points, *e.fit_points]), segments=8)]
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception:
            approx = control or fit
        if len(approx) > self.limits.max_curve_points:
            step = len(approx) / (self.limits.max_curve_points - 1)
            keep = self.limits.max_curve_points - 1
            approx = [approx[min(len(approx) - 1, round(i * step))] for i in range(keep)] + [approx[-1]]
        return SplineEntity(
            degree=int(e.dxf.get("degree", 3)),
            closed=bool(e.closed),
            control_points=tuple(control),
            fit_points=tuple(fit),
            points=tuple(approx),
            **common,
        )

    def _dimension(self, e: Any, common: dict[str, Any], depth: int) -> DimensionEntity:
        dxf = e.dxf
        code = int(e.dimtype)
        dimtype = _DIMTYPES.get(code, "unknown")
        measurement: float | None
        try:
            raw = e.get_measurement()
            measurement = _round(raw) if isinstance(raw, (int, float)) else _round(math.hypot(raw.x, raw.y))
            if dimtype in ("angular", "angular3p") and measurement is not None:
                measurement = _round(math.degrees(measurement)) if measurement <= 2 * math.pi + 1e-9 else measurement
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception:
            measurement = None
        if measurement is not None and not math.isfinite(measurement):
            measurement = None
        if measurement is not None:
            measurement = _displayed_value(e, dimtype, measurement)
        defpoints = [_p2(dxf.get(name)) for name in _DEFPOINTS.get(code, _ALL_DEFPOINTS) if dxf.hasattr(name)]
        self._check_text(dxf.get("text", "") or "")
        graphics: list[Primitive] = []
        self._check_depth(depth)
        try:
            for sub in e.virtual_entities():
                graphics.extend(self._flatten(sub, depth + 1, common["layer"]))
        except (InputRejected, RecursionError):
            raise
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception:  # the rendered graphics are optional; the measurement is what counts
            graphics = []
        return DimensionEntity(
            dimtype=dimtype,
            measurement=measurement,
            defpoints=tuple(defpoints),
            text_override=decode_escapes(str(dxf.get("text", "") or "")),
            graphics=tuple(graphics),
            **common,
        )

    def _hatch(self, e: Any, common: dict[str, Any]) -> HatchEntity:
        from ezdxf import path as ezpath

        # Spline edges are the costly part of a boundary (ezdxf fits a curve through each);
        # they share one budget per hatch, so many edges at the per-spline bound cannot add up.
        spline_points = sum(
            max(len(getattr(edge, "control_points", ())), len(getattr(edge, "fit_points", ())))
            for path in e.paths
            for edge in getattr(path, "edges", ())
        )
        if spline_points > self.limits.max_spline_points:
            raise EntityTooLarge(f"hatch boundary with more than {self.limits.max_spline_points} spline points")
        loops: list[tuple[Point, ...]] = []
        for boundary in ezpath.from_hatch(e):
            self.deadline.check()
            raw = list(boundary.flattening(_tolerance(boundary.control_vertices()), segments=8))
            if len(raw) > self.limits.max_curve_points:  # thin first: rounding every point is the cost
                step = len(raw) / self.limits.max_curve_points
                raw = [raw[int(i * step)] for i in range(self.limits.max_curve_points)]
            loops.append(tuple(_p2(p) for p in raw))
            self.deadline.count()
        gradient = e.gradient if e.has_gradient_data else None
        return HatchEntity(
            # A gradient fill is not a solid one, though DXF flags both as "solid fill".
            pattern=f"GRADIENT {gradient.name}".strip() if gradient is not None else str(e.dxf.get("pattern_name", "")),
            solid=bool(e.dxf.get("solid_fill", 0)) and gradient is None,
            boundaries=tuple(loops),
            **common,
        )

    def _insert(self, e: Any, common: dict[str, Any], *, explode: bool, depth: int) -> InsertEntity:
        dxf = e.dxf
        for attrib in e.attribs:
            self._check_text(attrib.dxf.get("text", ""))
        attributes = {str(a.dxf.tag): _text_content(a.dxf.get("text", "")) for a in e.attribs}
        exploded: list[Primitive] = []
        if explode:
            self._check_depth(depth)
            for sub in e.virtual_entities():
                exploded.extend(self._flatten(sub, depth + 1, common["layer"]))
            for attrib in e.attribs:
                if not attrib.is_invisible:
                    exploded.extend(self._flatten(attrib, depth + 1, common["layer"]))
        return InsertEntity(
            block=str(dxf.name),
            insert=_p2(e.ocs().to_wcs(dxf.insert)),
            scale=(_round(dxf.get("xscale", 1.0)), _round(dxf.get("yscale", 1.0)), _round(dxf.get("zscale", 1.0))),
            rotation=_round(dxf.get("rotation", 0.0)),
            attributes=dict(sorted(attributes.items())),
            exploded=tuple(exploded),
            **common,
        )

    def _check_depth(self, depth: int) -> None:
        """Block references nest deeper than ``max_block_depth`` (or refer to themselves):
        the drawing is rejected rather than scored with its deeper contents cut off."""
        if depth >= self.limits.max_block_depth:
            raise InputRejected(
                "nesting-limit", f"block references are nested more than {self.limits.max_block_depth} levels deep"
            )

    def _flatten(self, e: Any, depth: int, parent_layer: str) -> list[Primitive]:
        """Primitive records of a virtual entity, nested references and dimensions expanded."""
        record = self.entity(e, explode=True, depth=depth, layer_override=parent_layer)
        if record is None:
            return []
        if isinstance(record, InsertEntity):
            return list(record.exploded)
        if isinstance(record, DimensionEntity):
            return list(record.graphics)
        return [record]

    def _solid(self, e: Any, kind: str, common: dict[str, Any]) -> SolidEntity:
        if not self.measure_3d:
            reason = "3D extents are measured in schema v4 only"
            return SolidEntity(source=kind, status="unknown", reason=reason, **common)
        try:
            vertices, volume, area, centroid = _measure_body(e, kind)
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception as error:
            reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
            return SolidEntity(source=kind, status="unknown", reason=f"cannot measure {kind}: {reason}", **common)
        if not vertices:
            return SolidEntity(source=kind, status="unknown", reason=f"{kind} has no measurable geometry", **common)
        xs, ys, zs = zip(*vertices, strict=True)
        extents = Extents3D(
            min=(_round(min(xs)), _round(min(ys)), _round(min(zs))),
            max=(_round(max(xs)), _round(max(ys)), _round(max(zs))),
        )
        return SolidEntity(
            source=kind,
            status="measured",
            extents=extents,
            volume=None if volume is None else _round6(volume),
            # summed over many faces: six decimals keep the float noise of the summation order
            # (which may differ between CPUs) out of the gold's bytes
            area=None if area is None else _round6(area),
            centroid=None if centroid is None else (_round6(centroid[0]), _round6(centroid[1]), _round6(centroid[2])),
            **common,
        )

    # whole document ---------------------------------------------------------------------

    def space(self, name: str, layout: Iterable[Any]) -> SpaceInfo:
        entities: list[Entity] = []
        for e in layout:
            record = self.entity(e, explode=True)
            if record is None:
                self.report.top_level_skipped += 1
            else:
                entities.append(record)
        self.report.top_level_records += len(entities)
        return SpaceInfo(name=name, entities=tuple(entities))


def _round6(value: float) -> float:
    return round(value, 6) + 0.0  # + 0.0 turns -0.0 into 0.0


def _measure_body(e: Any, kind: str) -> tuple[list[Point3], float | None, float | None, Point3 | None]:
    """Vertices, volume, surface area and volume centroid of a 3D body; raises when ezdxf cannot
    evaluate it.

    Volume and centroid come from the signed tetrahedra of the triangulated faces and are only
    defined for a closed surface, tested geometrically: the area-weighted face normals of a
    closed surface cancel. (ezdxf's topological test rejects the T-junctions that Boolean
    operations leave, although such a surface is closed; an open box is not, whatever its box.)
    """
    from ezdxf.render.mesh import MeshBuilder, MeshVertexMerger

    meshes: list[Any] = []
    if kind in ("3DSOLID", "REGION", "BODY", "SURFACE"):
        from ezdxf.acis.dxf import load_dxf
        from ezdxf.acis.mesh import mesh_from_body

        for body in load_dxf(e):
            meshes.extend(mesh_from_body(body))
    elif kind == "MESH":
        meshes.append(MeshBuilder.from_mesh(e))
    else:
        meshes.append(MeshVertexMerger.from_polyface(e))
    vertices: list[Point3] = []
    triangles: list[tuple[Point3, Point3, Point3]] = []
    for mesh in meshes:
        points = [(float(v.x), float(v.y), float(v.z)) for v in mesh.vertices]
        vertices.extend(points)
        for face in mesh.faces:
            for i in range(1, len(face) - 1):
                triangles.append((points[face[0]], points[face[i]], points[face[i + 1]]))
    if not triangles:
        return vertices, None, None, None
    t = np.asarray(triangles, dtype=float)  # (n, 3 corners, 3 coordinates)
    cross = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
    area = float(np.linalg.norm(cross, axis=1).sum()) / 2.0
    if kind == "REGION" or area <= 0.0:
        return vertices, None, area, None
    closed = float(np.linalg.norm(cross.sum(axis=0))) / 2.0 <= 1e-6 * area
    if not closed:
        return vertices, None, area, None
    signed = np.einsum("ij,ij->i", t[:, 0], np.cross(t[:, 1], t[:, 2])) / 6.0
    volume = float(signed.sum())
    if abs(volume) <= 0.0:
        return vertices, None, area, None
    centre = (signed[:, None] * t.sum(axis=1) / 4.0).sum(axis=0) / volume
    return vertices, abs(volume), area, (float(centre[0]), float(centre[1]), float(centre[2]))


def _layers(doc: Any, report: _Report) -> tuple[LayerInfo, ...]:
    layers: list[LayerInfo] = []
    for layer in doc.layers:
        try:
            dxf = layer.dxf
            color = int(dxf.get("color", 7))
            layers.append(
                LayerInfo(
                    name=str(dxf.name),
                    color=abs(color) if abs(color) <= 257 else 7,
                    linetype=str(dxf.get("linetype", "Continuous")),
                    on=bool(layer.is_on()),
                    frozen=bool(layer.is_frozen()),
                    locked=bool(layer.is_locked()),
                )
            )
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception as error:  # one damaged table entry does not void the drawing
            report.skip("LAYER", error, None)
    return tuple(sorted(layers, key=lambda item: item.name.lower()))


def _blocks(doc: Any, extractor: _Extractor) -> tuple[BlockInfo, ...]:
    blocks: list[BlockInfo] = []
    for block in doc.blocks:
        try:
            name = str(block.name)
            if name.startswith("*") or block.is_any_layout:
                continue
            entities: list[Entity] = []
            for e in block:
                record = extractor.entity(e, explode=False)
                if record is not None:
                    entities.append(record)
            base = block.block.dxf.get("base_point", (0.0, 0.0, 0.0))
            blocks.append(BlockInfo(name=name, base_point=_p2(base), entities=tuple(entities)))
        except (InputRejected, RecursionError):
            raise
        except MemoryError:  # the isolated reader's memory cap: never an entity's fault
            raise
        except Exception as error:  # a damaged definition is skipped; references to it explode to nothing
            extractor.report.skip("BLOCK", error, None)
    return tuple(sorted(blocks, key=lambda item: item.name))


def _extract(
    doc: Any,
    schema_version: SchemaVersion,
    limits: ReadLimits,
    deadline: _Deadline,
    report: _Report,
    source_format: str,
    sha: str,
    size: int,
) -> DrawingMetadata:
    extractor = _Extractor(limits, deadline, measure_3d=schema_version == 4, report=report)
    model = extractor.space("Model", doc.modelspace())
    layouts: list[SpaceInfo] = []
    for layout in doc.layouts:
        if layout.is_modelspace:
            continue
        space = extractor.space(str(layout.name), layout)
        layouts.append(space)
    units = _int_or_none(doc.header.get("$INSUNITS"))
    physical = physical_extents(model.entities) if schema_version == 4 else None
    return DrawingMetadata(
        schema_version=schema_version,
        source=SourceInfo(
            format=source_format,
            sha256=sha,
            size=size,
            dxf_version=str(doc.dxfversion),
            units=units,
        ),
        layers=_layers(doc, report),
        blocks=_blocks(doc, extractor),
        model=model,
        layouts=tuple(sorted(layouts, key=lambda s: s.name)),
        extents=extents_of(model.entities),
        physical_3d=physical,
    )


def _tolerance(points: Iterable[Any]) -> float:
    """Flattening tolerance: 0.01 drawing units, or 1e-5 of the curve's extent when that is
    larger. An absolute tolerance makes the number of points grow with the curve's size, and
    a curve the size of a continent would take minutes and gigabytes to flatten."""
    xs: list[float] = []
    ys: list[float] = []
    for p in points:
        xs.append(float(p[0]))
        ys.append(float(p[1]))
    if not xs:
        return 0.01
    extent = math.hypot(max(xs) - min(xs), max(ys) - min(ys))
    return max(0.01, extent * 1e-5) if math.isfinite(extent) else 0.01


def _int_or_none(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if -(2**31) <= number < 2**31 else None

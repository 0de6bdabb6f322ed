"""DXF bytes as CAD programs write them, turned into the tag stream ezdxf loads.

AutoCAD on Windows writes CRLF line ends, older releases end the file with a DOS end-of-file
byte (Ctrl-Z, 0x1A), releases before R2007 encode text in the code page named by
``$DWGCODEPAGE`` (with ``\\U+XXXX`` escapes for characters outside it), R2007 and later write
UTF-8, and any release may write binary DXF. LibreCAD writes LF and UTF-8. This module accepts
all of these and hands ezdxf one normal form: ``\\n`` line ends, decoded text, nothing after
the ``EOF`` marker.

It also counts what the file declares while ezdxf reads it (:class:`TagCensus`): every tag
ezdxf's tag loader yields passes through the census, which enforces the tag, record and time
limits *during* the parse (so a pathological file is stopped early, not after ezdxf has built
it in memory) and records how many entities the model and paper spaces hold. The reader
compares that with what ezdxf built; a difference means the parser lost entities, and the
drawing is rejected with a reason instead of being scored as if it were empty.

Failures raise :class:`InputRejected` with a stable ``failure_class`` (see
:data:`autocad_bench_evaluator.invalid.InvalidClass`) and a sentence for people.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from autocad_bench_evaluator.invalid import InvalidClass

BINARY_DXF_SENTINEL = b"AutoCAD Binary DXF\r\n\x1a\x00"
UTF8_BOM = b"\xef\xbb\xbf"
DOS_EOF = b"\x1a"
_TRAILER = b"\x00\x1a \t\r\n"
"""What writers leave after the ``EOF`` marker: Ctrl-Z, NUL padding, blank lines."""

LineEndings = Literal["lf", "crlf", "cr", "mixed", "binary"]

# Tags inside an entity record that ezdxf folds into the entity before them.
_SUB_RECORDS = frozenset({"VERTEX", "SEQEND", "ATTRIB"})
_PAPER_BLOCK = re.compile(r"\*PAPER_SPACE\d*")
_UNICODE_ESCAPE = re.compile(r"\\U\+([0-9A-Fa-f]{4})")
_MIF_ESCAPE = re.compile(r"\\M\+([1-5])([0-9A-Fa-f]{4})")
_MIF_CODECS = {"1": "cp932", "2": "cp950", "3": "cp949", "4": "cp1361", "5": "cp936"}
_HEADER_SCAN_LINES = 200_000


class InputRejected(Exception):
    """The file cannot count as a drawing: ``failure_class`` says why in one stable word,
    ``reason`` in a sentence, ``detail`` quotes the parser where there is something to quote."""

    def __init__(self, failure_class: InvalidClass, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.failure_class: InvalidClass = failure_class
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class AsciiDxf:
    """An ASCII DXF in normal form: ``text`` for ezdxf's strict reader, ``data`` (the same
    content as bytes, ``\\n`` line ends) for its recover reader."""

    text: str
    data: bytes
    line_endings: LineEndings
    encoding: str
    decoding_errors: int
    dos_eof: bool
    declared_version: str | None
    declared_codepage: str | None


def strip_trailer(data: bytes) -> tuple[bytes, bool]:
    """``data`` without what follows the last ``EOF`` line, and whether a Ctrl-Z was there."""
    stripped = data.rstrip(_TRAILER)
    return stripped, DOS_EOF in data[len(stripped) :]


def line_endings_of(data: bytes) -> LineEndings:
    """Which line ends the file uses (``mixed`` when more than one kind occurs)."""
    crlf = data.count(b"\r\n")
    cr = data.count(b"\r") - crlf
    lf = data.count(b"\n") - crlf
    kinds = [name for name, count in (("crlf", crlf), ("cr", cr), ("lf", lf)) if count]
    if len(kinds) > 1:
        return "mixed"
    return kinds[0] if kinds else "lf"  # type: ignore[return-value]


def normalise_line_endings(data: bytes) -> bytes:
    """CRLF and lone CR become LF. Safe for every DXF code page: in the single-byte pages and in
    the multi-byte East Asian ones (Shift-JIS, GBK, Big5, UHC) a trail byte is never 0x0A or
    0x0D, and a DXF value cannot hold a line break."""
    if b"\r" not in data:
        return data
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def check_binary(data: bytes) -> bool:
    """True when ``data`` is a binary DXF; raises :class:`InputRejected` when it is one but
    lacks its ``EOF`` record. The Ctrl-Z of the sentinel is part of the format."""
    if not data.startswith(BINARY_DXF_SENTINEL):
        return False
    if not data[len(BINARY_DXF_SENTINEL) :].rstrip(_TRAILER).endswith(b"EOF"):
        raise InputRejected("truncated", "the binary DXF is truncated: it has no EOF record at its end")
    return True


def ascii_dxf(raw: bytes) -> AsciiDxf:
    """Check the structure of an ASCII DXF and bring it to normal form.

    Raises :class:`InputRejected` for data that is not a DXF (``not-a-drawing``) or that ends
    before its ``EOF`` marker (``truncated``).
    """
    data = raw.removeprefix(UTF8_BOM)
    head = data[:4096]
    if b"\x00" in head:
        raise InputRejected("not-a-drawing", "the file is binary data without a DXF or DWG signature")
    endings = line_endings_of(data)
    data = normalise_line_endings(data)
    lines = data[:4096].lstrip().split(b"\n")
    if len(lines) < 2 or lines[0].strip() not in (b"0", b"999"):
        raise InputRejected("not-a-drawing", "the file has no DXF group-code structure and no DWG signature")
    if lines[0].strip() == b"0" and lines[1].strip().upper() != b"SECTION":
        raise InputRejected("not-a-drawing", "the file looks like DXF but does not start with a SECTION")
    data, dos_eof = strip_trailer(data)
    last = data[data.rfind(b"\n") + 1 :].strip()
    if last.upper() != b"EOF":
        raise InputRejected("truncated", "the DXF is truncated: it does not end with an EOF marker")
    data += b"\n"
    version, codepage = header_variables(data)
    encoding = text_encoding(version, codepage)
    if raw.startswith(UTF8_BOM) or (version is None and codepage is None):
        # Nothing declared (light writers), or a byte-order mark: UTF-8 if it decodes as such.
        try:
            data.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            pass
    text, errors = decode(data, encoding)
    return AsciiDxf(
        text=decode_escapes(text),
        data=data,
        line_endings=endings,
        encoding=encoding,
        decoding_errors=errors,
        dos_eof=dos_eof,
        declared_version=version,
        declared_codepage=codepage,
    )


def header_variables(data: bytes) -> tuple[str | None, str | None]:
    """``$ACADVER`` and ``$DWGCODEPAGE`` from the HEADER section (``\\n`` line ends), or None."""
    version: str | None = None
    codepage: str | None = None
    lines = iter(data.split(b"\n", _HEADER_SCAN_LINES)[:_HEADER_SCAN_LINES])
    wanted: str | None = None
    in_header = False
    for code_line in lines:
        value = next(lines, b"").strip()
        code = code_line.strip()
        if code == b"0":
            if value == b"ENDSEC" and in_header:
                break
            continue
        if code == b"2" and value == b"HEADER":
            in_header = True
        elif code == b"9":
            wanted = value.decode("ascii", "replace")
        elif wanted is not None:
            text = value.decode("ascii", "replace")
            if wanted == "$ACADVER" and re.fullmatch(r"AC\d{4}", text):
                version = text
            elif wanted == "$DWGCODEPAGE" and text:
                codepage = text
            wanted = None
    return version, codepage


_CODEPAGES: dict[str, str] = {
    **{f"ANSI_{n}": f"cp{n}" for n in (874, 932, 949, 950, *range(1250, 1259))},
    "ANSI_936": "gbk",
    "ANSI_1361": "johab",
    **{f"DOS{n}": f"cp{n}" for n in (437, 850, 852, 855, 857, 860, 861, 863, 864, 865, 866, 869, 932)},
    **{f"ISO8859-{n}": f"iso8859_{n}" for n in range(1, 11)},
    **{f"ISO8859_{n}": f"iso8859_{n}" for n in range(1, 11)},
    "MACINTOSH": "mac_roman",
    "MAC-ROMAN": "mac_roman",
    "BIG5": "cp950",
    "GB2312": "gbk",
    "KSC5601": "cp949",
    "JOHAB": "johab",
    "UTF8": "utf-8",
    "UTF-8": "utf-8",
    "ASCII": "cp1252",
}
"""``$DWGCODEPAGE`` values AutoCAD and other writers use, to Python codecs (exact names)."""


def text_encoding(version: str | None, codepage: str | None) -> str:
    """The Python codec of the file's text: UTF-8 from R2007 (AC1021) on, otherwise the code
    page ``$DWGCODEPAGE`` names (AutoCAD's default ANSI_1252 when it names none or an unknown)."""
    if version is not None and version >= "AC1021":
        return "utf-8"
    if not codepage:
        return "cp1252"
    return _CODEPAGES.get(codepage.strip().upper(), "cp1252")


def for_recover(dxf: AsciiDxf) -> bytes:
    """The decoded text as bytes ezdxf's recover reader decodes back to the same characters.

    The recover reader decodes bytes itself, with its own code-page table (which maps, for
    example, DOS866 to cp1252, and assumes cp1252 unless both ``$ACADVER`` and
    ``$DWGCODEPAGE`` are present). So the text is re-encoded in the codec it will pick, with
    AutoCAD's ``\\U+XXXX`` escape (which it resolves) for every character that codec lacks."""
    from ezdxf.tools.codepage import toencoding

    version, codepage = dxf.declared_version, dxf.declared_codepage
    codec = "cp1252"
    if version and codepage:
        codec = "utf-8" if version >= "AC1021" else toencoding(codepage)
    try:
        return dxf.text.encode(codec)
    except UnicodeEncodeError:
        return "".join(c if _encodable(c, codec) else f"\\U+{ord(c):04X}" for c in dxf.text).encode(codec)


def _encodable(char: str, codec: str) -> bool:
    try:
        char.encode(codec)
    except UnicodeEncodeError:
        return False
    return True


def decode(data: bytes, encoding: str) -> tuple[str, int]:
    """Decode, replacing undecodable bytes; returns the text and how many were replaced."""
    try:
        return data.decode(encoding), 0
    except UnicodeDecodeError:
        text = data.decode(encoding, errors="replace")
        genuine = data.decode(encoding, errors="ignore").count("\ufffd")
        return text, text.count("\ufffd") - genuine


def _unicode_escape(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    # A control character would change the line structure (and no writer escapes one).
    return chr(code) if code >= 0x20 and not 0xD800 <= code <= 0xDFFF else match.group(0)


def _mif_escape(match: re.Match[str]) -> str:
    try:
        decoded = bytes.fromhex(match.group(2)).decode(_MIF_CODECS[match.group(1)])
    except (UnicodeDecodeError, LookupError, ValueError):
        return match.group(0)
    return decoded if decoded.isprintable() else match.group(0)


def decode_escapes(text: str) -> str:
    """Resolve AutoCAD's ``\\U+XXXX`` (Unicode) and ``\\M+nXXXX`` (multi-byte) text escapes,
    which pre-R2007 files use for characters outside their code page. ezdxf's strict reader
    leaves them in the text; its recover reader resolves them, and so must we."""
    if "\\U+" in text:
        text = _UNICODE_ESCAPE.sub(_unicode_escape, text)
    if "\\M+" in text:
        text = _MIF_ESCAPE.sub(_mif_escape, text)
    return text


@dataclass
class TagCensus:
    """Counts what a tag stream declares while ezdxf consumes it, and enforces the limits.

    Wrap a tag loader with :meth:`wrap`; every tag passes through. Raises
    :class:`InputRejected` (``tag-limit``, ``entity-limit`` or ``time-limit``) as soon as a
    limit is crossed, so ezdxf never builds more than the limits allow.
    """

    max_tags: int
    max_records: int
    deadline: float
    tags: int = 0
    records: int = 0
    sections: list[str] = field(default_factory=list)
    model_entities: Counter[str] = field(default_factory=Counter)
    """Top-level entity records of the model space, by type: ENTITIES-section records without
    the paper-space flag (group 67) and the contents of the ``*Model_Space`` block."""
    paper_entities: Counter[str] = field(default_factory=Counter)
    """The same for the paper spaces (flag 67 set, or a ``*Paper_Space*`` block)."""
    block_entities: int = 0
    """Top-level entity records of every other block definition."""
    _section: str | None = None
    _expect_section_name: bool = False
    _block_name_pending: bool = False
    _block: str | None = None
    _pending: str | None = None
    _pending_paper: bool = False
    _header_variable: str | None = None
    version: str | None = None
    """``$ACADVER`` as the HEADER section declares it."""
    frame_handles: set[str] = field(default_factory=set)
    """Handles that an MTEXT's XDATA names as its text frame (``ACAD_MTEXT_TEXT_BORDERS``).
    Before R2018 AutoCAD and BricsCAD write a framed MTEXT's border as an LWPOLYLINE of its
    own, which ezdxf folds back into the MTEXT (the border is not an entity once loaded)."""
    polylines: dict[str, str] = field(default_factory=dict)
    """Handle -> ``model`` or ``paper`` of every top-level LWPOLYLINE of a space: where a text
    frame the load folded away was declared."""
    model_handles: dict[str, str] = field(default_factory=dict)
    """Handle -> type of every model-space record that has a handle: what an audit that says
    it removed ``TYPE(#HANDLE)`` is checked against."""
    _pending_kind: str | None = None
    """Type of the space record whose tags are being read (ENTITIES or a layout block)."""
    _pending_handle: str | None = None
    _pending_space: str | None = None
    _in_frame_xdata: bool = False

    @classmethod
    def start(cls, max_tags: int, max_records: int, max_seconds: float) -> TagCensus:
        return cls(max_tags=max_tags, max_records=max_records, deadline=time.monotonic() + max_seconds)

    @property
    def space_entities(self) -> Counter[str]:
        """Model and paper space together."""
        return self.model_entities + self.paper_entities

    @property
    def declared_space_entities(self) -> int:
        return sum(self.model_entities.values()) + sum(self.paper_entities.values())

    def wrap(self, tags: Iterable[Any]) -> Iterator[Any]:
        """Yield ``tags`` unchanged while counting them."""
        for tag in tags:
            self.observe(tag[0], tag[1])
            yield tag
        self._finish_pending()

    def observe(self, code: int, raw: object) -> None:
        self.tags += 1
        if self.tags > self.max_tags:
            raise InputRejected("tag-limit", f"the drawing has more than {self.max_tags} group-code tags")
        if not self.tags & 0xFFF and time.monotonic() > self.deadline:
            raise InputRejected("time-limit", "the drawing took too long to read")
        if code == 0:
            self.records += 1
            if self.records > self.max_records:
                raise InputRejected("entity-limit", f"the drawing has more than {self.max_records} records")
            self._finish_pending()
            self._record(_text(raw).strip())
        elif code == 9 and self._section == "HEADER":
            self._header_variable = _text(raw).strip()
        elif code == 1 and self._header_variable == "$ACADVER":
            self.version = _text(raw).strip()
            self._header_variable = None
        elif code == 67 and self._pending is not None:
            self._pending_paper = _text(raw).strip() == "1"
        elif code == 5 and self._pending_space is not None and self._pending_handle is None:
            self._pending_handle = _text(raw).strip().upper()
            if self._pending_kind == "LWPOLYLINE":
                self.polylines[self._pending_handle] = self._pending_space
            if self._pending is None and self._pending_space == "model" and self._pending_kind is not None:
                self.model_handles[self._pending_handle] = self._pending_kind  # a *Model_Space block record
        elif code == 1000 and self._pending_kind == "MTEXT":
            marker = _text(raw).strip()
            if marker == "ACAD_MTEXT_TEXT_BORDERS_BEGIN":
                self._in_frame_xdata = True
            elif marker == "ACAD_MTEXT_TEXT_BORDERS_END":
                self._in_frame_xdata = False
        elif code == 1005 and self._in_frame_xdata:
            self.frame_handles.add(_text(raw).strip().upper())
        elif code == 2 and (self._expect_section_name or self._block_name_pending):
            name = _text(raw).strip()
            if self._expect_section_name:
                self._section = name.upper()
                self.sections.append(self._section)
            else:
                self._block = name
            self._expect_section_name = self._block_name_pending = False

    def _finish_pending(self) -> None:
        if self._pending is not None:
            (self.paper_entities if self._pending_paper else self.model_entities)[self._pending] += 1
            if self._pending_handle is not None:
                if self._pending_handle in self.polylines:
                    # Group 67 may come after the handle: the record's space is known only now.
                    self.polylines[self._pending_handle] = "paper" if self._pending_paper else "model"
                if not self._pending_paper:
                    self.model_handles[self._pending_handle] = self._pending
        self._pending = None
        self._pending_paper = False
        self._pending_kind = None
        self._pending_space = None
        self._pending_handle = None
        self._in_frame_xdata = False

    def _record(self, name: str) -> None:
        self._expect_section_name = name == "SECTION"
        self._block_name_pending = False
        if name in ("SECTION", "ENDSEC", "EOF"):
            self._section = None
            self._block = None
            return
        if self._section == "ENTITIES":
            if name not in _SUB_RECORDS:
                self._pending = name  # counted when its record ends: group 67 may follow
                self._pending_kind, self._pending_space = name, "model"
        elif self._section == "BLOCKS":
            if name == "BLOCK":
                self._block_name_pending = True
                self._block = ""
            elif name == "ENDBLK":
                self._block = None
            elif self._block is not None and name not in _SUB_RECORDS:
                space = _layout_block(self._block, r12=self.version is None or self.version <= "AC1009")
                if space == "model":
                    self.model_entities[name] += 1
                elif space == "paper":
                    self.paper_entities[name] += 1
                else:
                    self.block_entities += 1
                if space is not None:
                    self._pending_kind, self._pending_space = name, space


def _layout_block(name: str, *, r12: bool) -> str | None:
    """``model`` or ``paper`` for the block definitions that hold a layout's entities
    (``$MODEL_SPACE``/``$PAPER_SPACE`` are those names in R12 only; later a user block may be
    called so)."""
    upper = name.upper()
    if upper == "*MODEL_SPACE" or (r12 and upper == "$MODEL_SPACE"):
        return "model"
    if _PAPER_BLOCK.fullmatch(upper) or (r12 and upper == "$PAPER_SPACE"):
        return "paper"
    return None


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return str(value)

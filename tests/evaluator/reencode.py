"""Write one drawing the ways real CAD programs write it, for the reading tests.

Byte-level variants change only the bytes (line ends, Ctrl-Z, BOM, entity order, handles);
the writer variants re-save the document with ezdxf's writers (binary DXF, R12 through the
R12 exporter, R2018, R2000 in a Windows code page).
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from pathlib import Path

from ezdxf.addons import r12export
from ezdxf.document import Drawing
from ezdxf.filemanagement import readfile
from ezdxf.lldxf.tags import Tags
from ezdxf.lldxf.types import DXFTag


def lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


def crlf(data: bytes) -> bytes:
    """As AutoCAD on Windows writes."""
    return lf(data).replace(b"\n", b"\r\n")


def cr(data: bytes) -> bytes:
    """Classic Mac OS line ends."""
    return lf(data).replace(b"\n", b"\r")


def mixed(data: bytes) -> bytes:
    """Every other line CRLF (files concatenated or edited by hand on two systems)."""
    lines = lf(data).split(b"\n")
    return b"".join(line + (b"\r\n" if i % 2 else b"\n") for i, line in enumerate(lines[:-1])) + lines[-1]


def ctrl_z(data: bytes) -> bytes:
    """CRLF plus the DOS end-of-file byte older AutoCAD releases wrote after EOF."""
    return crlf(data) + b"\x1a"


def bom(data: bytes) -> bytes:
    """A UTF-8 byte-order mark in front (some .NET writers add one)."""
    return b"\xef\xbb\xbf" + data


def _pairs(data: bytes) -> list[tuple[bytes, bytes]]:
    lines = lf(data).split(b"\n")
    return list(zip(lines[0::2], lines[1::2], strict=False))


def _join(pairs: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(code + b"\n" + value + b"\n" for code, value in pairs)


def shuffle_entities(data: bytes, seed: int) -> bytes:
    """Entity records of the ENTITIES section in another order (every record's bytes kept)."""
    pairs = _pairs(data)
    section = next(i for i, (c, v) in enumerate(pairs) if c.strip() == b"2" and v.strip() == b"ENTITIES") + 1
    end = next(i for i in range(section, len(pairs)) if pairs[i][0].strip() == b"0" and pairs[i][1] == b"ENDSEC")
    starts = [
        i
        for i in range(section, end)
        if pairs[i][0].strip() == b"0" and pairs[i][1].strip() not in (b"VERTEX", b"SEQEND", b"ATTRIB")
    ]
    records = [pairs[a:b] for a, b in zip(starts, [*starts[1:], end], strict=True)]
    random.Random(seed).shuffle(records)
    return _join(pairs[:section] + [pair for record in records for pair in record] + pairs[end:])


_HANDLE_CODES = frozenset({5, 105, *range(320, 370), *range(390, 400), 480, 481, 1005})


def renumber_handles(data: bytes, offset: int = 0x4000) -> bytes:
    """Every handle and every reference to one moved by ``offset`` (``$HANDSEED`` too), so
    the drawing is the same but no entity keeps its handle. R2000+ files only."""
    out: list[tuple[bytes, bytes]] = []
    for code, value in _pairs(data):
        number = int(code.strip()) if code.strip().lstrip(b"-").isdigit() else None
        if number in _HANDLE_CODES and value.strip() not in (b"", b"0"):
            value = b"%X" % (int(value.strip(), 16) + offset)
        out.append((code, value))
    return _join(out)


def acad_encode(text: str, encoding: str) -> bytes:
    """Encode as AutoCAD writes a pre-R2007 DXF: a character outside the code page becomes a
    ``\\U+XXXX`` escape (ezdxf's own writer uses ``\\xNN`` for Latin-1 ones, which no CAD
    program writes)."""
    out = bytearray()
    for char in text:
        try:
            out += char.encode(encoding)
        except UnicodeEncodeError:
            out += b"\\U+%04X" % ord(char)
    return bytes(out)


def _save(doc: Drawing, fmt: str = "asc") -> bytes:
    if fmt == "bin":
        stream = io.BytesIO()
        doc.write(stream, fmt="bin")
        return stream.getvalue()
    text = io.StringIO()
    doc.write(text)
    return acad_encode(text.getvalue(), doc.output_encoding)


def binary(path: Path) -> bytes:
    """Binary DXF of the same document, through ezdxf's binary writer."""
    return _save(readfile(path), fmt="bin")


def r2018(path: Path) -> bytes:
    """The document saved as R2018 (AC1032). ACIS bodies are re-exported, because R2013 and
    later store them as binary SAB in the ACDSDATA section, as AutoCAD does."""
    from ezdxf.acis import dxf as acis

    doc = readfile(path)
    bodies = {e.dxf.handle: acis.load_dxf(e) for e in doc.modelspace().query("3DSOLID REGION BODY SURFACE")}
    doc.dxfversion = "AC1032"
    if bodies:
        # ezdxf writes the ACDSDATA section (where SAB lives) only when the document was
        # loaded with one; give it the section head AutoCAD writes.
        doc.acdsdata.section_info = Tags([DXFTag(0, "SECTION"), DXFTag(2, "ACDSDATA"), DXFTag(70, 2), DXFTag(71, 6)])
    for entity in doc.modelspace().query("3DSOLID REGION BODY SURFACE"):
        acis.export_dxf(entity, bodies[entity.dxf.handle])
    return _save(doc)


def r12(path: Path) -> bytes:
    """R12 through ezdxf's R12 exporter (LWPOLYLINE becomes POLYLINE, and so on)."""
    doc = readfile(path)
    stream = io.StringIO()
    r12export.write(doc, stream)
    return acad_encode(stream.getvalue(), "cp1252")


def codepage(path: Path, encoding: str) -> bytes:
    """Saved as R2000 in a Windows code page (``$DWGCODEPAGE``); characters outside the code
    page become ``\\U+XXXX`` escapes, as AutoCAD writes them."""
    doc = readfile(path)
    doc.dxfversion = "AC1015"
    doc.encoding = encoding
    return _save(doc)


TEXT_VARIANTS: dict[str, Callable[[bytes], bytes]] = {
    "lf": lf,
    "crlf": crlf,
    "cr": cr,
    "mixed": mixed,
    "crlf-ctrl-z": ctrl_z,
    "utf8-bom": bom,
    "renumbered": renumber_handles,
    "shuffled": lambda data: shuffle_entities(data, 7),
}
"""Byte-level variants: the same document in every line-end convention and end marker."""

WRITER_VARIANTS: dict[str, Callable[[Path], bytes]] = {
    "binary": binary,
    "r2018": r2018,
    "r12": r12,
    "r2000-cp1252": lambda path: codepage(path, "cp1252"),
    "r2000-cp1251": lambda path: codepage(path, "cp1251"),
    "r2000-cp932": lambda path: codepage(path, "cp932"),
}
"""Document-level variants written by ezdxf's writers."""

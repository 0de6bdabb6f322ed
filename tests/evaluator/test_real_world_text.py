"""Text and MTEXT as real programs store them (issue found by a review of real files, see
tests/evaluator/corpus/README.md): framed and multi-column MTEXT before R2018, ``\\U+XXXX``
escapes in binary DXF and split across MTEXT chunks, MTEXT's non-breaking space and codes
without their terminating semicolon.

The real files are the corpus's; the synthetic variants below stand in for files whose
licences keep them out of the corpus (a LibreCAD sheet that splits an escape across chunks,
QCAD drawings that write ``\\~``)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ezdxf
import pytest
from autocad_bench_evaluator.metadata import DrawingMetadata, TextEntity, read_drawing
from ezdxf.filemanagement import new
from ezdxf.tools.text import plain_mtext

CORPUS = Path(__file__).parent / "corpus" / "files"


def _texts(entities: Any) -> Iterator[TextEntity]:
    for entity in entities:
        if isinstance(entity, TextEntity):
            yield entity
        for nested in ("graphics", "exploded"):
            yield from _texts(getattr(entity, nested, ()) or ())


def _read(path: Path) -> DrawingMetadata:
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    return result


@pytest.mark.parametrize(("name", "frames", "columns"), [
    ("ezdxf-mtext-text-frame-r2013.dxf", 1, 0),
    ("ezdxf-mtext-framed-columns-r2013.dxf", 6, 4),
    ("ezdxf-mtext-columns-r2000.dxf", 0, 6),
])
def test_frames_and_further_columns_of_mtext_are_parts_of_it_not_lost_entities(
        name: str, frames: int, columns: int) -> None:
    result = _read(CORPUS / name)
    reading = result.reading
    assert reading is not None and reading.unreadable == {}
    doc = ezdxf.readfile(CORPUS / name)
    assert [e.source for e in result.model.entities] == [e.dxftype() for e in doc.modelspace()]
    notes = " ".join(reading.notes)
    assert (f"{frames} LWPOLYLINE: text frames of MTEXT" in notes) is bool(frames)
    assert (f"{columns} MTEXT: further columns" in notes) is bool(columns)


def test_a_multi_column_mtext_reads_with_the_text_of_every_column() -> None:
    result = _read(CORPUS / "ezdxf-mtext-columns-r2000.dxf")
    doc = ezdxf.readfile(CORPUS / "ezdxf-mtext-columns-r2000.dxf")
    mtexts = [e for e in doc.modelspace() if e.dxftype() == "MTEXT"]
    got = [t.content for t in result.model.entities if isinstance(t, TextEntity)]
    assert len(got) == len(mtexts) == 3
    for content, mtext in zip(got, mtexts, strict=True):
        columns = [mtext, *mtext._columns.linked_columns]
        assert len(columns) == 3
        # Each column's own text, in order; the further columns hold text of their own here.
        parts = [plain_mtext(c.text, split=False).strip() for c in columns]
        at = 0
        for part in parts:
            at = content.index(part, at) + len(part)
    assert any(plain_mtext(c.text, split=False).strip() for m in mtexts for c in m._columns.linked_columns)


def test_unicode_escapes_in_a_binary_file_autocad_wrote_are_resolved() -> None:
    result = _read(CORPUS / "acadsharp-sample-r2000-binary.dxf")
    texts = [t.content for t in _texts(result.model.entities)]
    assert not [t for t in texts if "\\U+" in t]
    assert texts.count("94°") == 2  # the angular dimensions' text
    assert result.reading is not None and result.reading.encoding == "cp1252"


def _mtext_file(tmp_path: Path, chunks: list[tuple[int, str]], *, binary: bool = False) -> Path:
    """An R2000 drawing holding one MTEXT whose text is stored in exactly these (group, value)
    chunks, as a writer that splits it at other places than ezdxf would leaves it."""
    doc = new("R2000")
    doc.modelspace().add_mtext("PLACEHOLDER", dxfattribs={"insert": (0, 0), "char_height": 2.5})
    path = tmp_path / "mtext.dxf"
    doc.saveas(path)
    text = path.read_text(encoding="cp1252")
    assert text.count("\n  1\nPLACEHOLDER\n") == 1
    stored = "".join(f"  {code}\n{value}\n" for code, value in chunks)
    path.write_text(text.replace("  1\nPLACEHOLDER\n", stored), encoding="cp1252")
    if binary:
        ezdxf.readfile(path).saveas(path, fmt="bin")
    return path


def test_an_escape_split_across_two_mtext_chunks_is_resolved(tmp_path: Path) -> None:
    # A LibreCAD sheet (dxflib) splits a Cyrillic word this way; here in ASCII.
    path = _mtext_file(tmp_path, [(3, "ab\\U"), (1, "+043Ccd")])
    (text,) = [t.content for t in _texts(_read(path).model.entities)]
    assert text == "abмcd"


@pytest.mark.parametrize("binary", [False, True], ids=["ascii", "binary"])
@pytest.mark.parametrize(("stored", "expected"), [
    ("\\~h11", " h11"),  # MTEXT's non-breaking space (QCAD: "Ø97.66\~h11")
    ("{\\C1red} text", "red text"),  # a colour code without its semicolon
    ("94\\U+00B0", "94°"),
])
def test_mtext_codes_do_not_reach_the_text_as_literal_backslashes(
        tmp_path: Path, stored: str, expected: str, binary: bool) -> None:
    path = _mtext_file(tmp_path, [(1, stored)], binary=binary)
    (text,) = [t.content for t in _texts(_read(path).model.entities)]
    assert text == expected


# --- what ezdxf's audit removed, and only that, may be missing ------------------------------


def test_an_insert_the_audit_deletes_is_counted_not_the_whole_real_drawing_refused(tmp_path: Path) -> None:
    # A real AC1003 file (read in recover mode) plus one INSERT of a block it never defines:
    # the audit deletes that INSERT, by name; the file's 22 entities are still read.
    text = (CORPUS / "ezdxf-ac1003-line.dxf").read_bytes().decode("cp1252")
    end = text.index("ENDSEC", text.index("ENTITIES"))
    at = text.rindex("\n", 0, text.rindex("\n", 0, end)) + 1  # the group-code line before ENDSEC
    path = tmp_path / "undefined-insert.dxf"
    path.write_bytes((text[:at] + "  0\nINSERT\n  8\n0\n  2\nNOSUCHBLOCK\n 10\n1.0\n 20\n1.0\n" + text[at:])
                     .encode("cp1252"))
    result = _read(path)
    assert result.reading is not None and result.reading.recovered
    assert len(result.model.entities) == 22 and result.reading.unreadable == {"INSERT": 1}


def _recovered_plate(tmp_path: Path) -> Path:
    """A LINE and a CIRCLE in a file the strict reader refuses (no ENDSEC after its header)
    whose audit removes something unrelated: an orphaned paper-space block record."""
    doc = new("R2000")
    doc.modelspace().add_line((0, 0), (10, 0))
    doc.modelspace().add_circle((5, 5), 2)
    stream = io.StringIO()
    doc.write(stream)
    text = stream.getvalue()
    start = text.index("  0\nBLOCK_RECORD\n", text.index("  2\nBLOCK_RECORD\n"))
    end = text.index("  0\nENDTAB\n", start)
    paper = next(r for r in text[start:end].split("  0\nBLOCK_RECORD\n")[1:] if "*Paper_Space" in r).split("\n")
    paper[1] = "FFFA"
    orphan = "  0\nBLOCK_RECORD\n" + "\n".join(paper).replace("*Paper_Space", "*Paper_Space7")
    text = text[:end] + orphan + text[end:]
    header_end = text.index("  0\nENDSEC\n")
    path = tmp_path / "recovered.dxf"
    path.write_text(text[:header_end] + text[header_end + len("  0\nENDSEC\n"):])
    return path


@pytest.mark.parametrize("named", [False, True], ids=["unrelated-removal", "named-removal"])
def test_only_what_the_audit_names_as_removed_may_be_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: bool) -> None:
    from autocad_bench_evaluator import dxf_reader

    real_recover = dxf_reader._recover

    def losing(*args: Any) -> Any:
        # ezdxf's recover mode loses the CIRCLE without a word, as it lost a SPLINE of a real
        # dxflib file whose audit only removed orphaned layout records.
        doc, removed = real_recover(*args)
        (circle,) = [e for e in doc.modelspace() if e.dxftype() == "CIRCLE"]
        handle = circle.dxf.handle
        doc.modelspace().delete_entity(circle)
        assert any(kind == "BLOCK_RECORD" for kind, _ in removed)
        return doc, removed | ({("CIRCLE", handle.upper())} if named else set())

    monkeypatch.setattr(dxf_reader, "_recover", losing)
    result = read_drawing(_recovered_plate(tmp_path))
    if named:
        assert isinstance(result, DrawingMetadata), result
        assert result.reading is not None and result.reading.unreadable == {"CIRCLE": 1}
    else:
        assert not isinstance(result, DrawingMetadata)
        assert result.failure_class == "entities-lost" and "1 CIRCLE" in result.detail

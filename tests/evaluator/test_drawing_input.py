"""Reading drawings as CAD programs write them: every gold drawing in every encoding scores as
the original; code pages and text escapes; entity loss is never silent; one bad entity is
skipped, not fatal; what the file holds never raises; limits hold while parsing."""

from __future__ import annotations

import io
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.evaluate import EvaluationState, evaluate
from autocad_bench_evaluator.gold_cache import GoldCacheEntry, load_entry
from autocad_bench_evaluator.metadata import (
    DrawingMetadata,
    InvalidDrawing,
    ReadLimits,
    TextEntity,
    read_drawing,
    texts,
)
from autocad_bench_evaluator.scoring import ScoreReport, score_drawing
from autocad_bench_evaluator.suite.registry import list_tasks
from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE
from ezdxf.filemanagement import new
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.evaluator import reencode

TASKS = list_tasks()
R12_CANNOT_HOLD = frozenset({"HATCH", "SOLID3D"})
"""Entity kinds DXF R12 has no entity for: AutoCAD and ezdxf's R12 exporter write a hatch as
an anonymous block of lines and drop 3D solids, so a gold holding one cannot score 1.0 in R12."""


@cache
def gold(task_id: str) -> GoldCacheEntry:
    return load_entry(SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, task_id)


def score_of(entry: GoldCacheEntry, path: Path) -> tuple[ScoreReport, DrawingMetadata]:
    result = read_drawing(path, entry.spec.schema_version)
    assert isinstance(result, DrawingMetadata), f"{path.name}: {result}"
    return score_drawing(entry.metadata, result, entry.spec, EVALUATOR_VERSION), result


def gold_kinds(entry: GoldCacheEntry) -> set[str]:
    return {e.kind for e in entry.metadata.model.entities}


def test_the_crlf_gold_is_not_read_as_an_empty_drawing(tmp_path: Path) -> None:
    """The reported bug: a CRLF gold read as an empty R12 document and scored 0 silently."""
    entry = gold("prim-rectangle")
    path = tmp_path / "crlf.dxf"
    path.write_bytes(reencode.crlf(entry.gold_dxf.read_bytes()))
    report, metadata = score_of(entry, path)
    assert report.score == 1.0
    assert metadata.source.dxf_version == entry.metadata.source.dxf_version == "AC1021"
    assert metadata.reading is not None and metadata.reading.line_endings == "crlf"
    assert metadata.reading.entities_declared == metadata.reading.entities_extracted == 1


@pytest.mark.parametrize("variant", sorted(reencode.TEXT_VARIANTS))
@pytest.mark.parametrize("task_id", TASKS)
def test_every_gold_scores_the_same_in_every_byte_encoding(tmp_path: Path, task_id: str, variant: str) -> None:
    entry = gold(task_id)
    path = tmp_path / f"{variant}.dxf"
    path.write_bytes(reencode.TEXT_VARIANTS[variant](entry.gold_dxf.read_bytes()))
    report, metadata = score_of(entry, path)
    original = score_drawing(entry.metadata, entry.metadata, entry.spec, EVALUATOR_VERSION)
    assert report.score == original.score == 1.0
    assert report.components == original.components
    assert metadata.model.entities == entry.metadata.model.entities or variant in ("shuffled", "renumbered")


@pytest.mark.parametrize("variant", sorted(reencode.WRITER_VARIANTS))
@pytest.mark.parametrize("task_id", TASKS)
def test_every_gold_scores_the_same_through_every_writer(tmp_path: Path, task_id: str, variant: str) -> None:
    entry = gold(task_id)
    path = tmp_path / f"{variant}.dxf"
    path.write_bytes(reencode.WRITER_VARIANTS[variant](entry.gold_dxf))
    report, metadata = score_of(entry, path)
    if variant == "r12" and gold_kinds(entry) & R12_CANNOT_HOLD:
        # The format cannot hold the entity; everything else still reads.
        assert {e.kind for e in metadata.model.entities} >= gold_kinds(entry) - R12_CANNOT_HOLD
        assert report.score < 1.0
        return
    assert report.score == 1.0, report.components
    if variant == "binary":
        assert metadata.reading is not None and metadata.reading.line_endings == "binary"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    task_id=st.sampled_from(TASKS),
    writer=st.sampled_from(["original", "binary", "r2018", "r2000-cp1252", "r2000-cp1251", "r2000-cp932"]),
    renumber=st.booleans(),
    shuffle=st.one_of(st.none(), st.integers(0, 2**16)),
    ending=st.sampled_from(["lf", "crlf", "cr", "mixed"]),
    ctrl_z=st.booleans(),
    bom=st.booleans(),
)
def test_reencoding_a_gold_never_changes_its_score(
    tmp_path: Path,
    task_id: str,
    writer: str,
    renumber: bool,
    shuffle: int | None,
    ending: str,
    ctrl_z: bool,
    bom: bool,
) -> None:
    entry = gold(task_id)
    data = entry.gold_dxf.read_bytes() if writer == "original" else reencode.WRITER_VARIANTS[writer](entry.gold_dxf)
    if writer != "binary":
        if renumber:
            data = reencode.renumber_handles(data)
        if shuffle is not None:
            data = reencode.shuffle_entities(data, shuffle)
        data = reencode.TEXT_VARIANTS[ending](data)
        if ctrl_z:
            data += b"\x1a"
        if bom:
            data = reencode.bom(data)
    path = tmp_path / "variant.dxf"
    path.write_bytes(data)
    report, _metadata = score_of(entry, path)
    assert report.score == 1.0, (task_id, writer, report.components)


# --- code pages and text escapes ---------------------------------------------------------

WORDS = ("Ø20 ±0.1°", "Привет", "中文", "日本語")


def _text_drawing(version: str, encoding: str | None, words: tuple[str, ...]) -> bytes:
    doc = new(version)
    if encoding:
        doc.encoding = encoding
    doc.layers.add("Слой-1" if encoding in (None, "utf-8", "cp1251") else "Layer-1")
    msp = doc.modelspace()
    for i, word in enumerate(words):
        msp.add_text(word, dxfattribs={"insert": (0, 10 * i), "height": 2.5, "layer": "0"})
    if version != "R12":
        msp.add_mtext("\\P".join(words), dxfattribs={"insert": (100, 0)})
    stream = io.StringIO()
    doc.write(stream)
    return reencode.acad_encode(stream.getvalue(), doc.output_encoding)


@pytest.mark.parametrize(
    ("version", "encoding", "codepage"),
    [
        ("R2000", "cp1252", "ANSI_1252"),
        ("R2000", "cp1251", "ANSI_1251"),
        ("R2000", "gbk", "ANSI_936"),
        ("R2000", "cp932", "ANSI_932"),
        ("R12", "cp1252", "ANSI_1252"),
        ("R2018", None, "ANSI_1252"),
    ],
)
@pytest.mark.parametrize("endings", ["lf", "crlf"])
def test_text_in_every_code_page_reads_as_written(
    tmp_path: Path, version: str, encoding: str | None, codepage: str, endings: str
) -> None:
    data = _text_drawing(version, encoding, WORDS)
    assert f"$DWGCODEPAGE\n  3\n{codepage}".encode() in data
    if encoding in ("cp1252",):
        assert b"\\U+" in data  # characters outside the code page are escaped, as AutoCAD does
    path = tmp_path / "text.dxf"
    path.write_bytes(reencode.TEXT_VARIANTS[endings](data))
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    contents = [t.content for t in texts(result) if t.source == "TEXT"]
    assert contents == list(WORDS)
    if version != "R12":
        mtext = next(t for t in texts(result) if t.source == "MTEXT")
        assert mtext.content == "\n".join(WORDS)
    assert result.reading is not None and result.reading.decoding_errors == 0
    if encoding == "cp1251":
        assert "Слой-1" in {layer.name for layer in result.layers}


def test_multibyte_escapes_and_undecodable_bytes(tmp_path: Path) -> None:
    data = _text_drawing("R2000", "cp1252", ("PLACEHOLDER-A", "PLACEHOLDER-B"))
    # \M+5D6D0 is "中" in GB 2312, as old Chinese AutoCAD releases wrote it; 0x81 is no
    # character in cp1252 and must be counted, not crash the read.
    data = data.replace(b"PLACEHOLDER-A", b"\\M+5D6D0").replace(b"PLACEHOLDER-B", b"bad\x81byte")
    path = tmp_path / "mif.dxf"
    path.write_bytes(data)
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    contents = [t.content for t in texts(result) if t.source == "TEXT"]
    assert contents == ["中", "bad\ufffdbyte"]
    assert result.reading is not None and result.reading.decoding_errors == 2  # in the TEXT and the MTEXT


def test_an_escape_for_a_control_character_cannot_break_the_line_structure(tmp_path: Path) -> None:
    data = _text_drawing("R2000", "cp1252", ("A\\U+000AB",))
    path = tmp_path / "ctrl.dxf"
    path.write_bytes(data)
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata)
    assert [t.content for t in texts(result) if t.source == "TEXT"] == ["A\\U+000AB"]


# --- nothing lost silently, nothing fatal that need not be -----------------------------


def _plate_text() -> str:
    doc = new("R2018")
    msp = doc.modelspace()
    msp.add_line((0, 0), (10, 0))
    msp.add_circle((5, 5), 2)
    stream = io.StringIO()
    doc.write(stream)
    return stream.getvalue()


def _insert_before_entities_end(text: str, record: str) -> str:
    start = text.index("ENTITIES\n")
    end = text.index("  0\nENDSEC\n", start)
    return text[:end] + record + text[end:]


def test_entities_the_parser_drops_make_the_drawing_invalid_not_empty(tmp_path: Path) -> None:
    text = _plate_text()
    # A stray space after the section name: ezdxf skips the whole section without a word.
    mangled = text.replace("  2\nENTITIES\n", "  2\nENTITIES \n")
    path = tmp_path / "lost.dxf"
    path.write_text(mangled)
    result = read_drawing(path)
    assert isinstance(result, InvalidDrawing), result
    assert result.failure_class == "entities-lost"
    assert "declares 2 entities" in result.reason and "loaded 0" in result.reason
    assert "1 CIRCLE, 1 LINE" in result.detail


def test_an_unreadable_entity_is_skipped_and_counted(tmp_path: Path) -> None:
    section_object = "  0\nSECTIONOBJECT\n  5\nFFF1\n330\n1F\n100\nAcDbEntity\n  8\n0\n100\nAcDbSection\n 90\n1\n"
    text = _insert_before_entities_end(_plate_text(), section_object).replace("\n 40\n2.0\n", "\n 40\n1e999\n")
    path = tmp_path / "skip.dxf"
    path.write_text(text)
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    assert [e.kind for e in result.model.entities] == ["LINE"]
    assert result.reading is not None
    assert result.reading.unreadable == {"CIRCLE": 1, "SECTIONOBJECT": 1}
    assert result.reading.entities_declared == 3 and result.reading.entities_extracted == 1
    assert any("SECTIONOBJECT #FFF1" in note for note in result.reading.notes)
    assert any("non-finite" in note for note in result.reading.notes)


def test_an_exception_inside_the_parser_is_an_invalid_drawing_not_a_failed_evaluation(tmp_path: Path) -> None:
    # No handle, but an extension-dictionary reference: ezdxf raises AssertionError on load.
    line = (
        "  0\nLINE\n102\n{ACAD_XDICTIONARY\n360\nABCD\n102\n}\n330\n1F\n100\nAcDbEntity\n  8\n0\n"
        "100\nAcDbLine\n 10\n0\n 20\n0\n 30\n0\n 11\n1\n 21\n1\n 31\n0\n"
    )
    path = tmp_path / "attempt.dxf"
    path.write_text(_insert_before_entities_end(_plate_text(), line))
    result = read_drawing(path)
    assert isinstance(result, InvalidDrawing), result
    assert result.failure_class == "malformed" and "AssertionError" in result.detail
    outcome = evaluate(path, "prim-rectangle", SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "evaluation")
    assert outcome.state is EvaluationState.INVALID and outcome.exit_code == 0
    assert outcome.report is not None and outcome.report.invalid_class == "malformed"


def test_a_crlf_attempt_is_evaluated_done_with_full_score(tmp_path: Path) -> None:
    entry = gold("part-plate-four-holes")
    path = tmp_path / "attempt.dxf"
    path.write_bytes(reencode.ctrl_z(entry.gold_dxf.read_bytes()))
    outcome = evaluate(path, entry.task_id, SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "evaluation")
    assert outcome.state is EvaluationState.DONE
    assert outcome.report is not None and outcome.report.score == 1.0


# --- limits, while parsing -------------------------------------------------------------


LOADED_MACHINE_S = 120.0
"""A read's time limit in tests about other limits (the default 10 s is a wall-clock bound)."""


def _points(n: int) -> bytes:
    body = "".join(f"  0\nPOINT\n  8\n0\n 10\n{i}.0\n 20\n0.0\n 30\n0.0\n" for i in range(n))
    return f"  0\nSECTION\n  2\nENTITIES\n{body}  0\nENDSEC\n  0\nEOF\n".encode()


def test_the_tag_limit_stops_the_parse_early(tmp_path: Path) -> None:
    path = tmp_path / "points.dxf"
    path.write_bytes(_points(20_000))
    # Generous time: these reads are about counts, and a loaded CI machine must not turn them
    # into time-limit verdicts.
    readable = read_drawing(path, limits=ReadLimits(max_seconds=LOADED_MACHINE_S))
    assert isinstance(readable, DrawingMetadata) and len(readable.model.entities) == 20_000
    result = read_drawing(path, limits=ReadLimits(max_tags=5_000, max_seconds=LOADED_MACHINE_S))
    assert isinstance(result, InvalidDrawing) and result.failure_class == "tag-limit"
    records = read_drawing(path, limits=ReadLimits(max_entities=1_000, max_seconds=LOADED_MACHINE_S))
    assert isinstance(records, InvalidDrawing) and records.failure_class == "entity-limit"


def test_tags_are_counted_while_ezdxf_consumes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is enforced inside the parse: ezdxf never receives more tags than allowed."""
    from ezdxf.lldxf import tagger

    seen = 0
    original = tagger.ascii_tags_loader

    def counting(stream: object, skip_comments: bool = True) -> object:
        nonlocal seen
        for tag in original(stream, skip_comments):  # type: ignore[arg-type]
            seen += 1
            yield tag

    monkeypatch.setattr(tagger, "ascii_tags_loader", counting)
    path = tmp_path / "points.dxf"
    path.write_bytes(_points(20_000))
    result = read_drawing(path, limits=ReadLimits(max_tags=3_000))
    assert isinstance(result, InvalidDrawing) and result.failure_class == "tag-limit"
    assert seen <= 3_001 * 2  # the strict and the recover attempt each stop at the limit


def _nested_blocks(depth: int, fan_out: int) -> Path:
    doc = new("R2010")
    doc.blocks.new("B0").add_line((0, 0), (1, 0))
    for level in range(1, depth + 1):
        block = doc.blocks.new(f"B{level}")
        for i in range(fan_out):
            block.add_blockref(f"B{level - 1}", (i * 2, 0))
    doc.modelspace().add_blockref(f"B{depth}", (0, 0))
    return doc  # type: ignore[return-value]


def test_nesting_and_explosion_are_bounded(tmp_path: Path) -> None:
    deep = tmp_path / "deep.dxf"
    _nested_blocks(12, 1).saveas(deep)  # type: ignore[attr-defined]
    result = read_drawing(deep)
    assert isinstance(result, InvalidDrawing) and result.failure_class == "nesting-limit"
    wide = tmp_path / "wide.dxf"
    _nested_blocks(6, 10).saveas(wide)  # type: ignore[attr-defined]  # 10^6 exploded lines in a tiny file
    result = read_drawing(wide, limits=ReadLimits(max_seconds=LOADED_MACHINE_S))
    assert isinstance(result, InvalidDrawing) and result.failure_class == "entity-limit"
    shallow = tmp_path / "shallow.dxf"
    _nested_blocks(3, 2).saveas(shallow)  # type: ignore[attr-defined]
    ok = read_drawing(shallow)
    assert isinstance(ok, DrawingMetadata) and len(ok.model.entities[0].exploded) == 8  # type: ignore[union-attr]


def test_a_block_that_contains_itself_is_rejected(tmp_path: Path) -> None:
    doc = new("R2010")
    block = doc.blocks.new("LOOP")
    block.add_line((0, 0), (1, 0))
    block.add_blockref("LOOP", (1, 1))
    doc.modelspace().add_blockref("LOOP", (0, 0))
    path = tmp_path / "loop.dxf"
    doc.saveas(path)
    result = read_drawing(path)
    assert isinstance(result, InvalidDrawing) and result.failure_class == "nesting-limit"


def test_text_entity_model_keeps_the_source() -> None:
    assert TextEntity(content="x", insert=(0, 0)).source == "TEXT"


def test_entities_too_large_for_the_per_entity_bounds_are_skipped_before_ezdxf_works_on_them(tmp_path: Path) -> None:
    limits = ReadLimits()
    doc = new("R2010")
    msp = doc.modelspace()
    msp.add_line((0, 0), (1, 0))
    msp.add_mtext("\\C1;x" * (limits.max_text_chars // 4 + 1))  # quadratic in ezdxf's plain text
    msp.add_text("y" * (limits.max_text_chars + 1))
    msp.add_spline(fit_points=[(i, (i % 7) * 0.5) for i in range(limits.max_spline_points + 1)])
    msp.add_spline([(i, i % 3) for i in range(limits.max_spline_points + 1)])
    hatch = msp.add_hatch()
    hatch.paths.add_edge_path().add_spline(
        fit_points=[(i, (i % 5) * 0.1) for i in range(limits.max_spline_points + 1)] + [(0, 0)]
    )
    split = msp.add_hatch()  # two edges under the bound each, over it together
    edges = split.paths.add_edge_path()
    half = limits.max_spline_points // 2 + 1
    edges.add_spline(fit_points=[(i, (i % 5) * 0.1) for i in range(half)])
    edges.add_spline(fit_points=[(half - i, -1 - (i % 5) * 0.1) for i in range(half)])
    msp.add_text("z" * limits.max_text_chars)  # exactly at the bound: read
    path = tmp_path / "large.dxf"
    doc.saveas(path)
    started = time.monotonic()
    result = read_drawing(path)
    elapsed = time.monotonic() - started
    assert isinstance(result, DrawingMetadata), result
    assert [e.kind for e in result.model.entities] == ["LINE", "TEXT"]
    assert result.reading is not None
    assert result.reading.unreadable == {"HATCH": 2, "MTEXT": 1, "SPLINE": 2, "TEXT": 1}
    assert any("more than 1000 points" in note for note in result.reading.notes)
    assert elapsed < limits.max_seconds


# --- the isolated read: hard memory and time limits in a child process ------------------


def test_the_isolated_read_gives_the_same_result_as_the_in_process_read(tmp_path: Path) -> None:
    entry = gold("anno-block-bolts")
    path = tmp_path / "crlf.dxf"
    path.write_bytes(reencode.ctrl_z(entry.gold_dxf.read_bytes()))
    assert read_drawing(path, isolated=True) == read_drawing(path)


def test_a_drawing_over_the_memory_cap_is_refused_with_its_class(tmp_path: Path) -> None:
    path = tmp_path / "points.dxf"
    path.write_bytes(_points(40_000))
    small = ReadLimits(max_memory_bytes=16 * 1024 * 1024)
    result = read_drawing(path, limits=small, isolated=True)
    assert isinstance(result, InvalidDrawing), result
    assert result.failure_class == "memory-limit" and "16 MiB" in result.reason
    outcome = evaluate(path, "prim-rectangle", SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "ev", limits=small)
    assert outcome.state is EvaluationState.INVALID
    assert outcome.report is not None and outcome.report.invalid_class == "memory-limit"


def test_a_reader_past_its_wall_clock_bound_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autocad_bench_evaluator import isolated_read

    monkeypatch.setattr(isolated_read, "STARTUP_ALLOWANCE_S", 0.0)
    path = tmp_path / "points.dxf"
    path.write_bytes(_points(2_000))
    started = time.monotonic()
    result = read_drawing(path, limits=ReadLimits(max_seconds=0.05), isolated=True)
    assert time.monotonic() - started < 5.0
    assert isinstance(result, InvalidDrawing) and result.failure_class == "time-limit"
    assert "stopped" in result.reason


def test_a_child_that_fails_for_its_own_reasons_is_an_evaluator_fault(tmp_path: Path) -> None:
    from autocad_bench_evaluator.isolated_read import IsolatedReadError, read_dxf_isolated

    with pytest.raises(IsolatedReadError, match="FileNotFoundError"):
        read_dxf_isolated(tmp_path / "vanished.dxf", 3, ReadLimits())


# --- regressions from the adversarial review ---------------------------------------------

R12_HEAD = "0\nSECTION\n2\nHEADER\n9\n$ACADVER\n1\nAC1009\n0\nENDSEC\n0\nSECTION\n2\nENTITIES\n"
R12_LINE = "0\nLINE\n8\n0\n10\n0\n20\n0\n11\n1\n21\n1\n"
R12_TAIL = "0\nENDSEC\n0\nEOF\n"


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize("version", ["R12", "R2000"])
def test_entities_the_recover_audit_removes_are_counted_not_fatal(tmp_path: Path, version: str) -> None:
    doc = new(version)
    msp = doc.modelspace()
    msp.add_line((0, 0), (1, 0))
    msp.add_line((0, 1), (1, 1))
    stream = io.StringIO()
    doc.write(stream)
    text = _insert_before_entities_end(stream.getvalue(), "  0\nFOOBAR\n  8\n0\n 10\n0\n 20\n0\n")
    last = text.rindex("  0\nENDSEC\n")
    broken = text[:last] + text[last + len("  0\nENDSEC\n") :]  # the strict read fails: recover runs
    path = _write(tmp_path, "audit.dxf", broken)
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    assert [e.kind for e in result.model.entities] == ["LINE", "LINE"]
    assert result.reading is not None and result.reading.recovered
    assert result.reading.unreadable == {"FOOBAR": 1}
    outcome = evaluate(path, "prim-rectangle", SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "ev")
    assert outcome.state is EvaluationState.DONE, outcome.error


@pytest.mark.parametrize(
    ("codepage", "codec", "word"),
    [
        ("DOS866", "cp866", "Привет"),
        ("DOS850", "cp850", "Ø25 ±0.1"),
        ("MACINTOSH", "mac_roman", "Ø25 ±0.1"),
        ("ANSI_1251", "cp1251", "Привет é"),  # é is a \U+00E9 escape in a cp1251 file
    ],
)
@pytest.mark.parametrize("recover", [False, True])
def test_dos_and_mac_code_pages_decode_in_both_readers(
    tmp_path: Path, codepage: str, codec: str, word: str, recover: bool
) -> None:
    doc = new("R2000")
    doc.modelspace().add_text("PLACEHOLDER")
    stream = io.StringIO()
    doc.write(stream)
    text = stream.getvalue().replace("ANSI_1252", codepage)
    if recover:
        last = text.rindex("  0\nENDSEC\n")
        text = text[:last] + text[last + len("  0\nENDSEC\n") :]
    path = _write(tmp_path, "cp.dxf", text.encode("ascii").replace(b"PLACEHOLDER", reencode.acad_encode(word, codec)))
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    assert [t.content for t in texts(result)] == [word]
    assert result.reading is not None and result.reading.recovered is recover


def test_utf8_without_a_header_or_with_a_byte_order_mark(tmp_path: Path) -> None:
    headerless = "0\nSECTION\n2\nENTITIES\n0\nTEXT\n8\n0\n10\n0\n20\n0\n40\n2.5\n1\nØ25 \u2013 Ä\n0\nENDSEC\n0\nEOF\n"
    result = read_drawing(_write(tmp_path, "light.dxf", headerless))
    assert isinstance(result, DrawingMetadata) and [t.content for t in texts(result)] == ["Ø25 \u2013 Ä"]
    doc = new("R2000")
    doc.modelspace().add_text("Øé")
    stream = io.StringIO()
    doc.write(stream)
    bom = b"\xef\xbb\xbf" + reencode.crlf(stream.getvalue().encode("utf-8"))
    result = read_drawing(_write(tmp_path, "bom.dxf", bom))
    assert isinstance(result, DrawingMetadata) and [t.content for t in texts(result)] == ["Øé"]


def test_user_blocks_named_like_r12_layout_blocks_and_stray_sub_records(tmp_path: Path) -> None:
    doc = new("R2000")
    block = doc.blocks.new("$MODEL_SPACE")  # a legal user block name after R12
    block.add_line((0, 0), (1, 1))
    block.add_circle((0, 0), 1)
    doc.modelspace().add_blockref("$MODEL_SPACE", (5, 5))
    path = tmp_path / "dollar.dxf"
    doc.saveas(path)
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    assert [e.kind for e in result.model.entities] == ["INSERT"]
    attrib = "0\nATTRIB\n8\n0\n10\n0\n20\n0\n40\n1\n1\nVALUE\n2\nTAG\n70\n0\n"
    for name, body in {
        "stray-attrib": R12_LINE + attrib,
        "stray-seqend": R12_LINE + "0\nSEQEND\n8\n0\n" + R12_LINE,
        "stray-vertex": R12_LINE + "0\nVERTEX\n8\n0\n10\n5\n20\n5\n" + R12_LINE,
    }.items():
        result = read_drawing(_write(tmp_path, f"{name}.dxf", R12_HEAD + body + R12_TAIL))
        assert isinstance(result, DrawingMetadata), (name, result)
        assert "LINE" in [e.kind for e in result.model.entities]


def test_a_paper_space_ezdxf_cannot_place_is_noted_not_fatal(tmp_path: Path) -> None:
    doc = new("R2000")
    doc.modelspace().add_line((0, 0), (1, 0))
    doc.layouts.new("SECOND").add_circle((0, 0), 2)  # held in a *Paper_Space0 block
    stream = io.StringIO()
    doc.write(stream)
    text = stream.getvalue()
    objects = text.index("  2\nOBJECTS\n")
    start = text.rindex("  0\nSECTION\n", 0, objects)
    end = text.index("  0\nENDSEC\n", objects) + len("  0\nENDSEC\n")
    result = read_drawing(_write(tmp_path, "no-objects.dxf", text[:start] + text[end:]))
    assert isinstance(result, DrawingMetadata), result
    assert [e.kind for e in result.model.entities] == ["LINE"]
    # Without its LAYOUT object ezdxf cannot place the second layout's circle: noted, not fatal.
    assert result.reading is not None and result.reading.unreadable == {"CIRCLE": 1}
    assert any("paper-space" in note for note in result.reading.notes)


def test_huge_curves_flatten_with_a_tolerance_relative_to_their_size(tmp_path: Path) -> None:
    doc = new("R2010")
    msp = doc.modelspace()
    msp.add_spline([(0, 0), (1e10, 1e10), (2e10, 0), (3e10, 1e10)])
    hatch = msp.add_hatch()
    edges = hatch.paths.add_edge_path()
    edges.add_arc((0, 0), 1e12, 0, 180)
    edges.add_line((-1e12, 0), (1e12, 0))
    path = tmp_path / "huge.dxf"
    doc.saveas(path)
    started = time.monotonic()
    result = read_drawing(path)
    assert time.monotonic() - started < ReadLimits().max_seconds
    assert isinstance(result, DrawingMetadata), result
    spline = next(e for e in result.model.entities if e.kind == "SPLINE")
    assert 8 <= len(spline.points) <= ReadLimits().max_curve_points  # type: ignore[union-attr]


def test_the_isolated_child_does_not_import_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ezdxf.py").write_text("raise ImportError('shadowed')\n")
    entry = gold("prim-rectangle")
    monkeypatch.chdir(tmp_path)
    result = read_drawing(entry.gold_dxf, isolated=True)
    assert isinstance(result, DrawingMetadata), result


# --- declared drawing units ------------------------------------------------------------


@pytest.mark.parametrize("task_id", TASKS)
def test_a_gold_declared_in_other_units_fails_every_task(task_id: str) -> None:
    """The attack of issue 15: the gold itself, declared in inches or metres, passed 27 of 27."""
    entry = gold(task_id)
    assert entry.metadata.source.units == 4
    for units, name in ((1, "inches"), (6, "metres")):
        candidate = entry.metadata.model_copy(
            update={"source": entry.metadata.source.model_copy(update={"units": units})}
        )
        report = score_drawing(entry.metadata, candidate, entry.spec, EVALUATOR_VERSION)
        assert report.score == 0.0 and not report.passed
        assert name in report.reason and "millimetres" in report.reason
    for units in (None, 0, 4):  # undeclared, unitless or the same: scored as usual
        candidate = entry.metadata.model_copy(
            update={"source": entry.metadata.source.model_copy(update={"units": units})}
        )
        assert score_drawing(entry.metadata, candidate, entry.spec, EVALUATOR_VERSION).score == 1.0


def test_units_are_read_from_the_file_and_refused_end_to_end(tmp_path: Path) -> None:
    entry = gold("prim-rectangle")
    text = entry.gold_dxf.read_bytes()
    assert b"$INSUNITS\n 70\n4\n" in text
    path = _write(tmp_path, "inches.dxf", reencode.crlf(text.replace(b"$INSUNITS\n 70\n4\n", b"$INSUNITS\n 70\n1\n")))
    outcome = evaluate(path, entry.task_id, SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "ev")
    assert outcome.state is EvaluationState.DONE
    assert outcome.report is not None and outcome.report.score == 0.0 and "inches" in outcome.report.reason


# --- what counts as drawn: Defpoints and hidden layers ----------------------------------


def _with(entry: GoldCacheEntry, extra: list[Any], layers: tuple[Any, ...] | None = None) -> DrawingMetadata:
    model = entry.metadata.model.model_copy(update={"entities": (*entry.metadata.model.entities, *extra)})
    update: dict[str, Any] = {"model": model}
    if layers is not None:
        update["layers"] = layers
    return entry.metadata.model_copy(update=update)


@pytest.mark.parametrize("task_id", [t for t in TASKS if gold(t).spec.schema_version == 3])
def test_junk_on_defpoints_counts_and_hidden_layers_do_not(task_id: str) -> None:
    """Attacks of issue 15: gold plus 120 junk entities on Defpoints passed every task."""
    from autocad_bench_evaluator.metadata import CircleEntity, LayerInfo, LineEntity, PointEntity

    entry = gold(task_id)  # 2D tasks: the 3D ones score the solid's extents
    junk = [LineEntity(start=(i, -50.0), end=(i + 3.0, -80.0), layer="Defpoints") for i in range(60)] + [
        CircleEntity(center=(i * 4.0, 300.0), radius=1.0 + i % 7, layer="Defpoints") for i in range(60)
    ]
    junked = score_drawing(entry.metadata, _with(entry, junk), entry.spec, EVALUATOR_VERSION)
    assert not junked.passed and junked.score < entry.spec.pass_threshold - 0.05
    points = [PointEntity(location=(i, i), layer="Defpoints") for i in range(20)]
    assert score_drawing(entry.metadata, _with(entry, points), entry.spec, EVALUATOR_VERSION).score == 1.0
    # Everything moved to a frozen layer: nothing shows on paper, nothing is drawn.
    frozen = entry.metadata.model_copy(
        update={
            "model": entry.metadata.model.model_copy(
                update={
                    "entities": tuple(e.model_copy(update={"layer": "HIDDEN"}) for e in entry.metadata.model.entities)
                }
            ),
            "layers": (*entry.metadata.layers, LayerInfo(name="HIDDEN", frozen=True)),
        }
    )
    report = score_drawing(entry.metadata, frozen, entry.spec, EVALUATOR_VERSION)
    assert not report.passed and report.score < 0.5

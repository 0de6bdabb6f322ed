"""The reader against DXF files real programs wrote (tests/evaluator/corpus/, see its README):
each reads with the model-space entity count ezdxf's own reader finds, in every line-end
convention, and no mutation of one raises, fails an evaluation or outlasts the time bound."""

from __future__ import annotations

import hashlib
import json
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.evaluate import EvaluationState, evaluate
from autocad_bench_evaluator.metadata import DrawingMetadata, InvalidDrawing, ReadLimits, read_drawing
from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE
from ezdxf import recover
from ezdxf.filemanagement import readfile
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.evaluator import reencode

CORPUS = Path(__file__).parent / "corpus"
ENTRIES: list[dict[str, Any]] = json.loads((CORPUS / "corpus.json").read_text())
NAMES = [entry["file"] for entry in ENTRIES]
TEXT_FILES = [entry["file"] for entry in ENTRIES if not entry["binary"]]
PERMISSIVE = {"MIT", "BSD-3-Clause", "BSD-2-Clause", "Apache-2.0", "ISC", "Zlib", "CC0-1.0", "MPL-2.0"}

EXPECTED_REJECTIONS: dict[str, str] = {}
"""Files the reader is expected to reject, with the failure class; empty: every one reads."""


@cache
def ezdxf_modelspace_count(name: str) -> int:
    """What ezdxf's own reader makes of the file: strict, else its recover mode."""
    path = CORPUS / "files" / name
    try:
        doc = readfile(path)
    except Exception:
        doc, _auditor = recover.readfile(path)
    # Iterated, not len(): a layout's length still counts what the load destroyed (an MTEXT's
    # text frame, linked columns taken out of the layout).
    return sum(1 for _ in doc.modelspace())


def test_the_corpus_is_what_its_manifest_says() -> None:
    on_disk = sorted(p.name for p in (CORPUS / "files").iterdir())
    assert on_disk == sorted(NAMES)
    licences = {p.name for p in (CORPUS / "LICENSES").iterdir()}
    for entry in ENTRIES:
        data = (CORPUS / "files" / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]
        assert len(data) == entry["size"]
        assert entry["licence"] in PERMISSIVE, entry["file"]
        assert entry["source_repo"] and len(entry["commit"]) == 40
        owner, repo = (part.lower() for part in entry["source_repo"].split("/"))
        assert any(name.lower().startswith((repo, f"{owner}-{repo}")) for name in licences), entry["source_repo"]


def test_the_corpus_covers_what_the_reader_must_handle() -> None:
    endings = {entry["line_ending"] for entry in ENTRIES}
    versions = {entry["dxf_version"] for entry in ENTRIES}
    assert {"crlf", "lf", "binary"} <= endings
    assert {"AC1009", "AC1015", "AC1018", "AC1021", "AC1024", "AC1027", "AC1032"} <= versions
    crlf_with_dimensions = [
        e
        for e in ENTRIES
        if e["line_ending"] == "crlf" and e["entity_types"].get("DIMENSION") and e["dxf_version"] >= "AC1015"
    ]
    assert len(crlf_with_dimensions) >= 3


@pytest.mark.parametrize("name", NAMES)
def test_each_real_file_reads_like_ezdxf_reads_it(name: str) -> None:
    entry = next(e for e in ENTRIES if e["file"] == name)
    result = read_drawing(CORPUS / "files" / name)
    if name in EXPECTED_REJECTIONS:
        assert isinstance(result, InvalidDrawing) and result.failure_class == EXPECTED_REJECTIONS[name]
        return
    assert isinstance(result, DrawingMetadata), result
    assert len(result.model.entities) == ezdxf_modelspace_count(name)
    reading = result.reading
    assert reading is not None
    assert reading.line_endings == entry["line_ending"]
    assert reading.entities_declared >= sum(entry["entity_types"].values())
    assert reading.entities_extracted + sum(reading.unreadable.get(k, 0) for k in entry["entity_types"]) >= len(
        result.model.entities
    )
    assert reading.decoding_errors == 0


@pytest.mark.parametrize("variant", ["lf", "crlf", "cr", "crlf-ctrl-z"])
@pytest.mark.parametrize("name", TEXT_FILES)
def test_real_files_read_the_same_in_every_line_ending(tmp_path: Path, name: str, variant: str) -> None:
    original = read_drawing(CORPUS / "files" / name)
    assert isinstance(original, DrawingMetadata)
    path = tmp_path / name
    path.write_bytes(reencode.TEXT_VARIANTS[variant]((CORPUS / "files" / name).read_bytes()))
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata), result
    ignored = {"source", "reading"}
    assert result.model_dump(exclude=ignored) == original.model_dump(exclude=ignored)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Found by this property in CI: a duplicated run of bytes left a string in a binary DXF that
# is not UTF-8, and the reader kept it as lone surrogates that no JSON encoder accepts.
@example(name="netdxf-sample-r2018-binary.dxf", edits=[(0.1796875, "duplicate")])
@given(
    name=st.sampled_from(NAMES),
    edits=st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(["byte", "delete", "cut-line", "duplicate", "cr", "nul", "huge"])),
        min_size=1,
        max_size=5,
    ),
)
def test_mutated_real_files_never_raise_and_stay_within_the_time_bound(
    tmp_path: Path, name: str, edits: list[tuple[float, str]]
) -> None:
    data = bytearray((CORPUS / "files" / name).read_bytes())
    for where, op in edits:
        if not data:
            break  # an edit emptied the file: the empty file is the case (nothing left to edit)
        pos = int(where * (len(data) - 1))
        if op == "byte":
            data[pos] = (data[pos] + 89) % 256
        elif op == "delete":
            del data[pos : pos + 97]
        elif op == "cut-line":
            end = data.find(b"\n", pos)
            del data[pos : end if end > 0 else pos + 1]
        elif op == "duplicate":
            data[pos:pos] = data[pos : pos + 400]
        elif op == "cr":
            data[pos:pos] = b"\r"
        elif op == "nul":
            data[pos:pos] = b"\x00"
        else:
            data[pos:pos] = b"1e999"
    path = tmp_path / "mutated.dxf"
    path.write_bytes(bytes(data))
    started = time.monotonic()
    result = read_drawing(path)
    assert time.monotonic() - started < ReadLimits().max_seconds
    assert isinstance(result, (DrawingMetadata, InvalidDrawing))
    if isinstance(result, InvalidDrawing):
        assert result.failure_class and result.reason
    assert result.to_json_bytes() == read_drawing(path).to_json_bytes()


@pytest.mark.parametrize(
    "name", ["bjnortier-floorplan-r2004.dxf", "ezdxf-uncommon-r2018-crlf.dxf", "trimesh-ae-r13-binary.dxf"]
)
def test_real_files_as_attempts_are_evaluated_not_failed(tmp_path: Path, name: str) -> None:
    outcome = evaluate(
        CORPUS / "files" / name, "prim-rectangle", SHIPPED_GOLD_CACHE, EVALUATOR_VERSION, tmp_path / "ev"
    )
    assert outcome.state is EvaluationState.DONE, outcome.error
    assert outcome.report is not None and 0.0 <= outcome.report.score < 1.0

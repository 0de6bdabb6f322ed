"""Drawing metadata: DXF extraction, invalid drawings, DWG readers."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import pytest
from autocad_bench_evaluator.metadata import (
    AdapterMetadataReader,
    CannotReadDrawing,
    ConverterDwgReader,
    DimensionEntity,
    DrawingMetadata,
    DwgAdapterExport,
    InsertEntity,
    InvalidDrawing,
    PolylineEntity,
    ReadLimits,
    TextEntity,
    adapter_metadata_path,
    default_dwg_reader,
    read_drawing,
)
from ezdxf.acis.dxf import export_dxf
from ezdxf.acis.mesh import body_from_mesh
from ezdxf.render.forms import cube
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.evaluator.support import write_dxf

DWG_BYTES = b"AC1032" + bytes(range(256)) * 8


def test_dxf_entities_layers_blocks_text_dimensions_and_extents(tmp_path: Path) -> None:
    def extra(msp: object) -> None:
        doc = msp.doc  # type: ignore[attr-defined]
        block = doc.blocks.new("BOLT")
        block.add_circle((0, 0), 1)
        block.add_line((-1, 0), (1, 0))
        ref = msp.add_blockref("BOLT", (200, 0), dxfattribs={"xscale": 2, "yscale": 2, "layer": "HOLES"})  # type: ignore[attr-defined]
        ref.add_auto_attribs({})
        msp.add_mtext("Line one\\Pline two", dxfattribs={"insert": (0, 80), "char_height": 2})  # type: ignore[attr-defined]

    result = read_drawing(write_dxf(tmp_path / "a.dxf", mutate=extra))
    assert isinstance(result, DrawingMetadata)
    assert result.schema_version == 3 and result.physical_3d is None
    kinds = [e.kind for e in result.model.entities]
    assert kinds.count("CIRCLE") == 4 and "DIMENSION" in kinds and "INSERT" in kinds
    outline = next(e for e in result.model.entities if isinstance(e, PolylineEntity))
    assert outline.closed and outline.vertices == ((0, 0), (100, 0), (100, 50), (0, 50)) and outline.layer == "OUTLINE"
    dim = next(e for e in result.model.entities if isinstance(e, DimensionEntity))
    assert dim.dimtype == "linear" and dim.measurement == 100.0 and dim.graphics
    texts = [e for e in result.model.entities if isinstance(e, TextEntity)]
    assert {t.content for t in texts} == {"PLATE A", "Line one\nline two"}
    ref = next(e for e in result.model.entities if isinstance(e, InsertEntity))
    assert ref.block == "BOLT" and ref.scale[:2] == (2.0, 2.0)
    # exploded contents are in world coordinates and inherit the reference's layer
    circle = next(e for e in ref.exploded if e.kind == "CIRCLE")
    assert circle.center == (200.0, 0.0) and circle.radius == 2.0 and circle.layer == "HOLES"  # type: ignore[union-attr]
    assert [b.name for b in result.blocks if b.name == "BOLT"]
    assert {"OUTLINE", "HOLES", "TEXT"} <= {layer.name for layer in result.layers}
    assert result.extents is not None and result.extents.max[0] >= 202.0
    # JSON round trip
    assert DrawingMetadata.model_validate_json(result.to_json_bytes()) == result


def test_schema_v4_measures_isolated_3d_extents(tmp_path: Path) -> None:
    def solid(msp: object) -> None:
        entity = msp.add_3dsolid()  # type: ignore[attr-defined]
        export_dxf(entity, [body_from_mesh(cube().scale(10, 20, 30).translate(500, 0, 15))])

    path = write_dxf(tmp_path / "solid.dxf", mutate=solid)
    v4 = read_drawing(path, 4)
    assert isinstance(v4, DrawingMetadata) and v4.physical_3d is not None
    assert v4.physical_3d.status == "measured"
    assert v4.physical_3d.extents is not None and v4.physical_3d.extents.size == (10.0, 20.0, 30.0)
    assert v4.physical_3d.volume == pytest.approx(6000.0)
    v3 = read_drawing(path, 3)
    assert isinstance(v3, DrawingMetadata) and v3.physical_3d is None


def test_unmeasurable_solid_is_marked_unknown_not_guessed(tmp_path: Path) -> None:
    def broken(msp: object) -> None:
        entity = msp.add_3dsolid()  # type: ignore[attr-defined]
        entity.sat = ["garbage that is not ACIS"]

    result = read_drawing(write_dxf(tmp_path / "s.dxf", mutate=broken), 4)
    assert isinstance(result, DrawingMetadata) and result.physical_3d is not None
    assert result.physical_3d.status == "unknown" and result.physical_3d.reason


def _valid_bytes(tmp_path: Path) -> bytes:
    return write_dxf(tmp_path / "valid.dxf").read_bytes()


@pytest.mark.parametrize(
    ("name", "make", "failure_class"),
    [
        ("empty.dxf", lambda valid: b"", "empty-file"),
        ("truncated.dxf", lambda valid: valid[: len(valid) // 2], "truncated"),
        ("truncated-tail.dxf", lambda valid: valid[:-40], "truncated"),
        ("signature.dxf", lambda valid: b"\x89PNG\r\n\x1a\n" + valid, "not-a-drawing"),
        ("garbage.dxf", lambda valid: bytes(range(256)) * 64, "not-a-drawing"),
        ("text.dxf", lambda valid: b"hello world\nthis is not a drawing\n", "not-a-drawing"),
        ("fake.dwg", lambda valid: valid, "not-a-drawing"),
        ("mangled.dxf", lambda valid: valid[:2000] + b"  0\nNONSENSE\n 999\nxx\n" + valid[-200:], "malformed"),
    ],
)
def test_invalid_drawings_give_a_deterministic_invalid_result(
    tmp_path: Path, name: str, make: object, failure_class: str
) -> None:
    path = tmp_path / name
    path.write_bytes(make(_valid_bytes(tmp_path)))  # type: ignore[operator]
    first = read_drawing(path)
    second = read_drawing(path)
    assert isinstance(first, InvalidDrawing), first
    assert first.failure_class == failure_class, first
    assert first.reason and first.reason[0].islower() and "Error" not in first.reason
    assert first == second and first.to_json_bytes() == second.to_json_bytes()


def test_missing_and_directory_paths_are_invalid(tmp_path: Path) -> None:
    assert isinstance(read_drawing(None), InvalidDrawing)
    missing = read_drawing(tmp_path / "nope.dxf")
    assert isinstance(missing, InvalidDrawing) and "does not exist" in missing.reason
    assert isinstance(read_drawing(tmp_path), InvalidDrawing)


def test_a_200_mb_file_is_rejected_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "huge.dxf"
    with path.open("wb") as handle:
        handle.write(b"  0\nSECTION\n")
        handle.truncate(200 * 1024 * 1024)  # sparse: no 200 MB written to disk
    started = time.monotonic()
    result = read_drawing(path)
    assert time.monotonic() - started < 1.0
    assert isinstance(result, InvalidDrawing) and "limit" in result.reason and result.size == 200 * 1024 * 1024


def test_entity_limit_is_deterministic(tmp_path: Path) -> None:
    result = read_drawing(write_dxf(tmp_path / "a.dxf"), limits=ReadLimits(max_entities=3))
    assert isinstance(result, InvalidDrawing) and result.failure_class == "entity-limit"
    assert "more than 3" in result.reason


def test_dwg_without_any_reader_cannot_be_read_here(tmp_path: Path) -> None:
    path = tmp_path / "attempt.dwg"
    path.write_bytes(DWG_BYTES)
    with pytest.raises(CannotReadDrawing, match=r"^cannot read DWG here: "):
        read_drawing(path)


def _export(tmp_path: Path, dwg: Path, **fields: object) -> None:
    meta = read_drawing(write_dxf(tmp_path / "src.dxf"))
    assert isinstance(meta, DrawingMetadata)
    export = {
        "dwg_sha256": hashlib.sha256(dwg.read_bytes()).hexdigest(),
        "exporter": "test",
        "metadata": meta.model_dump(mode="json"),
        **fields,
    }
    adapter_metadata_path(dwg).write_text(json.dumps(export))


def test_dwg_with_adapter_metadata(tmp_path: Path) -> None:
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg)
    result = read_drawing(dwg)
    assert isinstance(result, DrawingMetadata) and len(result.model.entities) >= 6


def test_adapter_metadata_must_belong_to_the_dwg(tmp_path: Path) -> None:
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg, dwg_sha256="a" * 64)
    with pytest.raises(CannotReadDrawing, match="other DWG bytes"):
        read_drawing(dwg)
    adapter_metadata_path(dwg).write_text('{"format": "autocad-bench-dwg-metadata", "dwg_sha256": 1}')
    with pytest.raises(CannotReadDrawing, match="invalid"):
        read_drawing(dwg)


def test_adapter_reports_an_invalid_dwg(tmp_path: Path) -> None:
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg, valid=False, reason="drawing file is corrupt", metadata=None)
    result = read_drawing(dwg)
    assert isinstance(result, InvalidDrawing) and "corrupt" in result.reason


def test_adapter_metadata_of_schema_v3_does_not_serve_a_v4_task(tmp_path: Path) -> None:
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg)
    with pytest.raises(CannotReadDrawing, match="needs v4"):
        AdapterMetadataReader().read(dwg, hashlib.sha256(DWG_BYTES).hexdigest(), 4, ReadLimits())
    assert DwgAdapterExport.model_json_schema()["title"] == "DwgAdapterExport"


CONVERTER = """
import shutil, sys, time
mode, source, out = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "fail":
    sys.stderr.write("licence missing\\n"); sys.exit(3)
if mode == "slow":
    time.sleep(30)
shutil.copyfile(source, out)
"""


def test_dwg_through_a_converter_command(tmp_path: Path) -> None:
    script = tmp_path / "convert.py"
    script.write_text(CONVERTER)
    dxf = write_dxf(tmp_path / "src.dxf")
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    ok = ConverterDwgReader([sys.executable, str(script), "copy", str(dxf), "{output}"])
    result = read_drawing(dwg, dwg_reader=ok)
    assert isinstance(result, DrawingMetadata)
    assert result.source.format == "dwg-converted" and result.source.sha256 == hashlib.sha256(DWG_BYTES).hexdigest()
    failing = ConverterDwgReader([sys.executable, str(script), "fail", str(dxf), "{output}"])
    with pytest.raises(CannotReadDrawing, match="exited 3: licence missing"):
        read_drawing(dwg, dwg_reader=failing)
    slow = ConverterDwgReader([sys.executable, str(script), "slow", str(dxf), "{output}"], timeout_s=0.5)
    with pytest.raises(CannotReadDrawing, match="timed out"):
        read_drawing(dwg, dwg_reader=slow)
    missing = default_dwg_reader("no-such-converter-binary {input} {output}")
    with pytest.raises(CannotReadDrawing, match=r"no AutoCAD adapter metadata.*not found"):
        read_drawing(dwg, dwg_reader=missing)


def test_converter_does_not_see_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    script = tmp_path / "env.py"
    script.write_text(
        "import os, sys, shutil\nopen(sys.argv[2] + '.env', 'w').write(repr(sorted(os.environ)))\n"
        "shutil.copyfile(sys.argv[1], sys.argv[2])\n"
    )
    dxf = write_dxf(tmp_path / "src.dxf")
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    seen = tmp_path / "seen"
    reader = ConverterDwgReader([sys.executable, str(script), str(dxf), str(seen)])
    with pytest.raises(CannotReadDrawing, match="produced no DXF"):
        reader.read(dwg, "0" * 64, 3, ReadLimits())
    assert "OPENAI_API_KEY" not in Path(str(seen) + ".env").read_text()


def test_quirky_but_readable_dxf_is_recovered(tmp_path: Path) -> None:
    valid = _valid_bytes(tmp_path)
    end = valid.rindex(b"EOF")
    quirky = valid[:end] + b"ENDSEC\n  0\n" + valid[end:]  # a stray ENDSEC, as some writers emit
    path = tmp_path / "quirky.dxf"
    path.write_bytes(quirky)
    result = read_drawing(path)
    assert isinstance(result, DrawingMetadata) and len(result.model.entities) >= 6


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.floats(0, 1), st.sampled_from(["byte", "delete", "digit", "huge"])), min_size=1, max_size=6)
)
def test_mutated_dxf_never_crashes_and_valid_results_serialize(tmp_path: Path, edits: list[tuple[float, str]]) -> None:
    base = tmp_path / "base.dxf"
    if not base.exists():
        write_dxf(base)
    data = bytearray(base.read_bytes())
    for where, op in edits:
        pos = int(where * (len(data) - 1))
        if op == "byte":
            data[pos] = (data[pos] + 97) % 256
        elif op == "delete":
            del data[pos : pos + 64]
        elif op == "digit":
            data[pos : pos + 1] = b"7"
        else:
            data[pos:pos] = b"1e999"
    path = tmp_path / "mutated.dxf"
    path.write_bytes(bytes(data))
    result = read_drawing(path)
    assert isinstance(result, (DrawingMetadata, InvalidDrawing))
    result.to_json_bytes()
    assert read_drawing(path) == result


def test_adapter_metadata_with_non_finite_numbers_is_refused(tmp_path: Path) -> None:
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg)
    export = adapter_metadata_path(dwg)
    export.write_text(export.read_text().replace('"radius": 4.0', '"radius": Infinity', 1))
    assert "Infinity" in export.read_text()
    with pytest.raises(CannotReadDrawing, match="non-finite"):
        read_drawing(dwg)


@pytest.mark.parametrize(("number", "refused"), [("1e20", False), ("-1e20", False), ("1.0000001e20", True),
                                                 ("-1e21", True), ("1e307", True)])
def test_adapter_metadata_is_bounded_as_the_dxf_readers_are(tmp_path: Path, number: str, refused: bool) -> None:
    # A finite but huge coordinate (1e307) would overflow the scorer's sums; the DXF readers
    # drop any entity beyond +-1e20, and the adapter's export is held to the same bound.
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg)
    export = adapter_metadata_path(dwg)
    export.write_text(export.read_text().replace('"radius": 4.0', f'"radius": {number}', 1))
    assert f'"radius": {number}' in export.read_text()
    if refused:
        where = r"at metadata\.model\.entities\[\d+\]\.radius, beyond the readers' bound of 1e\+20"
        with pytest.raises(CannotReadDrawing, match=where):
            read_drawing(dwg)
    else:
        assert isinstance(read_drawing(dwg), DrawingMetadata)


def test_adapter_metadata_may_hold_large_body_measures(tmp_path: Path) -> None:
    # A volume grows with the cube of the coordinates: a 10 km body in millimetres measures
    # 1e21 mm^3. Only coordinates are bounded, on the DXF path and here alike.
    dwg = tmp_path / "attempt.dwg"
    dwg.write_bytes(DWG_BYTES)
    _export(tmp_path, dwg)
    export = adapter_metadata_path(dwg)
    data = json.loads(export.read_text())
    data["metadata"]["schema_version"] = 4
    data["metadata"]["physical_3d"] = {"status": "measured", "volume": 1e21, "area": 6e14, "bodies": 1,
                                       "sources": ["3DSOLID"]}
    export.write_text(json.dumps(data))
    result = read_drawing(dwg)
    assert isinstance(result, DrawingMetadata)
    assert result.physical_3d is not None and result.physical_3d.volume == 1e21

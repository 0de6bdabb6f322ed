"""Each integrity rule of the gold cache, with its message (issue 23).

Entries are written by hand here (no DXF reading or rendering) so that every rule of
``load_entry`` is tested alone and fast; one test builds a real entry with ``build_entry``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.gold_cache import (
    GoldCacheError,
    build_entry,
    check_gold_cache,
    entry_dir,
    load_entry,
    manifest_json,
)
from autocad_bench_evaluator.metadata import DrawingMetadata as DrawingMetadataT
from autocad_bench_evaluator.metadata import Physical3D
from autocad_bench_evaluator.spec import (
    GOLD_DXF,
    GOLD_FILES,
    GOLD_METADATA,
    GOLD_RENDER,
    MANIFEST_FILENAME,
    SCORING_FILENAME,
    GoldEntry,
    GoldManifest,
    ScoringSpec,
)
from pydantic import ValidationError

from tests.evaluator.support import metadata, plate, plate_doc, write_dxf


def _spec_json(task_id: str = "plate", **fields: Any) -> bytes:
    return ScoringSpec(task_id=task_id, **fields).model_dump_json().encode()


def write_entry(
    root: Path,
    version: str = "v1",
    task_id: str = "plate",
    *,
    files: dict[str, bytes] | None = None,
    manifest: dict[str, Any] | None = None,
    records: list[dict[str, Any]] | None = None,
    schema_version: int = 3,
) -> Path:
    """An entry directory with the four gold files and a matching manifest (overridable)."""
    directory = root / version / task_id
    directory.mkdir(parents=True)
    contents = {
        GOLD_DXF: b"0\nSECTION\n0\nEOF\n",
        GOLD_METADATA: metadata(plate(), schema_version=schema_version).to_json_bytes(),
        GOLD_RENDER: b"\x89PNG\r\n\x1a\n" + b"\0" * 32,
        SCORING_FILENAME: _spec_json(task_id, schema_version=schema_version),
    }
    contents.update(files or {})
    for name, data in contents.items():
        (directory / name).write_bytes(data)
    listed = records
    if listed is None:
        listed = [{"name": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for n, d in contents.items()]
    body = {"task_id": task_id, "evaluator_version": version, "schema_version": schema_version, "files": listed}
    body.update(manifest or {})
    (directory / MANIFEST_FILENAME).write_text(json.dumps(body))
    return directory


def _fails(root: Path, message: str, version: str = "v1", task_id: str = "plate") -> None:
    with pytest.raises(GoldCacheError) as caught:
        load_entry(root, version, task_id)
    text = str(caught.value)
    assert text.startswith(f"gold cache entry {entry_dir(root, version, task_id)}: "), text
    assert message in text, text
    problems = check_gold_cache(root, version, [task_id])
    assert problems == [text]


def test_a_hand_written_entry_loads(tmp_path: Path) -> None:
    directory = write_entry(tmp_path)
    entry = load_entry(tmp_path, "v1", "plate")
    assert entry.directory == directory and entry.task_id == "plate"
    assert entry.gold_dxf == directory / GOLD_DXF and entry.render_path == directory / GOLD_RENDER
    assert entry.spec == ScoringSpec(task_id="plate")
    assert entry.metadata == metadata(plate())
    assert entry.manifest.evaluator_version == "v1" and entry.manifest.schema_version == 3
    assert check_gold_cache(tmp_path, "v1", ["plate"]) == []
    assert json.loads(manifest_json(entry)) == entry.manifest.model_dump(mode="json")
    assert manifest_json(entry) == json.dumps(entry.manifest.model_dump(mode="json"), sort_keys=True)


@pytest.mark.parametrize(
    ("version", "task_id", "what"), [("v/1", "plate", "evaluator version"), ("v1", "../x", "task id")]
)
def test_unsafe_names_are_refused(tmp_path: Path, version: str, task_id: str, what: str) -> None:
    with pytest.raises(GoldCacheError, match=rf"^invalid {what} '.*': letters, digits, '\.', '_', '-' only$"):
        entry_dir(tmp_path, version, task_id)
    assert entry_dir(tmp_path, "v1", "plate") == tmp_path / "v1" / "plate"


def test_a_missing_entry_is_named(tmp_path: Path) -> None:
    write_entry(tmp_path, task_id="other")
    _fails(tmp_path, "missing (no directory for task 'plate' at version 'v1')")


def test_a_missing_root_is_one_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert check_gold_cache(missing, "v1", ["a", "b"]) == [f"gold cache root {missing} does not exist"]


def test_each_task_is_checked_once_and_every_bad_one_reported(tmp_path: Path) -> None:
    write_entry(tmp_path, task_id="good")
    problems = check_gold_cache(tmp_path, "v1", ["bad", "good", "bad", "worse"])
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing (no directory for task 'bad' at version 'v1')",
        "missing (no directory for task 'worse' at version 'v1')",
    ]


def test_an_unreadable_entry_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autocad_bench_evaluator.gold_cache as gold_cache_module

    def unreadable(path: Path) -> str:
        raise OSError(f"I/O error reading {path.name}")

    write_entry(tmp_path)
    monkeypatch.setattr(gold_cache_module, "_sha256", unreadable)
    assert check_gold_cache(tmp_path, "v1", ["plate"]) == [
        "gold cache entry for 'plate': cannot be read: I/O error reading gold.dxf"
    ]


def test_a_missing_manifest_is_named(tmp_path: Path) -> None:
    directory = write_entry(tmp_path)
    (directory / MANIFEST_FILENAME).unlink()
    _fails(tmp_path, "missing file manifest.json")


def test_an_invalid_manifest_is_named_with_its_first_error(tmp_path: Path) -> None:
    directory = write_entry(tmp_path)
    (directory / MANIFEST_FILENAME).write_text(json.dumps({"task_id": "plate"}))
    _fails(tmp_path, "manifest.json is invalid: evaluator_version: Field required")


def test_a_manifest_of_another_task_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, manifest={"task_id": "other"})
    _fails(tmp_path, "manifest.json is for task 'other' version 'v1', expected 'plate' 'v1'")


def test_a_manifest_of_another_evaluator_version_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, version="v2", manifest={"evaluator_version": "v1"})
    _fails(tmp_path, "manifest.json is for task 'plate' version 'v1', expected 'plate' 'v2'", version="v2")


def test_a_manifest_of_a_task_sorting_after_the_expected_one_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, manifest={"task_id": "zzz"})
    _fails(tmp_path, "manifest.json is for task 'zzz' version 'v1', expected 'plate' 'v1'")


def test_a_manifest_of_a_later_evaluator_version_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, version="v2", manifest={"evaluator_version": "v3"})
    _fails(tmp_path, "manifest.json is for task 'plate' version 'v3', expected 'plate' 'v2'", version="v2")


def _records(root: Path) -> list[dict[str, Any]]:
    directory = write_entry(root / "probe")
    return list(json.loads((directory / MANIFEST_FILENAME).read_text())["files"])


def test_a_file_listed_twice_is_refused(tmp_path: Path) -> None:
    records = _records(tmp_path)
    write_entry(tmp_path, records=[*records, records[0]])
    _fails(tmp_path, "manifest.json lists a file twice")


@pytest.mark.parametrize("name", GOLD_FILES)
def test_a_gold_file_missing_from_the_list_is_refused(tmp_path: Path, name: str) -> None:
    write_entry(tmp_path, records=[r for r in _records(tmp_path) if r["name"] != name])
    _fails(tmp_path, f"manifest.json does not list {name}")


def test_an_unexpected_listed_file_is_refused(tmp_path: Path) -> None:
    extra = {"name": "extra.txt", "sha256": hashlib.sha256(b"x").hexdigest(), "size": 1}
    directory = write_entry(tmp_path, records=[*_records(tmp_path), extra])
    (directory / "extra.txt").write_bytes(b"x")
    _fails(tmp_path, "manifest.json lists unexpected file extra.txt")


@pytest.mark.parametrize("name", GOLD_FILES)
def test_a_listed_file_missing_on_disk_is_named(tmp_path: Path, name: str) -> None:
    directory = write_entry(tmp_path)
    (directory / name).unlink()
    _fails(tmp_path, f"missing file {name}")


@pytest.mark.parametrize("name", GOLD_FILES)
def test_a_size_change_is_named_with_both_sizes(tmp_path: Path, name: str) -> None:
    directory = write_entry(tmp_path)
    size = (directory / name).stat().st_size
    with (directory / name).open("ab") as handle:
        handle.write(b" ")
    _fails(tmp_path, f"{name} was modified (size {size + 1} bytes, manifest says {size})")


@pytest.mark.parametrize("name", GOLD_FILES)
def test_a_same_size_change_fails_the_checksum(tmp_path: Path, name: str) -> None:
    directory = write_entry(tmp_path)
    data = bytearray((directory / name).read_bytes())
    data[-1] ^= 0x01
    (directory / name).write_bytes(bytes(data))
    _fails(tmp_path, f"{name} was modified (SHA-256 does not match the manifest)")


def test_a_large_file_is_checksummed_whole(tmp_path: Path) -> None:
    big = b"\x89PNG" + bytes(range(256)) * 8192  # > 1 MiB: read in more than one chunk
    directory = write_entry(tmp_path, files={GOLD_RENDER: big})
    assert load_entry(tmp_path, "v1", "plate").directory == directory
    tail = bytearray(big)
    tail[-1] ^= 0x01
    (directory / GOLD_RENDER).write_bytes(bytes(tail))
    _fails(tmp_path, f"{GOLD_RENDER} was modified (SHA-256 does not match the manifest)")


def test_an_invalid_spec_is_named(tmp_path: Path) -> None:
    write_entry(tmp_path, files={SCORING_FILENAME: b'{"task_id": "plate", "pass_threshold": 2}'})
    _fails(tmp_path, "scoring.json is invalid: pass_threshold: Input should be less than or equal to 1")


def test_a_spec_of_another_task_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, files={SCORING_FILENAME: _spec_json("other")})
    _fails(tmp_path, "scoring.json is for task 'other'")


def test_a_spec_of_another_schema_than_the_manifest_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, files={SCORING_FILENAME: _spec_json(schema_version=4)})
    _fails(tmp_path, "scoring.json wants schema v4, manifest has v3")


def test_invalid_metadata_is_named(tmp_path: Path) -> None:
    write_entry(tmp_path, files={GOLD_METADATA: b"{}"})
    _fails(tmp_path, "metadata.json is invalid: ")


def test_metadata_of_another_schema_than_the_manifest_is_refused(tmp_path: Path) -> None:
    v3 = metadata(plate()).to_json_bytes()
    write_entry(tmp_path, schema_version=4, files={GOLD_METADATA: v3})
    _fails(tmp_path, "metadata.json is schema v3, manifest has v4")


def test_scored_3d_extents_need_measured_extents(tmp_path: Path) -> None:
    spec = _spec_json(schema_version=4, weights={"entities": 1.0, "extents3d": 1.0})
    write_entry(tmp_path, schema_version=4, files={SCORING_FILENAME: spec})
    _fails(tmp_path, "metadata.json has no measured 3D extents but the task scores them")
    unknown = metadata(plate(), schema_version=4).model_copy(update={"physical_3d": Physical3D(status="unknown")})
    files = {SCORING_FILENAME: spec, GOLD_METADATA: unknown.to_json_bytes()}
    write_entry(tmp_path / "b", schema_version=4, files=files)
    _fails(tmp_path / "b", "has no measured 3D extents but the task scores them")


def test_a_v4_entry_without_3d_scoring_loads(tmp_path: Path) -> None:
    write_entry(tmp_path, schema_version=4)
    entry = load_entry(tmp_path, "v1", "plate")
    assert entry.manifest.schema_version == 4 and not entry.spec.scores_3d_extents


def test_manifest_records_are_validated() -> None:
    good = {"name": "gold.dxf", "sha256": "a" * 64, "size": 0}
    assert GoldEntry(**good).size == 0
    for bad in ({"size": -1}, {"sha256": "A" * 64}, {"sha256": "a" * 63}, {"name": "../x"}):
        with pytest.raises(ValidationError):
            GoldEntry(**{**good, **bad})
    manifest = GoldManifest(task_id="t", evaluator_version="v", schema_version=3, files=(GoldEntry(**good),))
    assert manifest.file("gold.dxf") == GoldEntry(**good) and manifest.file("render.png") is None
    assert GOLD_FILES == (GOLD_DXF, GOLD_METADATA, GOLD_RENDER, SCORING_FILENAME)
    assert (GOLD_DXF, GOLD_METADATA, GOLD_RENDER, SCORING_FILENAME, MANIFEST_FILENAME) == (
        "gold.dxf",
        "metadata.json",
        "render.png",
        "scoring.json",
        "manifest.json",
    )


def test_build_entry_writes_a_verified_entry_and_replaces_it(tmp_path: Path) -> None:
    gold = write_dxf(tmp_path / "gold.dxf")
    root = tmp_path / "cache"
    entry = build_entry(root, "v1", gold, ScoringSpec(task_id="plate"))
    assert entry.directory == root / "v1" / "plate"
    assert sorted(p.name for p in entry.directory.iterdir()) == sorted([*GOLD_FILES, MANIFEST_FILENAME])
    assert [f.name for f in entry.manifest.files] == list(GOLD_FILES)
    for record in entry.manifest.files:
        data = (entry.directory / record.name).read_bytes()
        assert record.size == len(data) and record.sha256 == hashlib.sha256(data).hexdigest()
    assert (entry.directory / GOLD_DXF).read_bytes() == gold.read_bytes()
    again = build_entry(root, "v1", gold, ScoringSpec(task_id="plate", pass_threshold=0.5))
    assert again.spec.pass_threshold == 0.5 and load_entry(root, "v1", "plate").spec.pass_threshold == 0.5
    assert [p.name for p in (root / "v1").iterdir()] == ["plate"]


def test_build_entry_refuses_bad_golds_and_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    junk = tmp_path / "junk.dxf"
    junk.write_bytes(b"not a drawing")
    with pytest.raises(GoldCacheError, match=r"^gold drawing .*junk\.dxf for 'plate' is invalid: "):
        build_entry(root, "v1", junk, ScoringSpec(task_id="plate"))
    empty = write_dxf(tmp_path / "empty.dxf", mutate=lambda msp: [msp.delete_entity(e) for e in list(msp)])
    with pytest.raises(GoldCacheError, match=r"^gold drawing .*empty\.dxf for 'plate' has no model-space entities$"):
        build_entry(root, "v1", empty, ScoringSpec(task_id="plate"))
    flat = write_dxf(tmp_path / "flat.dxf")
    spec = ScoringSpec(task_id="plate", schema_version=4, weights={"entities": 1.0, "extents3d": 1.0})  # type: ignore[arg-type]
    with pytest.raises(GoldCacheError, match=r"^gold drawing .*flat\.dxf for 'plate' has no measured 3D extents$"):
        build_entry(root, "v1", flat, spec)
    assert not (root / "v1" / "plate").exists()
    assert not root.exists() or list((root / "v1").iterdir()) == []


# --------------------------------------------------------------------------- boundaries of each rule


def test_a_loaded_entry_is_immutable(tmp_path: Path) -> None:
    import dataclasses

    write_entry(tmp_path)
    entry = load_entry(tmp_path, "v1", "plate")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.directory = tmp_path  # type: ignore[misc]


@pytest.mark.parametrize("name", GOLD_FILES)
def test_a_shrunk_file_is_named_with_both_sizes(tmp_path: Path, name: str) -> None:
    directory = write_entry(tmp_path)
    data = (directory / name).read_bytes()
    (directory / name).write_bytes(data[:-1])
    _fails(tmp_path, f"{name} was modified (size {len(data) - 1} bytes, manifest says {len(data)})")


def test_a_spec_of_a_later_sorting_task_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, files={SCORING_FILENAME: _spec_json("zzz")})
    _fails(tmp_path, "scoring.json is for task 'zzz'")


def test_a_v3_spec_in_a_v4_entry_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, schema_version=4, files={SCORING_FILENAME: _spec_json(schema_version=3)})
    _fails(tmp_path, "scoring.json wants schema v3, manifest has v4")


def test_v4_metadata_in_a_v3_entry_is_refused(tmp_path: Path) -> None:
    v4 = metadata(plate(), schema_version=4).to_json_bytes()
    write_entry(tmp_path, schema_version=3, files={GOLD_METADATA: v4})
    _fails(tmp_path, "metadata.json is schema v4, manifest has v3")


def _measured() -> DrawingMetadataT:
    from autocad_bench_evaluator.metadata import Extents3D

    box = Extents3D(min=(0.0, 0.0, 0.0), max=(10.0, 20.0, 30.0))
    return metadata(plate(), schema_version=4).model_copy(
        update={"physical_3d": Physical3D(status="measured", extents=box, bodies=1, sources=("3DSOLID",))}
    )


def test_scored_3d_extents_that_were_measured_load(tmp_path: Path) -> None:
    spec = _spec_json(schema_version=4, weights={"entities": 1.0, "extents3d": 1.0})
    write_entry(tmp_path, schema_version=4, files={SCORING_FILENAME: spec, GOLD_METADATA: _measured().to_json_bytes()})
    entry = load_entry(tmp_path, "v1", "plate")
    assert entry.spec.scores_3d_extents and entry.metadata.physical_3d is not None
    assert entry.metadata.physical_3d.status == "measured"


def test_build_entry_with_measured_3d_extents(tmp_path: Path) -> None:
    from ezdxf.acis.dxf import export_dxf
    from ezdxf.acis.mesh import body_from_mesh
    from ezdxf.render.forms import cube

    def solid(msp: Any) -> None:
        export_dxf(msp.add_3dsolid(), [body_from_mesh(cube().scale(10, 20, 30))])

    gold = write_dxf(tmp_path / "solid.dxf", mutate=solid)
    spec = ScoringSpec(task_id="box", schema_version=4, weights={"entities": 1.0, "extents3d": 1.0})  # type: ignore[arg-type]
    entry = build_entry(tmp_path / "cache", "v1", gold, spec)
    assert entry.manifest.schema_version == 4 and entry.metadata.physical_3d is not None
    assert entry.metadata.physical_3d.status == "measured"


def test_a_failed_build_leaves_no_staging_and_keeps_the_old_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import autocad_bench_evaluator.gold_cache as gold_cache_module

    gold = write_dxf(tmp_path / "gold.dxf")
    root = tmp_path / "cache"
    build_entry(root, "v1", gold, ScoringSpec(task_id="plate", pass_threshold=0.5))

    def broken(_: object) -> bytes:
        raise RuntimeError("render failed")

    monkeypatch.setattr(gold_cache_module, "render_png", broken)
    with pytest.raises(RuntimeError, match="render failed"):
        build_entry(root, "v1", gold, ScoringSpec(task_id="plate"))
    assert [p.name for p in (root / "v1").iterdir()] == ["plate"]
    assert load_entry(root, "v1", "plate").spec.pass_threshold == 0.5


def test_a_failed_swap_restores_the_old_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autocad_bench_evaluator.gold_cache as gold_cache_module

    gold = write_dxf(tmp_path / "gold.dxf")
    root = tmp_path / "cache"
    build_entry(root, "v1", gold, ScoringSpec(task_id="plate", pass_threshold=0.5))
    real = gold_cache_module.os.replace
    calls: list[tuple[str, str]] = []

    def replace(src: Any, dst: Any) -> None:
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:  # the staging directory into place
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(gold_cache_module.os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        build_entry(root, "v1", gold, ScoringSpec(task_id="plate"))
    monkeypatch.setattr(gold_cache_module.os, "replace", real)
    assert len(calls) == 3 and calls[2][1] == "plate"  # the old entry moved back
    assert [p.name for p in (root / "v1").iterdir()] == ["plate"]
    assert load_entry(root, "v1", "plate").spec.pass_threshold == 0.5


def test_a_manifest_of_a_later_sorting_task_or_version_is_refused(tmp_path: Path) -> None:
    write_entry(tmp_path, manifest={"task_id": "zzz"})
    _fails(tmp_path, "manifest.json is for task 'zzz' version 'v1', expected 'plate' 'v1'")
    write_entry(tmp_path / "b", manifest={"evaluator_version": "v9"})
    _fails(tmp_path / "b", "manifest.json is for task 'plate' version 'v9', expected 'plate' 'v1'")


def test_build_entry_refuses_a_gold_too_big_to_score_and_takes_one_at_the_bound(tmp_path: Path) -> None:
    bound = 1000  # as docs/tasks.md states it

    def grid(count: int) -> Callable[[Any], None]:
        def add(msp: Any) -> None:
            for i in range(count):
                msp.add_line((0.0, float(i)), (10.0, float(i)))
        return add

    root = tmp_path / "cache"
    # The plate already holds LINE entities: fill them up to exactly the bound, then one more.
    plate_lines = sum(1 for e in plate_doc().modelspace() if e.dxftype() == "LINE")
    at_bound = write_dxf(tmp_path / "at-bound.dxf", mutate=grid(bound - plate_lines))
    assert build_entry(root, "v1", at_bound, ScoringSpec(task_id="plate")).directory.is_dir()
    over = write_dxf(tmp_path / "over.dxf", mutate=grid(bound - plate_lines + 1))
    with pytest.raises(GoldCacheError, match=rf"^gold drawing .*over\.dxf for 'big' has {bound + 1} LINE entities, "
                                             rf"more than the {bound} of one kind"):
        build_entry(root, "v1", over, ScoringSpec(task_id="big"))
    assert not (root / "v1" / "big").exists()

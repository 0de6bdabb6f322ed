"""Gold cache: atomic build, checksum and schema verification, admission helper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autocad_bench_evaluator.gold_cache import (
    GoldCacheError,
    build_entry,
    check_gold_cache,
    entry_dir,
    load_entry,
)
from autocad_bench_evaluator.spec import GOLD_FILES, MANIFEST_FILENAME, GoldManifest, ScoringSpec
from ezdxf.acis.dxf import export_dxf
from ezdxf.acis.mesh import body_from_mesh
from ezdxf.render.forms import cube

from tests.evaluator.support import gold_cache, write_dxf


def test_build_then_load(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    gold_cache(root)
    entry = load_entry(root, "v1", "plate")
    assert entry.task_id == "plate" and entry.spec.task_id == "plate"
    assert sorted(p.name for p in entry.directory.iterdir()) == sorted([*GOLD_FILES, MANIFEST_FILENAME])
    assert {f.name for f in entry.manifest.files} == set(GOLD_FILES)
    assert entry.render_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert check_gold_cache(root, "v1", ["plate"]) == []


def test_rebuild_replaces_the_entry_atomically(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    gold = gold_cache(root)
    build_entry(root, "v1", gold, ScoringSpec(task_id="plate", pass_threshold=0.5))
    assert load_entry(root, "v1", "plate").spec.pass_threshold == 0.5
    assert [p.name for p in (root / "v1").iterdir()] == ["plate"]


@pytest.mark.parametrize("name", [*GOLD_FILES])
def test_tampering_with_any_file_is_detected_and_named(tmp_path: Path, name: str) -> None:
    root = tmp_path / "cache"
    gold_cache(root)
    path = entry_dir(root, "v1", "plate") / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, different content
    path.write_bytes(bytes(data))
    with pytest.raises(GoldCacheError, match=f"{name} was modified"):
        load_entry(root, "v1", "plate")
    problems = check_gold_cache(root, "v1", ["plate"])
    assert len(problems) == 1 and name in problems[0]


@pytest.mark.parametrize("name", [*GOLD_FILES, MANIFEST_FILENAME])
def test_a_missing_file_is_named(tmp_path: Path, name: str) -> None:
    root = tmp_path / "cache"
    gold_cache(root)
    (entry_dir(root, "v1", "plate") / name).unlink()
    with pytest.raises(GoldCacheError, match=f"missing file {name}"):
        load_entry(root, "v1", "plate")


def test_manifest_rewritten_to_match_a_forged_scoring_file_is_still_checked(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    gold_cache(root)
    directory = entry_dir(root, "v1", "plate")
    manifest = GoldManifest.model_validate_json((directory / MANIFEST_FILENAME).read_bytes())
    (directory / MANIFEST_FILENAME).write_text(json.dumps({**manifest.model_dump(mode="json"), "task_id": "other"}))
    with pytest.raises(GoldCacheError, match=r"manifest\.json is for task 'other'"):
        load_entry(root, "v1", "plate")


def test_missing_entries_and_bad_names(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    gold_cache(root)
    problems = check_gold_cache(root, "v1", ["plate", "absent"])
    assert len(problems) == 1 and "absent" in problems[0]
    assert check_gold_cache(root, "v2", ["plate"])[0].endswith("at version 'v2')")
    assert "does not exist" in check_gold_cache(tmp_path / "nowhere", "v1", ["plate"])[0]
    with pytest.raises(GoldCacheError, match="invalid task id"):
        load_entry(root, "v1", "../plate")


def _solid_gold(tmp_path: Path) -> Path:
    def solid(msp: object) -> None:
        entity = msp.add_3dsolid()  # type: ignore[attr-defined]
        export_dxf(entity, [body_from_mesh(cube().scale(10, 20, 30))])

    return write_dxf(tmp_path / "solid.dxf", mutate=solid)


def test_scoring_3d_extents_requires_schema_v4(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="requires schema_version 4"):
        ScoringSpec(task_id="box", weights={"extents3d": 1.0})  # type: ignore[arg-type]
    root = tmp_path / "cache"
    spec = ScoringSpec(task_id="box", schema_version=4, weights={"extents3d": 1.0, "entities": 1.0})  # type: ignore[arg-type]
    entry = build_entry(root, "v1", _solid_gold(tmp_path), spec)
    assert entry.metadata.schema_version == 4 and entry.manifest.schema_version == 4
    # a v3 manifest cannot serve a spec that scores 3D extents, even with consistent checksums
    directory = entry.directory
    manifest = json.loads((directory / MANIFEST_FILENAME).read_text())
    manifest["schema_version"] = 3
    (directory / MANIFEST_FILENAME).write_text(json.dumps(manifest))
    with pytest.raises(GoldCacheError, match=r"schema v4"):
        load_entry(root, "v1", "box")


def test_gold_without_measured_3d_extents_is_refused(tmp_path: Path) -> None:
    spec = ScoringSpec(task_id="flat", schema_version=4, weights={"extents3d": 1.0})  # type: ignore[arg-type]
    with pytest.raises(GoldCacheError, match="no measured 3D extents"):
        build_entry(tmp_path / "cache", "v1", write_dxf(tmp_path / "flat.dxf"), spec)


def test_invalid_gold_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.dxf"
    bad.write_bytes(b"")
    with pytest.raises(GoldCacheError, match="invalid: drawing file is empty"):
        build_entry(tmp_path / "cache", "v1", bad, ScoringSpec(task_id="bad"))
    assert not (tmp_path / "cache" / "v1" / "bad").exists()

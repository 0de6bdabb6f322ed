"""``autocad-bench tasks``: list, show, validate and render through the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["autocad-bench", "tasks", *args], capture_output=True, text=True, timeout=300)


def test_list_a_suite_in_order() -> None:
    result = run("list", "--suite", "smoke")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["task_id"] for line in result.stdout.splitlines()] == [
        "prim-rectangle",
        "prim-circle-concentric",
        "part-plate-four-holes",
    ]


def test_list_by_app_excludes_the_autocad_only_3d_tier() -> None:
    rows = [json.loads(line) for line in run("list", "--app", "librecad").stdout.splitlines()]
    assert len(rows) >= 23 and all("librecad" in r["apps"] and r["tier"] != "3d" for r in rows)


def test_show_and_unknown_task() -> None:
    shown = json.loads(run("show", "prim-rectangle").stdout)
    assert shown["task"]["task_id"] == "prim-rectangle" and "solution.librecad.jsonl" in shown["files"]
    unknown = run("show", "no-such-task")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "error: unknown task 'no-such-task' (see: autocad-bench tasks list)"


def test_validate_regenerates_the_shipped_gold_cache_exactly() -> None:
    result = run("validate")
    assert result.returncode == 0, result.stderr
    from autocad_bench_evaluator.suite import registry

    assert json.loads(result.stdout) == {"tasks": len(registry.list_tasks()), "problems": 0}
    assert len(registry.list_tasks()) >= 300


def test_validate_catches_a_tampered_gold_entry(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "gold"
    shutil.copytree(SHIPPED_GOLD_CACHE, copy)
    gold = copy / EVALUATOR_VERSION / "prim-hexagon" / "gold.dxf"
    gold.write_bytes(gold.read_bytes().replace(b"LWPOLYLINE", b"LWPOLYLINX", 1))
    result = run("validate", "--gold-cache", str(copy), "--task", "prim-hexagon", "--task", "prim-rectangle")
    assert result.returncode == 1
    assert "prim-hexagon" in result.stderr and "gold.dxf" in result.stderr
    assert "prim-rectangle" not in result.stderr
    assert run("validate", "--task", "no-such-task").returncode == 2


def test_render_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "r.png"
    assert run("render", "part-gasket-ring", "--out", str(out)).returncode == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_list_filters_by_skill_family_split_and_difficulty() -> None:
    rows = [json.loads(line) for line in run("list", "--skill", "edit", "--split", "test").stdout.splitlines()]
    assert rows and all(r["skill"] == "edit" and r["split"] == "test" for r in rows)
    assert all(r["family"].startswith("edit-") for r in rows)
    family = [json.loads(line) for line in run("list", "--family", "draft-flange").stdout.splitlines()]
    assert family[0]["task_id"] == "part-flange-bolt-circle" and len(family) == 7
    hard = [json.loads(line) for line in run("list", "--difficulty", "hard").stdout.splitlines()]
    assert hard and all(r["difficulty"] == "hard" for r in hard)
    assert run("list", "--suite", "no-such-suite").returncode == 2


def test_families_lists_every_family_with_its_version() -> None:
    rows = [json.loads(line) for line in run("families").stdout.splitlines()]
    assert len(rows) >= 40 and len({r["family"] for r in rows}) == len(rows)
    assert {r["skill"] for r in rows} == {"draft", "edit", "reproduce", "annotate", "solid"}
    assert all(r["version"] >= 1 for r in rows)
    flange = next(r for r in rows if r["family"] == "draft-flange")
    assert flange["fixed"] == ["part-flange-bolt-circle"] and flange["generative"] is True

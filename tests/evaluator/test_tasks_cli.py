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
    assert json.loads(result.stdout) == {"tasks": 27, "problems": 0}


def test_validate_catches_a_tampered_gold_entry(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "gold"
    shutil.copytree(SHIPPED_GOLD_CACHE, copy)
    gold = copy / EVALUATOR_VERSION / "prim-hexagon" / "gold.dxf"
    gold.write_bytes(gold.read_bytes().replace(b"LWPOLYLINE", b"LWPOLYLINX", 1))
    result = run("validate", "--gold-cache", str(copy))
    assert result.returncode == 1
    assert "prim-hexagon" in result.stderr and "gold.dxf" in result.stderr


def test_render_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "r.png"
    assert run("render", "part-gasket-ring", "--out", str(out)).returncode == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

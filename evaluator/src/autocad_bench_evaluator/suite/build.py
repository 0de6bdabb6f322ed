"""Write the task folders and ``suites.json`` from the definitions in code.

Run ``uv run python -m autocad_bench_evaluator.suite.build`` after changing a definition; the
static tests (``tests/evaluator/test_suite_static.py``) fail while the committed folders
differ from what this module produces. ``--check`` reports the differences without writing.

Per task it writes ``task.json``, ``template.dxf``, ``scoring.json``, ``reference.png`` (the
evaluator's render of the gold; 3D tasks get an isometric wireframe of the gold solids, because
the plan render only shows their extents), and the reference solutions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw

from autocad_bench.tasks import TaskSpec
from autocad_bench_evaluator.metadata import DrawingMetadata, canonical_json, read_drawing
from autocad_bench_evaluator.render import png_bytes, render_png
from autocad_bench_evaluator.suite.definitions import TIERS, TaskDefinition
from autocad_bench_evaluator.suite.drawing import document_bytes
from autocad_bench_evaluator.suite.generators import ALL_TASKS
from autocad_bench_evaluator.suite.registry import (
    PERTURBED_FILE,
    SOLUTION_FILES,
    SUITE_FILES_DIR,
    SUITES_FILE,
    TASKS_DIR,
    NamedSuite,
    SuitesFile,
    generate_gold,
    template_document,
)

SMOKE = ("prim-rectangle", "prim-circle-concentric", "part-plate-four-holes")


def suite_definitions() -> SuitesFile:
    """The named suites written to ``suites.json``."""
    librecad = tuple(t.task_id for t in ALL_TASKS if "librecad" in t.apps)
    autocad = tuple(t.task_id for t in ALL_TASKS if "autocad" in t.apps)
    entries = {
        "smoke": NamedSuite(description="Three quick LibreCAD tasks for end-to-end checks.", tasks=SMOKE),
        "librecad-2d": NamedSuite(description="Every task that runs on LibreCAD, in suite order.", tasks=librecad),
        "autocad-full": NamedSuite(description="Every task of the suite (AutoCAD runs them all).", tasks=autocad),
    }
    for tier in TIERS:
        tasks = tuple(t.task_id for t in ALL_TASKS if t.tier == tier)
        entries[f"tier-{tier}"] = NamedSuite(description=f"The {tier} tier.", tasks=tasks)
    return SuitesFile(suites=entries)


def json_text(value: object) -> str:
    return json.dumps(value, indent=2) + "\n"


def task_spec(task: TaskDefinition) -> TaskSpec:
    return TaskSpec(
        task_id=task.task_id,
        title=task.title,
        prompt=task.prompt,
        units="millimeters",
        tier=task.tier,
        apps=tuple(task.apps),
    )


def gold_metadata(task: TaskDefinition) -> DrawingMetadata:
    """The gold drawing's metadata, read by the evaluator exactly as the gold cache reads it."""
    spec = task.scoring_spec()
    with tempfile.TemporaryDirectory(prefix="autocad-bench-gold-") as tmp:
        path = generate_gold(task.task_id, Path(tmp))
        result = read_drawing(path, spec.schema_version)
    if not isinstance(result, DrawingMetadata):
        raise RuntimeError(f"gold of {task.task_id} is not a valid drawing: {result.reason}")
    return result


def isometric_png(task: TaskDefinition, size: tuple[int, int] = (1600, 1200), margin: int = 80) -> bytes:
    """An isometric wireframe of the task's 3D gold (its :attr:`TaskDefinition.wireframe`)."""
    if task.wireframe is None:
        raise RuntimeError(f"3D task {task.task_id} has no wireframe for its reference image")
    cos30, sin30 = math.cos(math.radians(30)), math.sin(math.radians(30))
    paths = [[((x - y) * cos30, (x + y) * sin30 + z) for x, y, z in line] for line in task.wireframe()]
    xs = [p[0] for path in paths for p in path]
    ys = [p[1] for path in paths for p in path]
    lo_x, lo_y = min(xs), min(ys)
    scale = min((size[0] - 2 * margin) / (max(xs) - lo_x), (size[1] - 2 * margin) / (max(ys) - lo_y))
    ox = (size[0] - (max(xs) - lo_x) * scale) / 2
    oy = (size[1] - (max(ys) - lo_y) * scale) / 2
    image = Image.new("RGB", size, (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for path in paths:
        pixels = [(round(ox + (x - lo_x) * scale, 2), round(size[1] - oy - (y - lo_y) * scale, 2)) for x, y in path]
        draw.line(pixels, fill=(0, 0, 0), width=2)
    return png_bytes(image)


def reference_png(task: TaskDefinition) -> bytes:
    if task.tier == "3d":
        return isometric_png(task)
    return render_png(gold_metadata(task))


def task_files(task: TaskDefinition) -> dict[str, bytes]:
    """Every file of the task folder, by name."""
    spec = task_spec(task)
    files: dict[str, bytes] = {
        "task.json": json_text(spec.model_dump(mode="json")).encode(),
        spec.template: document_bytes(template_document(task.task_id)),
        "scoring.json": canonical_json(task.scoring_spec().model_dump(mode="json")),
        spec.reference: reference_png(task),
        SOLUTION_FILES["autocad"]: task.autocad_script().encode(),
    }
    solution = task.librecad_script()
    perturbed = task.librecad_script(perturbed=True)
    if solution is not None and perturbed is not None:
        files[SOLUTION_FILES["librecad"]] = solution.to_jsonl().encode()
        files[PERTURBED_FILE] = perturbed.to_jsonl().encode()
    return files


def all_files() -> dict[Path, bytes]:
    """Every generated file of the suite, by absolute path."""
    files: dict[Path, bytes] = {}
    for task in ALL_TASKS:
        for name, data in task_files(task).items():
            files[TASKS_DIR / task.task_id / name] = data
    named = suite_definitions()
    files[SUITES_FILE] = json_text(named.model_dump(mode="json")).encode()
    for name, entry in named.suites.items():
        files[SUITE_FILES_DIR / f"{name}.json"] = json_text({"name": name, "tasks": list(entry.tasks)}).encode()
    return files


def differences(files: dict[Path, bytes]) -> list[str]:
    """Generated files that are missing or differ on disk, plus stray task folders."""
    problems = [str(path) for path, data in files.items() if not path.is_file() or path.read_bytes() != data]
    expected = {task.task_id for task in ALL_TASKS}
    if TASKS_DIR.is_dir():
        problems += [
            f"{d} (no definition)" for d in sorted(TASKS_DIR.iterdir()) if d.is_dir() and d.name not in expected
        ]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report differences, write nothing")
    args = parser.parse_args(argv)
    files = all_files()
    if args.check:
        problems = differences(files)
        for problem in problems:
            print(f"out of date: {problem}")
        return 1 if problems else 0
    written = 0
    for path, data in files.items():
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written += 1
    print(f"{len(files)} files, {written} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())

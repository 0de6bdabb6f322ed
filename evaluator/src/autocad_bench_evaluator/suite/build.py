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
from collections.abc import Callable, Sequence
from pathlib import Path

from PIL import Image, ImageDraw

from autocad_bench.tasks import TaskSpec
from autocad_bench_evaluator.metadata import DrawingMetadata, canonical_json, read_drawing
from autocad_bench_evaluator.render import png_bytes, render_png
from autocad_bench_evaluator.suite.definitions import DIFFICULTIES, SKILLS, TIERS, TaskDefinition
from autocad_bench_evaluator.suite.drawing import document_bytes
from autocad_bench_evaluator.suite.families import default_instances
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
    tasks = default_instances()

    def ids(keep: Callable[[TaskDefinition], bool]) -> tuple[str, ...]:
        return tuple(t.task_id for t in tasks if keep(t))

    def having(attribute: str, value: object) -> tuple[str, ...]:
        return tuple(t.task_id for t in tasks if getattr(t, attribute) == value)

    entries = {
        "smoke": NamedSuite(description="Three quick LibreCAD tasks for end-to-end checks.", tasks=SMOKE),
        "default": NamedSuite(description="Every instance of the default suite.", tasks=ids(lambda t: True)),
        "librecad-2d": NamedSuite(
            description="Every instance that runs on LibreCAD, in suite order.",
            tasks=ids(lambda t: "librecad" in t.apps),
        ),
        "autocad-full": NamedSuite(
            description="Every instance of the suite (AutoCAD runs them all).", tasks=ids(lambda t: "autocad" in t.apps)
        ),
        "dev": NamedSuite(
            description="The public development split (prompt work).", tasks=ids(lambda t: t.split == "dev")
        ),
        "test": NamedSuite(
            description="The test split (report results on it).", tasks=ids(lambda t: t.split == "test")
        ),
        "original": NamedSuite(
            description="The 27 tasks of the first suite (fixed instances, comparable with old results).",
            tasks=ids(lambda t: t.seed is None),
        ),
    }
    for skill in SKILLS:
        entries[f"skill-{skill}"] = NamedSuite(description=f"Every {skill} instance.", tasks=having("skill", skill))
    for level in DIFFICULTIES:
        entries[f"difficulty-{level}"] = NamedSuite(
            description=f"Every {level} instance (tier from the reference solution's size).",
            tasks=having("difficulty", level),
        )
    for tier in TIERS:
        entries[f"tier-{tier}"] = NamedSuite(
            description=f"The {tier} tier of the original tasks.", tasks=having("tier", tier)
        )
    return SuitesFile(suites=entries)


def json_text(value: object) -> str:
    """``value`` as JSON indented by two spaces, ending in a newline: the layout of ``task.json`` and suite files."""
    return json.dumps(value, indent=2) + "\n"


def task_spec(task: TaskDefinition) -> TaskSpec:
    """The core ``task.json`` contents of ``task``, always in millimetres; family fields stay empty outside a family."""
    return TaskSpec(
        task_id=task.task_id,
        title=task.title,
        prompt=task.prompt,
        units="millimeters",
        tier=task.tier,
        apps=tuple(task.apps),
        skill=task.skill,
        family=task.family or None,
        family_version=task.family_version if task.family else None,
        seed=task.seed,
        difficulty=task.difficulty,
        split=task.split,
    )


def gold_metadata(task: TaskDefinition) -> DrawingMetadata:
    """The gold drawing's metadata, read by the evaluator exactly as the gold cache reads it."""
    spec = task.scoring_spec()
    with tempfile.TemporaryDirectory(prefix="autocad-bench-gold-") as tmp:
        path = generate_gold(task, Path(tmp))
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
    """The image written as ``reference.png``: the plan render of the gold, or an isometric wireframe for 3D tasks.

    Raises ``RuntimeError`` when the gold does not read as a valid drawing or a 3D task has no wireframe.
    """
    if task.tier == "3d":
        return isometric_png(task)
    return render_png(gold_metadata(task))


def task_files(task: TaskDefinition) -> dict[str, bytes]:
    """Every file of the task folder, by name."""
    spec = task_spec(task)
    files: dict[str, bytes] = {
        "task.json": json_text(spec.model_dump(mode="json")).encode(),
        spec.template: document_bytes(template_document(task)),
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


DOCS = Path(__file__).resolve().parents[4] / "docs" / "tasks.md"
"""docs/tasks.md in a checkout (absent in an installed wheel: then the table is not written)."""
FAMILY_MARKERS = ("<!-- family-table:start -->", "<!-- family-table:end -->")


def family_table() -> str:
    """The markdown table of every family: skill, version, fixed and default instances, apps."""
    from autocad_bench_evaluator.suite.families import families

    tasks = default_instances()
    lines = [
        "| family | skill | version | fixed instances | generated (default suite) | easy / medium / hard | apps |",
        "|---|---|---|---|---|---|---|",
    ]
    for fam in families():
        mine = [t for t in tasks if t.family == fam.family_id]
        levels = " / ".join(str(sum(t.difficulty == d for t in mine)) for d in DIFFICULTIES)
        fixed = ", ".join(t.task_id for t in fam.fixed) or "-"
        lines.append(
            f"| {fam.family_id} | {fam.skill} | {fam.version} | {fixed} | {fam.default_count} | {levels} | "
            f"{', '.join(fam.apps)} |"
        )
    librecad = sum("librecad" in t.apps for t in tasks)
    summary = (
        f"{len(tasks)} instances from {len(families())} families ({librecad} run on LibreCAD); by skill: "
        + ", ".join(f"{skill} {sum(t.skill == skill for t in tasks)}" for skill in SKILLS)
        + "; by split: "
        + ", ".join(f"{split} {sum(t.split == split for t in tasks)}" for split in ("dev", "test"))
        + "."
    )
    return summary + "\n\n" + "\n".join(lines) + "\n"


def docs_with_family_table(text: str) -> str:
    """``text`` (docs/tasks.md) with the family table between its markers replaced."""
    start, end = FAMILY_MARKERS
    head, found, rest = text.partition(start)
    if not found or end not in rest:
        raise ValueError(f"{DOCS}: the markers {start} ... {end} are missing")
    return head + start + "\n" + family_table() + end + rest.split(end, 1)[1]


def all_files() -> dict[Path, bytes]:
    """Every generated file of the suite, by absolute path."""
    files: dict[Path, bytes] = {}
    for task in default_instances():
        for name, data in task_files(task).items():
            files[TASKS_DIR / task.task_id / name] = data
    named = suite_definitions()
    files[SUITES_FILE] = json_text(named.model_dump(mode="json")).encode()
    for name, entry in named.suites.items():
        files[SUITE_FILES_DIR / f"{name}.json"] = json_text({"name": name, "tasks": list(entry.tasks)}).encode()
    if DOCS.is_file():
        files[DOCS] = docs_with_family_table(DOCS.read_text()).encode()
    return files


def differences(files: dict[Path, bytes]) -> list[str]:
    """Generated files that are missing or differ on disk, plus stray task folders."""
    problems = [str(path) for path, data in files.items() if not path.is_file() or path.read_bytes() != data]
    expected = {task.task_id for task in default_instances()}
    if TASKS_DIR.is_dir():
        problems += [
            f"{d} (no definition)" for d in sorted(TASKS_DIR.iterdir()) if d.is_dir() and d.name not in expected
        ]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Write every generated file that is missing or differs on disk; with ``--check`` only list them.

    Returns the exit status: 1 when ``--check`` finds a difference, else 0.
    """
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

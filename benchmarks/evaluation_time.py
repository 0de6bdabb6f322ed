"""Evaluation time per 2D task: parse + score + render + diff, median over several drawings.

    uv run python benchmarks/evaluation_time.py [--repeat N]

For every 2D task of the suite (``autocad_bench_evaluator.suite``; generated plates when the
suite is not installed) it builds a gold-cache entry, then evaluates several candidates per
task: the gold itself, the gold translated, the gold with one entity removed and the gold
with an extra entity. Each stage is timed in-process (imports and interpreter start-up are
not counted) and the median per task is printed with the peak traced Python memory of one
evaluation and the process's peak RSS. Target: median total <= 1 s per task.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from ezdxf.document import Drawing
from ezdxf.filemanagement import new, readfile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import table  # noqa: E402
from autocad_bench_evaluator.diff import diff_image  # noqa: E402
from autocad_bench_evaluator.gold_cache import build_entry, load_entry  # noqa: E402
from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing  # noqa: E402
from autocad_bench_evaluator.render import (  # noqa: E402
    ink_mask,
    png_bytes,
    render_image,
    translated_extents,
    view_for,
)
from autocad_bench_evaluator.scoring import score_drawing  # noqa: E402
from autocad_bench_evaluator.spec import ScoringSpec  # noqa: E402

VERSION = "bench"


def suite_golds(work: Path) -> list[tuple[str, Path, ScoringSpec]]:
    """(task id, gold DXF, spec) of every 2D suite task, or generated plates without a suite."""
    try:
        from autocad_bench_evaluator.suite import registry
    except ImportError:
        return generated_golds(work)
    out: list[tuple[str, Path, ScoringSpec]] = []
    for task_id in registry.list_tasks():
        spec = registry.definition(task_id).scoring_spec()
        if spec.schema_version != 3:
            continue
        out.append((task_id, registry.generate_gold(task_id, work / "golds" / task_id), spec))
    return out or generated_golds(work)


def generated_golds(work: Path) -> list[tuple[str, Path, ScoringSpec]]:
    out: list[tuple[str, Path, ScoringSpec]] = []
    for holes in (2, 8, 32):
        doc = new("R2010")
        msp = doc.modelspace()
        msp.add_lwpolyline([(0, 0), (200, 0), (200, 100), (0, 100)], close=True)
        for i in range(holes):
            msp.add_circle((10 + (i % 16) * 12, 20 + (i // 16) * 30), 4)
        msp.add_text("PLATE", height=5).set_placement((5, 90))
        path = work / f"plate-{holes}.dxf"
        doc.saveas(path)
        out.append((f"generated-plate-{holes}", path, ScoringSpec(task_id=f"generated-plate-{holes}")))
    return out


def variants(gold: Path, work: Path) -> list[Path]:
    """Candidate drawings derived from the gold: itself, translated, minus one, plus one."""

    def write(name: str, change: Callable[[Drawing], None]) -> Path:
        doc = readfile(str(gold))
        change(doc)
        path = work / f"{gold.parent.name}-{name}.dxf"
        doc.saveas(path)
        return path

    def translate(doc: Drawing) -> None:
        for e in doc.modelspace():
            try:
                e.translate(37.5, -12.25, 0)
            except (AttributeError, NotImplementedError):
                continue

    def drop(doc: Drawing) -> None:
        entities = list(doc.modelspace())
        if entities:
            doc.modelspace().delete_entity(entities[-1])

    def add(doc: Drawing) -> None:
        doc.modelspace().add_circle((1000, 1000), 25)

    return [gold, write("moved", translate), write("minus", drop), write("plus", add)]


def evaluate_once(candidate: Path, gold: DrawingMetadata, spec: ScoringSpec) -> dict[str, float]:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    meta = read_drawing(candidate, spec.schema_version)
    t1 = time.perf_counter()
    assert isinstance(meta, DrawingMetadata), meta
    report = score_drawing(gold, meta, spec, VERSION)
    t2 = time.perf_counter()
    view = view_for([gold.extents, translated_extents(meta, report.translation)])
    gold_image = render_image(gold, view)
    cand_image = render_image(meta, view, translation=report.translation)
    png_bytes(gold_image)
    png_bytes(cand_image)
    t3 = time.perf_counter()
    png_bytes(diff_image(ink_mask(gold_image), ink_mask(cand_image)))
    t4 = time.perf_counter()
    times.update(parse=t1 - t0, score=t2 - t1, render=t3 - t2, diff=t4 - t3, total=t4 - t0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="evaluations per candidate (median taken)")
    args = parser.parse_args()
    rows: list[list[object]] = []
    totals: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acb-eval-bench-") as tmp:
        work = Path(tmp)
        cache = work / "cache"
        for task_id, gold_path, spec in suite_golds(work):
            build_entry(cache, VERSION, gold_path, spec)
            entry = load_entry(cache, VERSION, task_id)
            samples: dict[str, list[float]] = {k: [] for k in ("parse", "score", "render", "diff", "total")}
            candidates = variants(gold_path, work)
            for candidate in candidates:
                for _ in range(args.repeat):
                    for key, value in evaluate_once(candidate, entry.metadata, spec).items():
                        samples[key].append(value)
            tracemalloc.start()
            evaluate_once(candidates[0], entry.metadata, spec)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
            totals.extend(samples["total"])
            entities = len(entry.metadata.model.entities)
            rows.append(
                [
                    task_id,
                    entities,
                    *(f"{med[k]:.1f}" for k in ("parse", "score", "render", "diff", "total")),
                    f"{peak / 2**20:.1f}",
                ]
            )
    print(
        table(
            "Evaluation time per 2D task (ms, median over candidates x repeats)",
            ["task", "entities", "parse", "score", "render", "diff", "total", "peak MiB (traced)"],
            rows,
        )
    )
    overall = statistics.median(totals)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nmedian total over all tasks and drawings: {overall * 1000:.1f} ms (target <= 1000 ms); "
        f"max total {max(totals) * 1000:.1f} ms; process peak RSS {peak_rss:.0f} MiB"
    )
    return 0 if overall <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())

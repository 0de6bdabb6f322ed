"""Validity proof of the LibreCAD suite on parallel desktops: 1 vs N workers, and the full run.

For every LibreCAD task instance the reference solution must score 1.0 and pass, a
``done``-only replay must score 0, and the perturbed solution must score strictly between 0
and 1 (see ``autocad_bench_evaluator.suite.validity``). Each worker is a separate process
with its own Xvfb display, input driver and LibreCAD, reused for all its runs; LibreCAD
restarts on a fresh template copy for every run.

    uv run python benchmarks/suite_validity.py                        # 1 vs N workers, 6-task sample
    uv run python benchmarks/suite_validity.py --sample 6 --workers 2
    uv run python benchmarks/suite_validity.py --all --workers 2      # every instance, table on stdout
    uv run python benchmarks/suite_validity.py --all --update-docs    # ... and rewrite docs/tasks.md

The default mode replays the same sample (the first instance of the first ``--sample``
families, all three variants) with 1 worker and then with ``--workers`` workers, side by side in
one process, and prints the wall times with their ratio; it fails when the two runs disagree
on any outcome. Measured on the 2-core development machine (another engineer's LibreCAD runs
sharing it): the first 15 families (45 runs) took 87.7 s with 1 worker and 52.5 s with 2
(ratio 0.60, 1.67x); the default 6-task sample (18 short runs) 26.4 s and 18.2 s (0.69).

``--all`` runs every instance of ``registry.list_tasks(app="librecad")``. How long it takes:
about 1.3 s of wall time per run with 2 workers on 2 cores. The 23 instances of the first
suite (69 runs, annotation tasks with dialogs included, plus instant load errors for 284
instances whose folders were not built yet) took 88 s with 2 workers, against 212 s on one
desktop before; the rebuilt suite of about 300 instances (900 runs) should therefore take about
20 minutes (not yet run end to end: its task folders were still being written). More workers
than cores do not help (LibreCAD and Xvfb are CPU-bound) and make the fixed dialog waits of
some solutions flaky. Other options (``--json``, ``--markdown``, ``--keep``,
``--run-timeout``) are passed to ``python -m autocad_bench_xvfb.suite_validity``.
Exit status 1 on any unexpected outcome.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import table  # noqa: E402
from autocad_bench_evaluator.suite import registry  # noqa: E402
from autocad_bench_evaluator.suite.validity import (  # noqa: E402
    DEFAULT_WORKERS,
    VARIANTS,
    RunResult,
    per_family,
    run_validity,
)

from autocad_bench_xvfb.suite_validity import LibreCADRig  # noqa: E402
from autocad_bench_xvfb.suite_validity import main as validity_main  # noqa: E402


def outcome(result: RunResult) -> tuple[object, ...]:
    """What must not depend on the number of workers."""
    return (result.task_id, result.variant, result.score, result.passed, result.expected, result.error is None)


def compare(sample: list[str], workers: int) -> int:
    runs = len(sample) * len(VARIANTS)
    measured: dict[int, tuple[float, list[RunResult]]] = {}
    for count in sorted({1, workers}):
        print(f"{runs} runs on {count} worker(s) ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        results = run_validity(sample, VARIANTS, workers=count, rig_factory=LibreCADRig)
        measured[count] = (time.monotonic() - started, results)
    base = measured[1][0]
    rows = []
    for count, (wall, results) in measured.items():
        unexpected = sum(not r.expected for r in results)
        rows.append(
            [count, runs, f"{wall:.1f}", f"{wall / runs:.2f}", f"{wall / base:.2f}", f"{base / wall:.2f}x", unexpected]
        )
    print(
        table(
            f"Suite validity, {len(sample)} tasks x {len(VARIANTS)} variants, wall time by workers"
            f" ({', '.join(sample)})",
            ["workers", "runs", "wall s", "s/run", "ratio to 1", "speed-up", "unexpected"],
            rows,
        )
    )
    same = [outcome(r) for r in measured[1][1]] == [outcome(r) for r in measured[workers][1]]
    print(f"same outcomes with 1 and {workers} workers: {'yes' if same else 'NO'}")
    if not same:
        for one, many in zip(measured[1][1], measured[workers][1], strict=True):
            if outcome(one) != outcome(many):
                print(f"  {one.task_id} {one.variant}: 1 worker {outcome(one)} vs {workers}: {outcome(many)}")
    bad = any(not r.expected for _, results in measured.values() for r in results)
    return 0 if same and not bad else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help=f"parallel desktops (default {DEFAULT_WORKERS})"
    )
    parser.add_argument("--sample", type=int, default=6, help="families in the 1-vs-N sample (default 6)")
    parser.add_argument("--all", action="store_true", help="run every LibreCAD instance with --workers")
    parser.add_argument("--update-docs", action="store_true", help="with --all: rewrite the table in docs/tasks.md")
    args, rest = parser.parse_known_args()
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.update_docs and not args.all:
        parser.error("--update-docs needs --all (the docs table lists every instance)")
    if args.all:
        forwarded = ["--update-docs"] if args.update_docs else ["--tasks", *registry.list_tasks(app="librecad")]
        return validity_main([*forwarded, "--workers", str(args.workers), *rest])
    if rest:
        parser.error(f"unrecognized arguments without --all: {' '.join(rest)}")
    sample = per_family(registry.list_tasks(app="librecad"))[: args.sample]
    return compare(sample, max(args.workers, 1))


if __name__ == "__main__":
    sys.exit(main())

"""Full validity proof of the task suite on a real LibreCAD desktop (writes the table in docs/tasks.md).

For every LibreCAD task: the reference solution must score 1.0 and pass, a ``done``-only
replay must score 0, and the perturbed solution must score strictly between 0 and 1. One
private Xvfb display is reused; LibreCAD restarts on a fresh template copy for every run.

    uv run python benchmarks/suite_validity.py                      # table on stdout
    uv run python benchmarks/suite_validity.py --markdown table.md   # also write the table
    uv run python benchmarks/suite_validity.py --tasks anno-text-title --keep /tmp/attempts

About 3.5 minutes for the 23 LibreCAD tasks (69 runs) on 2 cores; exits 1 on any unexpected
outcome. Options are those of ``python -m autocad_bench_evaluator.suite.validity``.
"""

from __future__ import annotations

import sys

from autocad_bench_evaluator.suite.validity import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

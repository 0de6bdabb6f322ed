"""Every number the harness reports, computed in one place.

- :mod:`~autocad_bench.metrics.samples` reads rollouts as samples and decides which count;
- :mod:`~autocad_bench.metrics.stats` holds pass@k, pass^k, the clustered bootstrap and the
  paired permutation test;
- :mod:`~autocad_bench.metrics.aggregate` turns samples into :class:`GroupMetrics`;
- :mod:`~autocad_bench.metrics.leaderboard` builds model rows over runs (summary, report,
  dashboard and ``leaderboard`` render them);
- :mod:`~autocad_bench.metrics.compare` is the paired comparison behind ``compare``.

The summary, the report, the dashboard and the CLI only render what these return.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autocad_bench.metrics.aggregate import BudgetSuccess, Estimate, GroupMetrics, group_metrics
    from autocad_bench.metrics.compare import Comparison, ComparisonRefused, compare_runs
    from autocad_bench.metrics.conditions import RunConditions
    from autocad_bench.metrics.leaderboard import (
        Leaderboard,
        ModelRow,
        build_leaderboard,
        leaderboard_schema,
        model_rows,
    )
    from autocad_bench.metrics.samples import RunSamples, RunUnreadable, Sample, read_run

# numpy and scipy load only when a metric is computed: the controller, the pilot and the
# configuration import ``metrics.conditions`` and must not pay for them.
_HOMES = {
    "BudgetSuccess": "aggregate", "Estimate": "aggregate", "GroupMetrics": "aggregate", "group_metrics": "aggregate",
    "Comparison": "compare", "ComparisonRefused": "compare", "compare_runs": "compare",
    "RunConditions": "conditions",
    "Leaderboard": "leaderboard", "ModelRow": "leaderboard", "build_leaderboard": "leaderboard",
    "leaderboard_schema": "leaderboard", "model_rows": "leaderboard",
    "RunSamples": "samples", "RunUnreadable": "samples", "Sample": "samples", "read_run": "samples",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "BudgetSuccess",
    "Comparison",
    "ComparisonRefused",
    "Estimate",
    "GroupMetrics",
    "Leaderboard",
    "ModelRow",
    "RunConditions",
    "RunSamples",
    "RunUnreadable",
    "Sample",
    "build_leaderboard",
    "compare_runs",
    "group_metrics",
    "leaderboard_schema",
    "model_rows",
    "read_run",
]

"""The trusted evaluation step of the lifecycle (after the child, outside the model's reach).

No evaluator is installed yet. A batch that asks for evaluation therefore fails before its
desktop starts, with a message that says so, instead of producing unevaluated results that
look complete. :func:`resolve_evaluator` is the single place a future evaluator plugs in:
return a callable that scores ``<rollout>/attempt.dxf`` into ``<rollout>/evaluation/``
and returns an exit code (0 when evaluation succeeded).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autocad_bench.infrastructure import EvaluationArguments
from autocad_bench_xvfb.logs import LifecycleLog

Evaluator = Callable[[EvaluationArguments, Path, LifecycleLog], int]
"""``evaluator(arguments, rollout_dir, log) -> exit code``; runs after the desktop is torn down."""


class EvaluationUnavailable(Exception):
    """Evaluation was requested but cannot run."""


NO_EVALUATOR = "evaluation requested but no evaluator is installed"


def resolve_evaluator(arguments: EvaluationArguments) -> Evaluator | None:
    """The evaluator for ``arguments``; None when evaluation is disabled.

    Raises :class:`EvaluationUnavailable` when it is enabled, since none exists yet.
    """
    if not arguments.enabled:
        return None
    raise EvaluationUnavailable(
        f"{NO_EVALUATOR} (task {arguments.task_id}); set \"evaluation\": {{\"enabled\": false}} "
        "for a deliberately unevaluated run"
    )

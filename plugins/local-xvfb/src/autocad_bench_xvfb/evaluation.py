"""The trusted evaluation step of the lifecycle (after the child, outside the model's reach).

The evaluator runs on this machine against the rollout directory, after the desktop is torn
down: unlike a licensed Windows host there is nothing to keep the desktop alive for, and
the drawing has already been fetched into ``<rollout>/attempt.dxf``. The vision judge's key
comes from the lifecycle's environment, never from the child's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from autocad_bench.errors import PluginError
from autocad_bench.evaluation import evaluate_rollout
from autocad_bench.evaluators import select_evaluator
from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench_xvfb.logs import LifecycleLog

Evaluator = Callable[[LifecycleLog], int]
"""``evaluator(log) -> exit code`` (0 when evaluation worked); runs after teardown."""


class EvaluationUnavailable(Exception):
    """Evaluation was requested but cannot run."""


NO_EVALUATOR = "evaluation requested but no evaluator is installed"


def resolve_evaluator(request: RolloutLaunchRequest, environ: Mapping[str, str] | None = None) -> Evaluator | None:
    """The evaluation step for ``request``; None when evaluation is disabled.

    Raises :class:`EvaluationUnavailable` before any desktop starts when evaluation is
    enabled but the evaluator distribution is not installed.
    """
    if not request.evaluation.enabled:
        return None
    try:
        select_evaluator(request.evaluation.evaluator)
    except PluginError as error:
        raise EvaluationUnavailable(f"{NO_EVALUATOR}: {error}; set \"evaluation\": "
                                    "{\"enabled\": false} for a deliberately unevaluated run") from None
    env = dict(os.environ if environ is None else environ)

    def run(log: LifecycleLog) -> int:
        code = evaluate_rollout(request, env)
        log.line(f"rollout {request.rollout_id}: evaluation exited with code {code}")
        return code

    return run

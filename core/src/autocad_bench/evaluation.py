"""The trusted evaluation stage that a backend runs after the child harness exits.

Backends call :func:`evaluate_rollout` on the machine that holds the checkpointed drawing,
before cleanup. It calls the evaluator plugin the configuration names (core never imports
one: see :mod:`autocad_bench.evaluators`) against the pinned gold cache, which writes
``evaluation/`` into the rollout directory. The vision judge's credential is read from the
*backend's* environment by name (``request.evaluation.environment_names``); the model child
never had it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from pydantic import SecretStr

from autocad_bench.errors import PluginError
from autocad_bench.evaluators import DrawingEvaluationRequest, select_evaluator
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.trace import utcnow
from autocad_bench.infrastructure.models import RolloutLaunchRequest
from autocad_bench.plugins.host import PluginHost
from autocad_bench.storage import atomic_write_json

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EVALUATOR_HINT = 'pip install "autocad-bench[evaluator]"'
"""Kept for backends that name the extra in their own messages."""


def evaluate_rollout(request: RolloutLaunchRequest, environ: Mapping[str, str],
                     host: PluginHost | None = None) -> int:
    """Evaluate the rollout in ``request.output_dir``; 0 when the evaluation itself worked.

    An invalid or missing drawing is a valid evaluation (score 0, exit 0); a missing
    evaluator, a broken gold cache or a failing judge is an evaluation failure (exit 1), so
    the sandbox exits nonzero as the contract requires. Never raises for those. The
    evaluator is ``request.evaluation.evaluator``, found through ``host`` (default: a host
    over the installed plugins and in-process registrations).
    """
    arguments = request.evaluation
    if not arguments.enabled:
        return EXIT_OK
    paths = RolloutPaths(request.output_dir)
    if was_interrupted(paths):
        # A drawing the operator's stop cut short measures nothing: it is never scored.
        paths.evaluation.mkdir(parents=True, exist_ok=True)
        atomic_write_json(paths.evaluation / "status.json", {
            "state": "skipped", "reason": "the rollout was interrupted by the operator; it is not scored",
            "updated_at": utcnow().isoformat()})
        return EXIT_OK
    try:
        evaluator = select_evaluator(arguments.evaluator, host)
    except PluginError as error:
        return _failed(paths, f"evaluation is enabled but {error}")
    if not arguments.gold_cache or not arguments.evaluator_version:
        return _failed(paths, "evaluation needs evaluation.gold_cache and evaluation.evaluator_version")
    candidate = next((paths.drawing(s) for s in (".dwg", ".dxf") if paths.drawing(s).exists()), None)
    key = None
    if arguments.judge_model:
        name = arguments.environment_names[0] if arguments.environment_names else "OPENAI_API_KEY"
        key = environ.get(name, "")
        if not key:
            return _failed(paths, f"the vision judge needs {name} in the evaluation environment")
    prompt = None
    try:
        from autocad_bench.harness.assignment import PilotAssignment

        prompt = PilotAssignment.model_validate_json(paths.assignment.read_bytes()).task_prompt
    except (OSError, ValueError):
        pass
    code: int = evaluator.call("evaluate_drawing", request=DrawingEvaluationRequest(
        candidate=candidate, task_id=arguments.task_id, gold_cache=Path(arguments.gold_cache),
        evaluator_version=arguments.evaluator_version, output_dir=paths.evaluation, task_prompt=prompt,
        judge_model=arguments.judge_model, judge_api_key=SecretStr(key) if key else None))
    log.info("evaluation of %s: exit code %s", request.rollout_id, code)
    return code


def was_interrupted(paths: RolloutPaths) -> bool:
    """Whether the rollout's result says an operator's stop cut it short (never scored)."""
    from autocad_bench.harness.records import FailureClass, RolloutResult

    try:
        result = RolloutResult.model_validate_json(paths.result.read_bytes())
    except (OSError, ValueError):
        return False
    return result.failure_class == FailureClass.INTERRUPTED


def _failed(paths: RolloutPaths, message: str) -> int:
    paths.evaluation.mkdir(parents=True, exist_ok=True)
    atomic_write_json(paths.evaluation / "status.json",
                      {"state": "failed", "error": message, "updated_at": utcnow().isoformat()})
    return EXIT_FAILED

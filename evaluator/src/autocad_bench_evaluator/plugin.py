"""The ``standard`` evaluator plugin: how core reaches this distribution without importing it.

Published in the entry-point group ``autocad_bench.evaluators``. Core's evaluation stage,
admission's gold-cache check and the ``autocad-bench tasks`` command call these hooks;
the scoring itself is :func:`autocad_bench_evaluator.evaluate.evaluate`.
"""

from __future__ import annotations

from typing import ClassVar

import click

from autocad_bench.evaluators import DrawingEvaluationRequest, EvaluatorPlugin, GoldCacheCheckRequest


class StandardEvaluator(EvaluatorPlugin):
    """Deterministic DXF scoring against the pinned gold cache, with the optional vision judge."""

    name: ClassVar[str] = "standard"

    def evaluate_drawing(self, request: DrawingEvaluationRequest) -> int:
        """Score ``request.candidate`` into ``request.output_dir``; the exit code of the outcome."""
        from autocad_bench_evaluator.evaluate import evaluate
        from autocad_bench_evaluator.judge import JudgeSettings, VisionJudge

        judge = None
        if request.judge_model and request.judge_api_key is not None:
            judge = VisionJudge(JudgeSettings(model=request.judge_model), request.judge_api_key.get_secret_value())
        outcome = evaluate(request.candidate, request.task_id, request.gold_cache, request.evaluator_version,
                           request.output_dir, judge=judge, task_prompt=request.task_prompt)
        return outcome.exit_code

    def check_gold_cache(self, request: GoldCacheCheckRequest) -> list[str]:
        """One problem string per missing, altered or foreign gold-cache entry."""
        from autocad_bench_evaluator.gold_cache import check_gold_cache

        return check_gold_cache(request.root, request.evaluator_version, request.task_ids)

    def evaluator_commands(self) -> list[click.Command]:
        """``autocad-bench tasks``: list, show, validate and render the task suite."""
        from autocad_bench_evaluator.tasks_cli import tasks_group

        return [tasks_group]

"""autocad-bench evaluator: the trusted post-rollout scoring of attempt drawings.

Modules (import what you need; nothing heavy is imported here):

* :mod:`~autocad_bench_evaluator.spec`: ``scoring.json`` (:class:`ScoringSpec`) and the gold
  manifest models;
* :mod:`~autocad_bench_evaluator.metadata`: :func:`read_drawing` (DXF via ezdxf, DWG via the
  AutoCAD adapter export or a converter), :class:`DrawingMetadata`, :class:`InvalidDrawing`;
* :mod:`~autocad_bench_evaluator.scoring`: :func:`score_drawing` (deterministic score);
* :mod:`~autocad_bench_evaluator.render` and :mod:`~autocad_bench_evaluator.diff`: renders;
* :mod:`~autocad_bench_evaluator.judge`: the OpenAI vision judge (a separate score);
* :mod:`~autocad_bench_evaluator.gold_cache`: :func:`build_entry`, :func:`load_entry`,
  :func:`check_gold_cache` (admission);
* :mod:`~autocad_bench_evaluator.evaluate`: :func:`evaluate` / :func:`evaluate_rollout`;
* :mod:`~autocad_bench_evaluator.cli`: the ``autocad-bench-evaluate`` command;
* :mod:`~autocad_bench_evaluator.suite`: the task suite.
"""

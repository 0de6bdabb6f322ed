"""autocad-bench evaluator."""

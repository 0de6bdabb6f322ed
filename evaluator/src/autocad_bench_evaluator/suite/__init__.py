"""The autocad-bench task suite: task folders, gold generators, named suites, reference solutions.

Use :mod:`autocad_bench_evaluator.suite.registry` (re-exported here): ``list_tasks()``,
``load(task_id)``, ``generate_gold(task_id)``, ``suites()``, ``resolve_suite(name)``;
``TASKS_DIR`` is a core ``tasks_dir``.
"""

from autocad_bench_evaluator.suite.registry import (
    SUITES_FILE,
    TASKS_DIR,
    SuiteError,
    SuiteTask,
    generate_gold,
    gold_bytes,
    list_tasks,
    load,
    resolve_suite,
    suites,
    write_suite_file,
)

__all__ = [
    "SUITES_FILE",
    "TASKS_DIR",
    "SuiteError",
    "SuiteTask",
    "generate_gold",
    "gold_bytes",
    "list_tasks",
    "load",
    "resolve_suite",
    "suites",
    "write_suite_file",
]

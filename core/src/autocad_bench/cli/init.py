"""``autocad-bench init DIR``: write a ready-to-run example batch into a directory.

The configuration names everything it needs by name (the packaged suite, each task's own
reference solution), so it runs from any directory once the wheels are installed: no path
into site-packages, no checkout. The command prints the batch command that runs it.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import click

from autocad_bench.admission.suites import resolve_task_suite
from autocad_bench.cli.errors import report_user_errors
from autocad_bench.config.loading import parse_config_text
from autocad_bench.config.packs import find_suite, is_suite_name
from autocad_bench.errors import ConfigError, Problem, UserError

CONFIG_NAME = "batch.json"
REFERENCE_SCRIPT = "solution.librecad.jsonl"
"""The reference solution every LibreCAD task ships, replayed by the scripted provider."""


def example_config(suite: str, tasks: list[str], *, name: str, max_concurrency: int = 2) -> dict[str, Any]:
    """The example batch: every task of ``suite`` replayed from its reference solution by the
    scripted provider on local LibreCAD desktops, scored by the packaged gold cache.

    ``tasks`` is the suite's task list (admission requires the suite's order).
    """
    return {
        "name": name,
        "expected_rollouts": len(tasks),
        "max_concurrency": max_concurrency,
        "execution_mode": "shared",
        "task_suite": suite,
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11", "settings": {}},
        "evaluation": {"enabled": True},
        "rollouts": [
            {"rollout_id": f"reference-{task}", "task_id": task, "provider": "scripted",
             "model": "reference-solution", "provider_options": {"task_script": REFERENCE_SCRIPT}}
            for task in tasks
        ],
    }


def render(config: dict[str, Any]) -> str:
    """The configuration as written to disk: one rollout per line, so diffs stay readable."""
    head = {k: v for k, v in config.items() if k != "rollouts"}
    lines = json.dumps(head, indent=2).rstrip("}").rstrip()
    rollouts = ",\n".join(f"    {json.dumps(r)}" for r in config["rollouts"])
    return f"{lines},\n  \"rollouts\": [\n{rollouts}\n  ]\n}}\n"


def write_example(directory: Path, suite: str = "smoke") -> Path:
    """Write ``directory/batch.json`` for ``suite``; return its path.

    Raises :class:`UserError` when the suite is not installed, a task lacks a LibreCAD
    reference solution, or ``batch.json`` already exists (nothing is overwritten; the
    directory is created when missing, and nothing is written on any error).
    """
    location = f"--suite {suite}"
    if not is_suite_name(suite):
        raise UserError([Problem(location, "give the name of an installed suite, such as smoke")])
    try:
        pack, suite_file = find_suite(suite, location)
        tasks = resolve_task_suite(str(suite_file), suite_file.parent, location)
    except ConfigError as error:
        raise UserError(error.problems) from None
    missing = [t for t in tasks if not (pack.tasks_dir / t / REFERENCE_SCRIPT).is_file()]
    if missing:
        raise UserError([Problem(location, f"these tasks have no LibreCAD reference solution ({REFERENCE_SCRIPT}) "
                                           f"to replay: {', '.join(missing)}; choose a LibreCAD suite")])
    target = directory / CONFIG_NAME
    if target.exists():
        raise UserError([Problem(str(target), "already exists; init never overwrites a file (choose a new directory)")])
    if directory.exists() and not directory.is_dir():
        raise UserError([Problem(str(directory), "exists and is not a directory")])
    text = render(example_config(suite, tasks, name=f"example-{suite}"))
    parse_config_text(text, str(target))  # the written file must load exactly as the user will load it
    directory.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{CONFIG_NAME}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)
    return target


@click.command(name="init")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--suite", default="smoke", show_default=True,
              help="The packaged LibreCAD suite whose reference solutions the example replays.")
@report_user_errors
def init_command(directory: Path, suite: str) -> None:
    """Write DIRECTORY/batch.json, a scored example batch on local LibreCAD desktops.

    It replays each task's reference solution (every task should score 1.0), needs no API key,
    and names the suite, tasks and gold cache by name, so it runs from anywhere. Needs the
    evaluator (the task suite) installed: pip install "autocad-bench[xvfb,evaluator]".
    """
    target = write_example(directory, suite)
    runs = directory / "runs"
    command = ["autocad-bench-batch", "--config", str(target), "--execute", "--output-dir", str(runs / "first")]
    click.echo(f"wrote {target}: the {suite} suite's reference solutions on local LibreCAD desktops")
    click.echo("plan it (read-only):  " + shlex.join(["autocad-bench-batch", "--config", str(target)]))
    click.echo("run it:               " + shlex.join(command))

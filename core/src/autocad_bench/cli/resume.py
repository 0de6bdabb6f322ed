"""``autocad-bench-resume``: plan (default, read-only) or continue an interrupted batch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from autocad_bench.cli.errors import report_user_errors
from autocad_bench.controller.resume import execute_resume, plan_resume
from autocad_bench.plugins import PluginHost
from autocad_bench.retry.reporting import install_retry_reporting


@click.command(name="resume")
@click.argument("batch_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--execute", is_flag=True, help="Continue the plan (default: print it, read-only).")
@report_user_errors
def resume_command(batch_dir: Path, execute: bool) -> None:
    """Plan or continue the interrupted batch in BATCH_DIR.

    The plan lists every assignment as complete, failed, evaluate, resume (reconnect and
    continue from its checkpoint), restart (interrupted, or launched without reaching the
    model: runs again as its next attempt), start (never launched) or lost (no reconnectable
    worker: execute closes it as failed with ``infrastructure_lost`` and the spend its
    checkpoint recorded). Each trial of a repeated assignment is planned on its own, under
    its trial rollout id. The plan exits 0 when it can be executed; execute exits 0 when
    every rollout completed.
    """
    install_retry_reporting()
    environ = dict(os.environ)
    host = PluginHost(environ=environ)
    plan = plan_resume(batch_dir, host)
    click.echo(json.dumps(plan.model_dump(mode="json"), indent=2))
    if not execute:
        # A lost rollout is no reason to stop: execute closes it (infrastructure_lost).
        sys.exit(0)
    sys.exit(execute_resume(plan, host, environ))


def main() -> None:
    """Entry point of the ``autocad-bench-resume`` console script (exits with the command's code)."""
    resume_command(prog_name="autocad-bench-resume")

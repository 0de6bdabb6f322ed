"""``autocad-bench``: the command group."""

from __future__ import annotations

import json
import os

import click

from autocad_bench import __version__
from autocad_bench.cli.batch import batch_command
from autocad_bench.cli.metrics import compare_command, leaderboard_command, metrics_command
from autocad_bench.cli.models import models_command
from autocad_bench.cli.reap import reap_command
from autocad_bench.cli.resume import resume_command
from autocad_bench.dashboard.cli import dashboard_command, report_command
from autocad_bench.plugins import PluginHost
from autocad_bench.plugins.kinds import KINDS


@click.group()
@click.version_option(__version__, prog_name="autocad-bench")
def cli() -> None:
    """autocad-bench: measure how well LLM computer-use agents operate AutoCAD."""


cli.add_command(batch_command)
cli.add_command(resume_command)
cli.add_command(models_command)
cli.add_command(dashboard_command)
cli.add_command(report_command)
cli.add_command(reap_command)
cli.add_command(metrics_command)
cli.add_command(compare_command)
cli.add_command(leaderboard_command)


class _LazyTasks(click.Group):
    """``tasks`` lives in the evaluator distribution; load it only when it is used."""

    def _real(self) -> click.Group | None:
        try:
            from autocad_bench_evaluator.tasks_cli import tasks_group
        except ImportError:
            return None
        return tasks_group

    def list_commands(self, ctx: click.Context) -> list[str]:
        real = self._real()
        return real.list_commands(ctx) if real else []

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        real = self._real()
        if real is None:
            raise click.UsageError('the task suite is in the evaluator: pip install "autocad-bench[evaluator]"')
        return real.get_command(ctx, name)


cli.add_command(_LazyTasks(name="tasks", help="The task suite: list, show, validate, render (needs the evaluator)."))


@cli.command()
def plugins() -> None:
    """List the installed backends, providers and observers as JSON (backends and providers are not imported)."""
    host = PluginHost(environ=dict(os.environ))
    click.echo(json.dumps({kind: host.installed_names(kind) for kind in KINDS}, indent=2))


def main() -> None:
    """Console-script entry point of ``autocad-bench``."""
    cli(prog_name="autocad-bench")

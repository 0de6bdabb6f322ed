"""``autocad-bench``: the command group."""

from __future__ import annotations

import json
import os
from importlib.metadata import entry_points
from typing import Any

import click

from autocad_bench import __version__
from autocad_bench.cli.batch import batch_command
from autocad_bench.cli.init import init_command
from autocad_bench.cli.metrics import compare_command, leaderboard_command, metrics_command
from autocad_bench.cli.models import models_command
from autocad_bench.cli.reap import reap_command
from autocad_bench.cli.resume import resume_command
from autocad_bench.config.packs import TASK_PACK_GROUP
from autocad_bench.dashboard.cli import dashboard_command, report_command
from autocad_bench.errors import PluginError, missing_extra_message
from autocad_bench.evaluators import DEFAULT_EVALUATOR, select_evaluator
from autocad_bench.hookspecs import RECOVERY_HOOKS
from autocad_bench.plugins import PluginHost
from autocad_bench.plugins.kinds import KINDS
from autocad_bench.providers.options import tool_modes_of


@click.group()
@click.version_option(__version__, prog_name="autocad-bench")
def cli() -> None:
    """autocad-bench: measure how well LLM computer-use agents operate AutoCAD."""


cli.add_command(batch_command)
cli.add_command(init_command)
cli.add_command(resume_command)
cli.add_command(models_command)
cli.add_command(dashboard_command)
cli.add_command(report_command)
cli.add_command(reap_command)
cli.add_command(metrics_command)
cli.add_command(compare_command)
cli.add_command(leaderboard_command)


class _LazyTasks(click.Group):
    """``tasks`` comes from the evaluator plugin (core never imports it); loaded only when used."""

    def _real(self) -> click.Group | None:
        try:
            evaluator = select_evaluator(DEFAULT_EVALUATOR)
        except PluginError:
            return None
        commands: list[click.Command] = evaluator.call("evaluator_commands")
        return next((c for c in commands if c.name == "tasks" and isinstance(c, click.Group)), None)

    def list_commands(self, ctx: click.Context) -> list[str]:
        real = self._real()
        return real.list_commands(ctx) if real else []

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        real = self._real()
        if real is None:
            raise click.UsageError(missing_extra_message("the task suite (autocad-bench-evaluator)", "evaluator"))
        return real.get_command(ctx, name)


cli.add_command(_LazyTasks(name="tasks", help="The task suite: list, show, validate, render (needs the evaluator)."))


@cli.command()
@click.option("--capabilities", is_flag=True,
              help="Also load each backend and provider and say what it supports: recovery (resume after a "
                   "controller crash) for backends, tool modes for providers. Loading imports their SDKs.")
def plugins(capabilities: bool) -> None:
    """List the installed backends, providers, evaluators, observers and task packs as JSON.

    Without ``--capabilities`` nothing is imported (a broken plugin cannot hide the list);
    with it, each backend and provider is loaded and a plugin that fails to load is listed
    with its error instead of its capabilities.
    """
    host = PluginHost(environ=dict(os.environ))
    listing: dict[str, Any] = {kind: host.installed_names(kind) for kind in KINDS}
    # Task packs are data, named by entry point (nothing imported): what "task_suite" names resolve in.
    listing["task_packs"] = sorted({point.name for point in entry_points(group=TASK_PACK_GROUP)})
    if capabilities:
        listing["infrastructure"] = [_capabilities(host, "infrastructure", n) for n in listing["infrastructure"]]
        listing["providers"] = [_capabilities(host, "providers", n) for n in listing["providers"]]
    click.echo(json.dumps(listing, indent=2))


def _capabilities(host: PluginHost, kind: str, name: str) -> dict[str, Any]:
    try:
        handle = host.infrastructure(name) if kind == "infrastructure" else host.provider(name)
    except PluginError as error:
        return {"name": name, "error": str(error)}
    if kind == "infrastructure":
        return {"name": name, "recovery": all(handle.implements(hook) for hook in RECOVERY_HOOKS)}
    return {"name": name, "tool_modes": sorted(tool_modes_of(handle.plugin))}


def main() -> None:
    """Console-script entry point of ``autocad-bench``."""
    cli(prog_name="autocad-bench")

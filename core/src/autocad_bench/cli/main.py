"""``autocad-bench``: the command group."""

from __future__ import annotations

import json
import os

import click

from autocad_bench import __version__
from autocad_bench.cli.batch import batch_command
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
cli.add_command(dashboard_command)
cli.add_command(report_command)
cli.add_command(reap_command)


@cli.command()
def plugins() -> None:
    """List the installed backends, providers and observers as JSON (backends and providers are not imported)."""
    host = PluginHost(environ=dict(os.environ))
    click.echo(json.dumps({kind: host.installed_names(kind) for kind in KINDS}, indent=2))


def main() -> None:
    """Console-script entry point of ``autocad-bench``."""
    cli(prog_name="autocad-bench")

"""``autocad-bench dashboard`` and ``autocad-bench report``."""

from __future__ import annotations

from pathlib import Path

import click

from autocad_bench.cli.errors import report_user_errors
from autocad_bench.errors import UserError


@click.command(name="dashboard")
@click.argument("runs_root", required=False, default=".",
                type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; anything else exposes the traces on the network).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@report_user_errors
def dashboard_command(runs_root: Path, host: str, port: int) -> None:
    """Serve a read-only dashboard of every batch under RUNS_ROOT (default: the current directory)."""
    from autocad_bench.dashboard.app import is_loopback_bind, serve

    if not is_loopback_bind(host):
        click.echo(f"warning: binding {host}: anyone who can reach this address can read the traces", err=True)
    click.echo(f"autocad-bench dashboard: http://{host if ':' not in host else f'[{host}]'}:{port}/ "
               f"(runs root {runs_root.resolve()}; Ctrl-C stops)", err=True)
    serve(runs_root, host=host, port=port)


@click.command(name="report")
@click.argument("batch_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write (self-contained: charts and images are embedded).")
@report_user_errors
def report_command(batch_dir: Path, out: Path) -> None:
    """Write one self-contained HTML report of the batch in BATCH_DIR."""
    from autocad_bench.dashboard.report import write_report
    from autocad_bench.harness.layout import BatchPaths

    if not BatchPaths(batch_dir).state.is_file():
        raise UserError(f"{batch_dir}: no batch-state.json (not a batch output directory)")
    path = write_report(batch_dir, out)
    click.echo(str(path))

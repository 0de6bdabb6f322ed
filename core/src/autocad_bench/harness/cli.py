"""``autocad-bench-pilot``: run or resume one rollout (the infrastructure-neutral child)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from autocad_bench.cli.errors import report_user_errors
from autocad_bench.harness.pilot import main_sync


@click.command()
@click.argument("rollout_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@report_user_errors
def pilot_command(rollout_dir: Path) -> None:
    """Run the model loop of the rollout in ROLLOUT_DIR against the broker named by
    AUTOCAD_BENCH_BROKER_URL / AUTOCAD_BENCH_BROKER_TOKEN. Exit 0 completed, 1 failed."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main_sync(rollout_dir))


def main() -> None:
    """Entry point of the ``autocad-bench-pilot`` console script (exits with the command's code)."""
    pilot_command(prog_name="autocad-bench-pilot")

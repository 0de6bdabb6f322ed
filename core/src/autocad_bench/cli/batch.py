"""``autocad-bench-batch``: plan (default, read-only) or execute a benchmark batch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from autocad_bench.admission import AdmissionOptions, admit
from autocad_bench.cli.errors import report_user_errors
from autocad_bench.config import effective_budgets, load_config
from autocad_bench.config.rerun import select_failed
from autocad_bench.errors import UserError
from autocad_bench.harness.records import FailureClass
from autocad_bench.plugins import PluginHost
from autocad_bench.retry.reporting import install_retry_reporting


@click.command(name="batch")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Batch configuration JSON file.")
@click.option("--execute", is_flag=True, help="Launch the batch (default: plan only, read-only).")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="New directory for the batch output (execute mode; must not exist).")
@click.option("--allow-partial", is_flag=True,
              help="Accept fewer enabled rollouts than expected_rollouts (deliberately smaller runs).")
@click.option("--skip-direct-model-check", is_flag=True,
              help="Plan mode only: do not query provider model catalogs.")
@click.option("--max-cost-usd", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Per-rollout token cost cap (overrides AUTOCAD_BENCH_MAX_COST_USD).")
@click.option("--max-duration-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Per-rollout wall-clock cap in seconds (overrides AUTOCAD_BENCH_MAX_DURATION_S).")
@click.option("--max-turns", type=click.IntRange(min=1), default=None, help="Per-rollout model-turn cap.")
@click.option("--rerun-failed-from", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="An earlier batch output: run only its rollouts (per trial) that failed with a "
                   "--failure-class, under the same rollout ids.")
@click.option("--failure-class", "failure_classes", multiple=True,
              type=click.Choice([c.value for c in FailureClass]),
              help="With --rerun-failed-from: the failure classes to rerun (repeatable).")
@report_user_errors
def batch_command(
    config_path: Path,
    execute: bool,
    output_dir: Path | None,
    allow_partial: bool,
    skip_direct_model_check: bool,
    max_cost_usd: float | None,
    max_duration_s: float | None,
    max_turns: int | None,
    rerun_failed_from: Path | None,
    failure_classes: tuple[str, ...],
) -> None:
    """Check a batch configuration and, with --execute, run it.

    Plan mode prints one JSON report and exits 0 when every check passes, 1 when a check
    fails, 2 for usage or configuration errors. Execute mode runs the same checks and
    starts nothing (and creates nothing) unless all of them pass.
    """
    install_retry_reporting()
    if execute and output_dir is None:
        raise click.UsageError("--execute needs --output-dir (a new directory)")
    if not execute and output_dir is not None:
        raise click.UsageError("--output-dir is only used with --execute")
    if execute and skip_direct_model_check:
        raise click.UsageError("--skip-direct-model-check is for plan mode; execute mode always checks models")
    if output_dir is not None and output_dir.exists():
        raise UserError(f"--output-dir {output_dir}: already exists; choose a new directory "
                        "(interrupted batches continue with autocad-bench-resume)")
    if (rerun_failed_from is None) != (not failure_classes):
        raise click.UsageError("--rerun-failed-from and --failure-class go together")
    environ = dict(os.environ)
    loaded = load_config(config_path)
    if rerun_failed_from is not None:
        loaded = select_failed(loaded, rerun_failed_from, set(failure_classes))
        allow_partial = True
    budgets = effective_budgets(loaded.config.budgets, environ=environ, max_cost_usd=max_cost_usd,
                                max_duration_s=max_duration_s, max_turns=max_turns)
    host = PluginHost(environ=environ)
    options = AdmissionOptions(
        allow_partial=allow_partial,
        skip_direct_model_check=skip_direct_model_check,
        mode="execute" if execute else "plan",
    )
    admission = admit(loaded, host, environ, budgets, options)
    if not execute or not admission.report.passed:
        click.echo(json.dumps(admission.report.model_dump(mode="json"), indent=2))
        sys.exit(0 if admission.report.passed else 1)
    assert output_dir is not None
    from autocad_bench.controller.batch import run_batch

    sys.exit(run_batch(loaded, admission, budgets, output_dir, host=host, environ=environ))


def main() -> None:
    """Console-script entry point of ``autocad-bench-batch``."""
    batch_command(prog_name="autocad-bench-batch")

"""``autocad-bench reap``: the batch reconciler on demand, for any backend.

An operator runs it after a controller died (so its batch-exit reconciler never ran), or to
double-check a finished batch. It calls the backend's ``reap_batch`` once, which is
idempotent: running it again reports nothing left to clean.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from autocad_bench.cli.errors import report_user_errors
from autocad_bench.config import load_config
from autocad_bench.controller.ownership import hold_batch
from autocad_bench.controller.resume import load_batch_state
from autocad_bench.errors import ConfigError, Problem, UserError
from autocad_bench.infrastructure.models import InfrastructureSpec, ReapRequest
from autocad_bench.plugins import PluginHost


@click.command(name="reap")
@click.option("--batch-id", default=None, help="The batch to clean up (default: the one in --output-dir).")
@click.option("--output-dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="A batch output directory: its batch-state.json names the batch and its infrastructure.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A batch configuration whose infrastructure to use (when there is no output directory).")
@report_user_errors
def reap_command(batch_id: str | None, output_dir: Path | None, config_path: Path | None) -> None:
    """Terminate everything the backend still holds for a batch; print what was cleaned (JSON).

    Exit 0 when nothing failed, 1 when some cleanup failed (run it again), 2 for usage errors.
    """
    if output_dir is not None:
        state = load_batch_state(output_dir)
        spec = InfrastructureSpec.model_validate(state.infrastructure)
        if batch_id is not None and batch_id != state.batch_id:
            raise UserError([Problem("--batch-id", f"{output_dir} holds batch {state.batch_id}, not {batch_id}")])
        batch_id = state.batch_id
    elif config_path is not None:
        spec = load_config(config_path).config.infrastructure
    else:
        raise UserError([Problem("reap", "pass --output-dir, or --batch-id with --config")])
    if not batch_id:
        raise UserError([Problem("--batch-id", "required with --config")])
    host = PluginHost(environ=dict(os.environ))
    backend = host.infrastructure(spec.backend)
    problems = backend.call("validate_spec", spec=spec, location="infrastructure") or []
    if problems:
        raise ConfigError(problems)
    request = ReapRequest(batch_id=batch_id, spec=spec, output_dir=output_dir)
    if output_dir is not None:
        # Never under a live controller of the batch: it would tear down desktops in use.
        with hold_batch(output_dir):
            report = backend.call("reap_batch", request=request)
    else:
        report = backend.call("reap_batch", request=request)
    click.echo(json.dumps({"batch_id": batch_id, "infrastructure_backend": spec.backend,
                           **report.model_dump(mode="json")}, indent=2))
    sys.exit(1 if report.errors else 0)

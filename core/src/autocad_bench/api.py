"""Planning and running batches from Python: the supported in-process entry point.

The console scripts are thin wrappers around the same steps; an application that embeds
the controller calls these two functions instead of the CLI's ``main()`` (which reads
``sys.argv`` and exits)::

    from autocad_bench import plan_batch, run_batch

    report = plan_batch("batch.json")          # read-only: every admission check
    if report.passed:
        outcome = run_batch("batch.json", "runs/first")
        for result in outcome.results:
            print(result.rollout_id, result.status, outcome.scores.get(result.rollout_id))

A configuration is a file path, a mapping (the JSON object, already parsed) or a
:class:`~autocad_bench.config.BatchConfig`. Relative paths inside a mapping or a model
resolve against ``base_dir`` (default: the current directory). Backends, providers and
observers registered in this process (``register_infrastructure_plugin()`` and friends)
are visible to both functions.

Errors: a configuration mistake raises :class:`~autocad_bench.errors.ConfigError` (its
``problems`` name the place: file or ``<configuration>``, JSON path, field); a batch that
fails an admission check raises :class:`BatchNotAdmitted` carrying the report; nothing is
started or created in either case.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocad_bench.admission import Admission, AdmissionOptions, PlanReport, admit
from autocad_bench.config.loading import (
    LoadedConfig,
    complete_from_pack,
    effective_budgets,
    load_config,
    parse_with_pack,
)
from autocad_bench.config.models import BatchConfig
from autocad_bench.errors import ConfigError, Problem, UserError
from autocad_bench.harness.records import RolloutResult
from autocad_bench.plugins import PluginHost

ConfigSource = Path | str | Mapping[str, Any] | BatchConfig
"""What the API accepts as a configuration: a file, a parsed JSON object, or a model."""

IN_MEMORY_LABEL = "<configuration>"


class BatchNotAdmitted(UserError):
    """Admission refused the batch; ``report`` says which checks failed (nothing was started)."""

    exit_code = 1  # as the CLI: a failed check, not a usage error

    def __init__(self, report: PlanReport) -> None:
        failed = [c for c in report.checks if not c.passed]
        super().__init__([Problem(f"{report.config}: admission.{c.name}", c.reason) for c in failed])
        self.report = report


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What :func:`run_batch` did.

    ``exit_code`` is the CLI's: 0 every rollout completed, 1 at least one did not, 130/143
    a signal stopped the batch (it is resumable with ``autocad-bench-resume``).
    ``results`` holds one ``result.json`` per finished rollout, in planned order; ``scores``
    maps rollout ids to their deterministic score where evaluation produced one; ``summary``
    is ``summary.json`` (metrics with their intervals and the conditions they were measured
    under).
    """

    batch_id: str
    output_dir: Path
    exit_code: int
    results: tuple[RolloutResult, ...]
    scores: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        """Every rollout completed (a completed rollout may still score 0)."""
        return self.exit_code == 0


def load(config: ConfigSource, *, base_dir: Path | str | None = None) -> LoadedConfig:
    """The validated configuration, a suite name completed from its task pack.

    Raises :class:`ConfigError` naming every problem.
    """
    if isinstance(config, (str, Path)):
        return load_config(config)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    path = base / "configuration.json"  # only its parent is used: relative paths resolve there
    if isinstance(config, BatchConfig):
        completed, pack = complete_from_pack(config, IN_MEMORY_LABEL)
        return LoadedConfig(completed, path, IN_MEMORY_LABEL, pack=pack)
    if not isinstance(config, Mapping):
        raise ConfigError([Problem(IN_MEMORY_LABEL, f"expected a path, a mapping or a BatchConfig, got "
                                                    f"{type(config).__name__}")])
    try:
        text = json.dumps(config)
    except (TypeError, ValueError) as error:
        raise ConfigError([Problem(IN_MEMORY_LABEL, f"not a JSON object: {error}")]) from None
    parsed, pack = parse_with_pack(text, IN_MEMORY_LABEL)
    return LoadedConfig(parsed, path, IN_MEMORY_LABEL, pack=pack)


def _admit(loaded: LoadedConfig, environ: Mapping[str, str] | None, mode: str, *, allow_partial: bool,
           skip_direct_model_check: bool = False) -> tuple[Admission, PluginHost, dict[str, str]]:
    env = dict(os.environ if environ is None else environ)
    budgets = effective_budgets(loaded.config.budgets, environ=env)
    host = PluginHost(environ=env)
    admission = admit(loaded, host, env, budgets, AdmissionOptions(
        allow_partial=allow_partial, skip_direct_model_check=skip_direct_model_check, mode=mode))
    return admission, host, env


def plan_batch(config: ConfigSource, *, base_dir: Path | str | None = None,
               environ: Mapping[str, str] | None = None, allow_partial: bool = False,
               skip_direct_model_check: bool = False) -> PlanReport:
    """Run every admission check, read-only, and return the report (``report.passed``).

    ``environ`` replaces ``os.environ`` for credentials and caps. Raises
    :class:`ConfigError` for an invalid configuration; a failed check is in the report.
    """
    loaded = load(config, base_dir=base_dir)
    admission, _, _ = _admit(loaded, environ, "plan", allow_partial=allow_partial,
                             skip_direct_model_check=skip_direct_model_check)
    return admission.report


def run_batch(config: ConfigSource, output_dir: Path | str, *, base_dir: Path | str | None = None,
              environ: Mapping[str, str] | None = None, allow_partial: bool = False,
              progress: bool = False) -> BatchOutcome:
    """Admit and execute a batch into ``output_dir`` (a new directory); block until it ends.

    Called from the main thread, SIGINT and SIGTERM stop the batch cleanly while it runs
    (as in the CLI); from another thread, signals are left alone. ``progress`` shows the
    live progress display on the terminal. Nothing is printed otherwise.

    Raises :class:`ConfigError` (invalid configuration), :class:`UserError` (``output_dir``
    exists) or :class:`BatchNotAdmitted` (a failed check) before anything is created.
    """
    out = Path(output_dir)
    if out.exists():
        raise UserError([Problem(str(out), "already exists; choose a new directory (interrupted batches "
                                           "continue with autocad-bench-resume)")])
    loaded = load(config, base_dir=base_dir)
    admission, host, env = _admit(loaded, environ, "execute", allow_partial=allow_partial)
    if not admission.report.passed:
        raise BatchNotAdmitted(admission.report)
    # The controller is imported only to execute: planning stays light.
    from autocad_bench.controller.batch import BatchRunner, run_interruptibly
    from autocad_bench.controller.summary import build_summary, write_summary
    from autocad_bench.progress import BatchProgress

    budgets = effective_budgets(loaded.config.budgets, environ=env)
    runner = BatchRunner(loaded, admission, budgets, out, host=host, environ=env)

    def body() -> int:
        if not progress:
            return runner.run()
        with BatchProgress(out, host=host, environ=env):
            return runner.run()

    code = run_interruptibly(runner, body)
    summary = build_summary(out, runner.store.state)
    write_summary(out, summary)
    results, scores = _results(out, [r.rollout_id for r in loaded.enabled_trials()])
    return BatchOutcome(batch_id=runner.batch_id, output_dir=out, exit_code=code, results=results,
                        scores=scores, summary=summary)


def _results(out: Path, rollout_ids: list[str]) -> tuple[tuple[RolloutResult, ...], dict[str, float]]:
    from autocad_bench.controller.summary import read_scores

    results: list[RolloutResult] = []
    scores: dict[str, float] = {}
    for rollout_id in rollout_ids:
        root = out / "rollouts" / rollout_id
        try:
            results.append(RolloutResult.model_validate_json((root / "result.json").read_bytes()))
        except (OSError, ValueError):
            continue  # not finished (a stopped batch): resumable, not a result
        score = read_scores(root)[0]
        if score is not None:
            scores[rollout_id] = score
    return tuple(results), scores


__all__ = ["BatchNotAdmitted", "BatchOutcome", "ConfigSource", "load", "plan_batch", "run_batch"]

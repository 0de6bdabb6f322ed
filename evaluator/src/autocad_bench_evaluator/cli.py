"""``autocad-bench-evaluate``: evaluate one attempt drawing from the command line.

Usage::

    autocad-bench-evaluate --candidate PATH --task ID --gold-cache DIR \\
        --evaluator-version V --out DIR [--judge-model M] [--judge-base-url URL] \\
        [--dwg-converter CMD] [--task-prompt-file FILE]

The vision judge's API key is read from the environment variable ``OPENAI_API_KEY`` only
(never from the command line). Output goes to ``--out`` (the rollout's ``evaluation/``
directory); one summary line goes to stdout, one-line errors to stderr.

Exit codes:

* 0: evaluation finished, state ``done`` or ``invalid`` (a missing or invalid drawing is a
  valid, zero-scored result);
* 1: evaluation failed (gold cache missing or tampered, DWG not readable here, judge failure,
  internal error); ``status.json`` says why;
* 2: wrong command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from autocad_bench_evaluator.evaluate import EXIT_FAILED, EXIT_USAGE, evaluate
from autocad_bench_evaluator.judge import JudgeRunner, judge_from_environment
from autocad_bench_evaluator.metadata import default_dwg_reader

JUDGE_KEY_ENV = "OPENAI_API_KEY"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"autocad-bench-evaluate: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = _Parser(prog="autocad-bench-evaluate", description="Evaluate one attempt drawing.")
    parser.add_argument("--candidate", required=True, type=Path, help="attempt.dwg or attempt.dxf")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--gold-cache", required=True, type=Path, help="gold cache root directory")
    parser.add_argument("--evaluator-version", required=True, help="pinned evaluator version")
    parser.add_argument("--out", required=True, type=Path, help="the evaluation/ output directory")
    parser.add_argument("--judge-model", help=f"run the vision judge with this model (key from ${JUDGE_KEY_ENV})")
    parser.add_argument("--judge-base-url", help="OpenAI-compatible base URL for the judge")
    parser.add_argument(
        "--dwg-converter",
        help="command converting DWG to DXF, e.g. 'ODAFileConverter {input_dir} {output_dir} ACAD2018 DXF 0 1 *.DWG'",
    )
    parser.add_argument("--task-prompt-file", type=Path, help="the task prompt, shown to the judge")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring)."""
    args = build_parser().parse_args(argv)
    judge: JudgeRunner | None = None
    if args.judge_model:
        judge = judge_from_environment(
            args.judge_model, os.environ, base_url=args.judge_base_url, env_name=JUDGE_KEY_ENV
        )
    prompt: str | None = None
    if args.task_prompt_file is not None:
        try:
            prompt = args.task_prompt_file.read_text(encoding="utf-8")
        except OSError as error:
            print(f"autocad-bench-evaluate: error: cannot read --task-prompt-file: {error.strerror}", file=sys.stderr)
            return EXIT_USAGE
    try:
        outcome = evaluate(
            args.candidate,
            args.task,
            args.gold_cache,
            args.evaluator_version,
            args.out,
            judge=judge,
            dwg_reader=default_dwg_reader(args.dwg_converter),
            task_prompt=prompt,
        )
    except OSError as error:
        print(f"autocad-bench-evaluate: error: cannot write {args.out}: {error}", file=sys.stderr)
        return EXIT_FAILED
    if outcome.exit_code != 0:
        print(f"autocad-bench-evaluate: {outcome.state.value}: {outcome.error}", file=sys.stderr)
        return outcome.exit_code
    report = outcome.report
    line = f"{outcome.state.value}: task {args.task}"
    if report is not None:
        line += f" score {report.score:.6f} {'passed' if report.passed else 'not passed'}"
        if not report.valid:
            line += f" ({report.invalid_class}: {report.reason})"
    if outcome.judge is not None:
        line += f"; judge {outcome.judge.score:.3f} {'passed' if outcome.judge.passed else 'not passed'}"
    print(line)
    return outcome.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Prove the LibreCAD tasks solvable on a real desktop, and that scoring separates good from bad.

For each task and *variant* this starts LibreCAD (through the broker's
:class:`~autocad_bench_broker.apps.librecad.LibreCADAdapter`) on a fresh copy of the template
in a private Xvfb display, replays the variant's action batches with the real
:class:`~autocad_bench_broker.drivers.input.PyAutoGUIDriver` (``apply_action`` per action,
then the broker's post-batch settle), checkpoints the drawing through the adapter's trusted
save, and scores it against the gold with the evaluator's deterministic scoring:

* ``oracle``: ``solution.librecad.jsonl``, must score 1.0 and pass;
* ``noop``: a single ``done`` batch, must score 0;
* ``perturbed``: ``solution.perturbed.jsonl`` (one deliberate mistake), must score strictly
  between 0 and 1.

One Xvfb display and one input driver serve every run; LibreCAD is restarted with a fresh
HOME for each run. Needs the broker distribution (``autocad-bench-broker``), Xvfb, xdotool and
LibreCAD; run ``python -m autocad_bench_evaluator.suite.validity --help``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from autocad_bench.actions import ACTION_ADAPTER
from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
from autocad_bench_evaluator.scoring import ScoreReport, score_drawing
from autocad_bench_evaluator.suite import registry
from autocad_bench_evaluator.suite.librecad import noop_jsonl

if TYPE_CHECKING:
    from autocad_bench_broker.apps.librecad import LibreCADAdapter
    from autocad_bench_broker.display import XvfbDisplay
    from autocad_bench_broker.drivers.capture import MssCapture
    from autocad_bench_broker.drivers.input import PyAutoGUIDriver

Variant = Literal["oracle", "noop", "perturbed"]
VARIANTS: tuple[Variant, ...] = ("oracle", "noop", "perturbed")
EVALUATOR_VERSION = "suite-validity"


@dataclass(frozen=True, slots=True)
class RunResult:
    """One replay: the score report (None when no drawing could be scored) and timings."""

    task_id: str
    variant: Variant
    report: ScoreReport | None
    batches: int
    actions: int
    launch_s: float
    replay_s: float
    total_s: float
    error: str | None = None

    @property
    def score(self) -> float | None:
        return self.report.score if self.report is not None else None

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed

    @property
    def expected(self) -> bool:
        """Whether the outcome is what the variant must produce."""
        score = self.score
        if score is None:
            return False
        if self.variant == "oracle":
            return score == 1.0 and self.passed
        if self.variant == "noop":
            return score == 0.0 and not self.passed
        return 0.0 < score < 1.0


def variant_jsonl(task: registry.SuiteTask, variant: Variant) -> str:
    if variant == "noop":
        return noop_jsonl()
    path = task.solution_path("librecad") if variant == "oracle" else task.perturbed_path
    if path is None:
        raise registry.SuiteError(f"{task.task_id} has no LibreCAD solution")
    return path.read_text()


def parse_batches(text: str) -> list[list[object]]:
    """The action lists of a solution file (one ``{"actions": [...]}`` per non-empty line)."""
    batches: list[list[object]] = []
    for line in text.splitlines():
        if line.strip():
            batches.append(list(json.loads(line)["actions"]))
    return batches


class LibreCADRig:
    """A private Xvfb display with capture, real input and a LibreCAD adapter, reused per run."""

    def __init__(self, workdir: Path, *, width: int = 1920, height: int = 1080) -> None:
        from autocad_bench_broker.apps.librecad import LibreCADAdapter, LibreCADConfig
        from autocad_bench_broker.display import XvfbDisplay
        from autocad_bench_broker.drivers.capture import MssCapture, StabilityPolicy
        from autocad_bench_broker.drivers.input import PyAutoGUIDriver

        self.workdir = Path(workdir)
        self.display: XvfbDisplay = XvfbDisplay(width, height, log_path=self.workdir / "xvfb.log")
        self.workdir.mkdir(parents=True, exist_ok=True)
        name = self.display.start()
        self.capture: MssCapture = MssCapture(name)
        self.driver: PyAutoGUIDriver = PyAutoGUIDriver(name)
        # The drawing is checkpointed before every restart, so a quick SIGKILL is harmless.
        config = LibreCADConfig(term_timeout_s=0.3)
        self.adapter: LibreCADAdapter = LibreCADAdapter(name, self.workdir / "librecad", self.capture, config=config)
        self.settle = StabilityPolicy(window_s=1.5, interval_s=0.1, settle_s=0.1)

    def close(self) -> None:
        self.adapter.kill()
        self.adapter.close()
        self.driver.close()
        self.capture.close()
        self.display.stop()

    def run(
        self, task: registry.SuiteTask, variant: Variant, attempt: Path, frame_path: Path | None = None
    ) -> RunResult:
        """Launch on a fresh template copy, replay, checkpoint, score; never raises for a bad run.

        ``frame_path`` receives the settled screen after the last batch (PNG).
        """
        from autocad_bench_broker.drivers.capture import stable_frame
        from autocad_bench_broker.drivers.dispatch import apply_action

        started = time.monotonic()
        batches = parse_batches(variant_jsonl(task, variant))
        count = sum(len(batch) for batch in batches)

        def failed(error: str, launch_s: float = 0.0, replay_s: float = 0.0) -> RunResult:
            return RunResult(
                task.task_id,
                variant,
                None,
                len(batches),
                count,
                launch_s,
                replay_s,
                round(time.monotonic() - started, 3),
                error,
            )

        try:
            self.adapter.launch(task.template_path, attempt)
        except Exception as error:  # launch errors are reported per run
            return failed(f"launch: {error}")
        ready = self.adapter.verify_ready()
        launch_s = round(time.monotonic() - started, 3)
        if not ready.ok:
            return failed(f"not ready: {list(ready.evidence.failures)}", launch_s)
        replay_started = time.monotonic()
        frame = ready.frame
        for batch in batches:
            for raw in batch:
                apply_action(self.driver, ACTION_ADAPTER.validate_python(raw))
            frame, _ = stable_frame(self.capture, self.settle)
        if frame_path is not None and frame is not None:
            frame_path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_image().save(frame_path)
        replay_s = round(time.monotonic() - replay_started, 3)
        checkpoint = self.adapter.checkpoint()
        if not checkpoint.ok:
            return failed(f"checkpoint: {checkpoint.error}", launch_s, replay_s)
        report = score_attempt(task, attempt)
        return RunResult(
            task.task_id, variant, report, len(batches), count, launch_s, replay_s, round(time.monotonic() - started, 3)
        )


def score_attempt(task: registry.SuiteTask, attempt: Path) -> ScoreReport:
    """The evaluator's score of the drawing at ``attempt`` against the task's gold."""
    spec = task.scoring
    with tempfile.TemporaryDirectory(prefix="autocad-bench-gold-") as tmp:
        gold = read_drawing(registry.generate_gold(task.task_id, Path(tmp)), spec.schema_version)
    if not isinstance(gold, DrawingMetadata):
        raise RuntimeError(f"the gold of {task.task_id} is invalid: {gold.reason}")
    candidate = read_drawing(attempt, spec.schema_version)
    if not isinstance(candidate, DrawingMetadata):
        raise RuntimeError(f"the attempt of {task.task_id} is invalid: {candidate.reason}")
    return score_drawing(gold, candidate, spec, EVALUATOR_VERSION)


@contextmanager
def librecad_rig(workdir: Path | None = None) -> Iterator[LibreCADRig]:
    """A :class:`LibreCADRig` in ``workdir`` (a temporary directory by default), closed on exit."""
    temporary = workdir is None
    root = Path(tempfile.mkdtemp(prefix="autocad-bench-validity-")) if workdir is None else Path(workdir)
    rig = LibreCADRig(root)
    try:
        yield rig
    finally:
        rig.close()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)


def run_validity(
    task_ids: Sequence[str],
    variants: Sequence[Variant] = VARIANTS,
    *,
    workdir: Path | None = None,
    keep: Path | None = None,
    progress: bool = False,
) -> list[RunResult]:
    """Replay every (task, variant) on one rig; ``keep`` stores each attempt drawing there."""
    results: list[RunResult] = []
    with librecad_rig(workdir) as rig:
        for task_id in task_ids:
            task = registry.load(task_id)
            for variant in variants:
                attempt = rig.workdir / "attempts" / task_id / variant / "attempt.dxf"
                frame = keep / task_id / f"{variant}.png" if keep is not None else None
                result = rig.run(task, variant, attempt, frame)
                results.append(result)
                if keep is not None and attempt.is_file():
                    target = keep / task_id / f"{variant}.dxf"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(attempt, target)
                if progress:
                    print(describe(result), file=sys.stderr, flush=True)
    return results


def describe(result: RunResult) -> str:
    score = "-" if result.score is None else f"{result.score:.3f}"
    verdict = "ok" if result.expected else "UNEXPECTED"
    extra = f" error={result.error}" if result.error else ""
    return (
        f"{result.task_id:28s} {result.variant:9s} score={score:>6s} passed={result.passed!s:5s} "
        f"{verdict:10s} batches={result.batches:3d} launch={result.launch_s:.1f}s replay={result.replay_s:.1f}s "
        f"total={result.total_s:.1f}s{extra}"
    )


def _cell(result: RunResult | None) -> str:
    if result is None:
        return "n/a"
    if result.score is None:
        return f"error: {result.error}"
    mark = "pass" if result.passed else "fail"
    flag = "" if result.expected else " **UNEXPECTED**"
    return f"{result.score:.3f} ({mark}){flag}"


def markdown_table(results: Sequence[RunResult]) -> str:
    """The validity table: one row per task, one column per variant, plus replay time."""
    by_task: dict[str, dict[str, RunResult]] = {}
    for result in results:
        by_task.setdefault(result.task_id, {})[result.variant] = result
    lines = [
        "| task | tier | oracle | no-op | perturbed | perturbation | oracle batches | oracle replay |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task_id, runs in by_task.items():
        definition = registry.definition(task_id)
        oracle = runs.get("oracle")
        lines.append(
            f"| {task_id} | {definition.tier} | {_cell(oracle)} | {_cell(runs.get('noop'))} | "
            f"{_cell(runs.get('perturbed'))} | {definition.perturbation} | "
            f"{oracle.batches if oracle else '-'} | {f'{oracle.replay_s:.1f} s' if oracle else '-'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Replay the LibreCAD reference solutions and score them.")
    parser.add_argument("--suite", default="librecad-2d", help="named suite to run (default: librecad-2d)")
    parser.add_argument("--tasks", nargs="*", help="task ids (overrides --suite)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: oracle,noop,perturbed")
    parser.add_argument("--markdown", type=Path, help="write the validity table (markdown) here")
    parser.add_argument("--json", type=Path, help="write every result with its score report here")
    parser.add_argument("--keep", type=Path, help="copy every attempt drawing into this directory")
    args = parser.parse_args(argv)
    task_ids = args.tasks or registry.resolve_suite(args.suite)
    variants: list[Variant] = []
    for name in args.variants.split(","):
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}")
        variants.append(name)
    started = time.monotonic()
    results = run_validity(task_ids, variants, keep=args.keep, progress=True)
    elapsed = time.monotonic() - started
    table = markdown_table(results)
    print(table)
    print(f"{len(results)} runs in {elapsed:.1f} s; unexpected: {sum(not r.expected for r in results)}")
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        payload = [
            {
                "task_id": r.task_id,
                "variant": r.variant,
                "expected": r.expected,
                "batches": r.batches,
                "actions": r.actions,
                "launch_s": r.launch_s,
                "replay_s": r.replay_s,
                "total_s": r.total_s,
                "error": r.error,
                "report": r.report.model_dump(mode="json") if r.report else None,
            }
            for r in results
        ]
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(r.expected for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

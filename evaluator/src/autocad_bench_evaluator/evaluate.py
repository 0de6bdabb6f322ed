"""One evaluation: read the attempt, score it against the gold cache, render, diff, judge.

:func:`evaluate` writes into the rollout's ``evaluation/`` directory (``out_dir``)::

    status.json        rewritten atomically at every stage (see EvaluationState)
    metadata.json      the candidate's DrawingMetadata, or the InvalidDrawing record
    score.json         the deterministic ScoreReport (zero and valid=false when invalid)
    render.png         the candidate, aligned (free position) and in the same view as the gold
    gold-render.png    the gold in that same view (the judge's reference image)
    diff.png           gold-only ink red, candidate-only ink blue, shared ink grey
    vision-judge/      request.json, responses.json, score.json (when a judge is configured)

States: ``pending -> reading -> scoring -> rendering -> judging -> done``, or the terminal
``invalid`` (the drawing is missing or invalid: zero score, no render, exit code 0; the
``invalid_class`` says why in one stable word) or
``failed`` (gold cache, DWG reader, judge or an internal error: the deterministic files written
so far stay, exit code 1). Outputs of a previous run in ``out_dir`` are removed first.
"""

from __future__ import annotations

import contextlib
import enum
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.models import StrictModel
from autocad_bench.storage import atomic_write_bytes
from autocad_bench_evaluator.diff import diff_image
from autocad_bench_evaluator.gold_cache import GoldCacheError, load_entry
from autocad_bench_evaluator.invalid import InvalidClass
from autocad_bench_evaluator.judge import JUDGE_DIR, JudgeError, JudgeRunner, JudgeScore
from autocad_bench_evaluator.metadata import (
    CannotReadDrawing,
    DrawingMetadata,
    DwgReader,
    InvalidDrawing,
    ReadLimits,
    canonical_json,
    read_drawing,
)
from autocad_bench_evaluator.render import ink_mask, png_bytes, render_image, translated_extents, view_for
from autocad_bench_evaluator.scoring import ScoreReport, invalid_report, score_drawing

EXIT_OK = 0
"""Evaluation finished: ``done`` or ``invalid`` (an invalid drawing is a valid result)."""
EXIT_FAILED = 1
"""Evaluation failed: gold cache, DWG reader, judge or internal error."""
EXIT_USAGE = 2
"""The command line was wrong (CLI only)."""

STATUS = "status.json"
METADATA = "metadata.json"
SCORE = "score.json"
RENDER = "render.png"
GOLD_RENDER = "gold-render.png"
DIFF = "diff.png"
_OUTPUTS = (METADATA, SCORE, RENDER, GOLD_RENDER, DIFF)
_JUDGE_FILES = ("request.json", "responses.json", "score.json")


class EvaluationState(enum.StrEnum):
    """Where an evaluation is; ``done``, ``invalid`` and ``failed`` are terminal."""

    PENDING = "pending"
    READING = "reading"
    SCORING = "scoring"
    RENDERING = "rendering"
    JUDGING = "judging"
    DONE = "done"
    INVALID = "invalid"
    FAILED = "failed"


class StateChange(StrictModel):
    """One entry of the status history."""

    state: EvaluationState
    at: str


class EvaluationStatus(StrictModel):
    """``status.json``: the current state, its history and the outcome once terminal."""

    state: EvaluationState
    task_id: str
    evaluator_version: str
    candidate: str | None = None
    updated_at: str
    history: tuple[StateChange, ...] = ()
    error: str | None = None
    invalid_class: InvalidClass | None = Field(default=None, description="why the drawing is invalid (state invalid)")
    score: float | None = None
    passed: bool | None = None
    judge_score: float | None = Field(default=None, description="the vision judge's score, reported separately")
    judge_passed: bool | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class EvaluationOutcome:
    """What :func:`evaluate` returns: the terminal state, the exit code and the results."""

    state: EvaluationState
    exit_code: int
    out_dir: Path
    report: ScoreReport | None = None
    judge: JudgeScore | None = None
    error: str | None = None


Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class _Status:
    def __init__(self, out_dir: Path, task_id: str, version: str, candidate: Path | None, clock: Clock) -> None:
        self.path = out_dir / STATUS
        self.clock = clock
        self.status = EvaluationStatus(
            state=EvaluationState.PENDING,
            task_id=task_id,
            evaluator_version=version,
            candidate=candidate.name if candidate is not None else None,
            updated_at=self._stamp(),
        )
        self.status = self.status.model_copy(
            update={"history": (StateChange(state=EvaluationState.PENDING, at=self.status.updated_at),)}
        )
        self._write()

    def _stamp(self) -> str:
        return self.clock().isoformat(timespec="milliseconds")

    def _write(self) -> None:
        atomic_write_bytes(self.path, canonical_json(self.status.model_dump(mode="json")))

    def enter(self, state: EvaluationState, **fields: object) -> None:
        at = self._stamp()
        self.status = self.status.model_copy(
            update={
                "state": state,
                "updated_at": at,
                "history": (*self.status.history, StateChange(state=state, at=at)),
                **fields,
            }
        )
        self._write()


def _clean(out_dir: Path) -> None:
    for name in _OUTPUTS:
        with contextlib.suppress(FileNotFoundError):
            (out_dir / name).unlink()
    for name in _JUDGE_FILES:
        with contextlib.suppress(FileNotFoundError):
            (out_dir / JUDGE_DIR / name).unlink()


def evaluate(
    candidate: Path | None,
    task_id: str,
    gold_cache_root: Path,
    evaluator_version: str,
    out_dir: Path,
    *,
    judge: JudgeRunner | None = None,
    dwg_reader: DwgReader | None = None,
    limits: ReadLimits | None = None,
    task_prompt: str | None = None,
    clock: Clock = _now,
) -> EvaluationOutcome:
    """Evaluate one attempt drawing into ``out_dir`` (the rollout's ``evaluation/`` directory).

    ``candidate`` is the checkpointed drawing (``attempt.dwg``/``attempt.dxf``) or None when
    none was saved. Never raises for a bad drawing or a failing dependency: the outcome (and
    ``status.json``) says ``done``, ``invalid`` or ``failed``. Only an ``out_dir`` that cannot
    be created or written raises ``OSError``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean(out_dir)
    status = _Status(out_dir, task_id, evaluator_version, candidate, clock)
    report: ScoreReport | None = None

    def fail(message: str) -> EvaluationOutcome:
        status.enter(
            EvaluationState.FAILED,
            error=message,
            exit_code=EXIT_FAILED,
            score=report.score if report else None,
            passed=report.passed if report else None,
        )
        return EvaluationOutcome(EvaluationState.FAILED, EXIT_FAILED, out_dir, report=report, error=message)

    try:
        status.enter(EvaluationState.READING)
        try:
            gold = load_entry(Path(gold_cache_root), evaluator_version, task_id)
        except GoldCacheError as error:
            return fail(str(error))
        spec = gold.spec
        try:
            # The candidate is untrusted: read it in a child under hard memory and time limits.
            result = read_drawing(candidate, spec.schema_version, dwg_reader=dwg_reader, limits=limits, isolated=True)
        except CannotReadDrawing as error:
            return fail(str(error))
        if isinstance(result, InvalidDrawing):
            report = invalid_report(
                spec,
                evaluator_version,
                result.reason,
                invalid_class=result.failure_class,
                gold_sha256=gold.metadata.source.sha256,
            )
            atomic_write_bytes(out_dir / METADATA, result.to_json_bytes())
            atomic_write_bytes(out_dir / SCORE, report.to_json_bytes())
            status.enter(
                EvaluationState.INVALID,
                error=result.reason,
                invalid_class=result.failure_class,
                score=0.0,
                passed=False,
                exit_code=EXIT_OK,
            )
            return EvaluationOutcome(EvaluationState.INVALID, EXIT_OK, out_dir, report=report, error=result.reason)
        metadata: DrawingMetadata = result
        atomic_write_bytes(out_dir / METADATA, metadata.to_json_bytes())

        status.enter(EvaluationState.SCORING)
        report = score_drawing(gold.metadata, metadata, spec, evaluator_version)
        atomic_write_bytes(out_dir / SCORE, report.to_json_bytes())

        status.enter(EvaluationState.RENDERING, score=report.score, passed=report.passed)
        translation = report.translation
        view = view_for([gold.metadata.extents, translated_extents(metadata, translation)])
        gold_image = render_image(gold.metadata, view)
        cand_image = render_image(metadata, view, translation=translation)
        gold_png = png_bytes(gold_image)
        cand_png = png_bytes(cand_image)
        atomic_write_bytes(out_dir / GOLD_RENDER, gold_png)
        atomic_write_bytes(out_dir / RENDER, cand_png)
        atomic_write_bytes(out_dir / DIFF, png_bytes(diff_image(ink_mask(gold_image), ink_mask(cand_image))))

        verdict: JudgeScore | None = None
        if judge is not None:
            status.enter(EvaluationState.JUDGING)
            try:
                verdict = judge.run(out_dir, gold_png=gold_png, candidate_png=cand_png, task_prompt=task_prompt)
            except JudgeError as error:
                return fail(str(error))
        status.enter(
            EvaluationState.DONE,
            exit_code=EXIT_OK,
            judge_score=verdict.score if verdict else None,
            judge_passed=verdict.passed if verdict else None,
        )
        return EvaluationOutcome(EvaluationState.DONE, EXIT_OK, out_dir, report=report, judge=verdict)
    except Exception as error:
        frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
        where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
        return fail(f"internal evaluator error{where}: {type(error).__name__}: {error}"[:1000])


def rollout_candidate(rollout_dir: Path) -> Path | None:
    """The checkpointed drawing of a rollout directory: ``attempt.dwg``, else ``attempt.dxf``,
    else None (no drawing was saved)."""
    paths = RolloutPaths(Path(rollout_dir))
    for suffix in (".dwg", ".dxf"):
        candidate = paths.drawing(suffix)
        if candidate.is_file():
            return candidate
    return None


def evaluate_rollout(
    rollout_dir: Path,
    task_id: str,
    gold_cache_root: Path,
    evaluator_version: str,
    *,
    judge: JudgeRunner | None = None,
    dwg_reader: DwgReader | None = None,
    task_prompt: str | None = None,
) -> EvaluationOutcome:
    """:func:`evaluate` for a rollout directory: its attempt drawing into its ``evaluation/``."""
    paths = RolloutPaths(Path(rollout_dir))
    return evaluate(
        rollout_candidate(paths.root),
        task_id,
        gold_cache_root,
        evaluator_version,
        paths.evaluation,
        judge=judge,
        dwg_reader=dwg_reader,
        task_prompt=task_prompt,
    )

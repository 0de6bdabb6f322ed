"""The score report models (``score.json``): :class:`ScoreReport` and its
:class:`ComponentScore` entries, the rounding of reported numbers (``_r``), the zero report of an
invalid drawing (:func:`invalid_report`), and the drawing-units check that rules a comparison
out (:func:`units_mismatch`)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from autocad_bench.models import StrictModel
from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.invalid import InvalidClass
from autocad_bench_evaluator.metadata import DrawingMetadata, canonical_json
from autocad_bench_evaluator.scoring.constants import ROUND_DIGITS
from autocad_bench_evaluator.spec import ScoringSpec


def _r(value: float) -> float:
    rounded = round(float(value), ROUND_DIGITS)
    return 0.0 if rounded == 0.0 or not math.isfinite(rounded) else rounded


class ComponentScore(StrictModel):
    """One component: its score in [0, 1], its weight, and what was compared.

    ``gold``/``candidate`` count compared items, ``matched`` is the summed credit of the
    optimal assignment. A component that is not ``applicable`` does not enter the total.
    """

    score: float = Field(ge=0.0, le=1.0)
    weight: float = Field(ge=0.0)
    applicable: bool
    gold: int = 0
    candidate: int = 0
    matched: float = 0.0
    details: dict[str, float | int | str] = Field(default_factory=dict)


class ScoreReport(StrictModel):
    """``score.json``: the deterministic score of one attempt (separate from the vision judge)."""

    kind: Literal["deterministic"] = "deterministic"
    task_id: str
    evaluator_version: str
    schema_version: int
    valid: bool
    reason: str = ""
    invalid_class: InvalidClass | None = None
    score: float = Field(ge=0.0, le=1.0)
    raw_score: float | None = Field(
        default=None, description="the weighted total before the edit-task rescaling (None when no baseline)"
    )
    defects: float | None = Field(
        default=None,
        ge=0.0,
        description="whole items missing, extra or wrong over the weighted components (each costs 10%, at most one)",
    )
    passed: bool
    pass_threshold: float
    position: Literal["fixed", "free"]
    translation: Point = (0.0, 0.0)
    components: dict[str, ComponentScore] = Field(default_factory=dict)
    required_layers: dict[str, bool] = Field(default_factory=dict)
    required_text: dict[str, bool] = Field(default_factory=dict)
    gold_sha256: str | None = None
    candidate_sha256: str | None = None

    def to_json_bytes(self) -> bytes:
        """Canonical bytes of ``score.json`` (sorted keys, rounded floats, trailing newline)."""
        return canonical_json(self.model_dump(mode="json"))


_UNITS = {
    1: "inches",
    2: "feet",
    3: "miles",
    4: "millimetres",
    5: "centimetres",
    6: "metres",
    7: "kilometres",
    8: "microinches",
    9: "mils",
    10: "yards",
    11: "angstroms",
    12: "nanometres",
    13: "microns",
    14: "decimetres",
    15: "decametres",
    16: "hectometres",
    17: "gigametres",
    18: "astronomical units",
    19: "light years",
    20: "parsecs",
}
"""DXF ``$INSUNITS`` codes (0 is unitless)."""


def units_mismatch(gold: DrawingMetadata, candidate: DrawingMetadata) -> str | None:
    """Why the candidate's declared units rule out a comparison, or None when they match (or
    either side declares none: ``$INSUNITS`` absent or 0)."""
    want, got = gold.source.units, candidate.source.units
    if not want or not got or want == got:
        return None
    return (
        f"the drawing declares its units as {_UNITS.get(got, f'code {got}')} ($INSUNITS {got}); the task is "
        f"drawn in {_UNITS.get(want, f'code {want}')} ($INSUNITS {want}), so its coordinates cannot be compared"
    )


def invalid_report(
    spec: ScoringSpec,
    evaluator_version: str,
    reason: str,
    *,
    invalid_class: InvalidClass | None = None,
    gold_sha256: str | None = None,
) -> ScoreReport:
    """The deterministic zero report of an invalid or missing drawing."""
    return ScoreReport(
        task_id=spec.task_id,
        evaluator_version=evaluator_version,
        schema_version=spec.schema_version,
        valid=False,
        reason=reason,
        invalid_class=invalid_class,
        score=0.0,
        passed=False,
        pass_threshold=spec.pass_threshold,
        position=spec.position,
        required_layers={name: False for name in spec.required_layers},
        required_text={text: False for text in spec.required_text},
        gold_sha256=gold_sha256,
    )

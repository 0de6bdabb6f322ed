"""The entry point of scoring: :func:`score_drawing` (units check, items, alignment, component
scores, the edit-task rescaling and the pass threshold) and the required layers and texts that
a pass also needs (:func:`required_layers_present`, :func:`required_text_present`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autocad_bench_evaluator.metadata import DimensionEntity, DrawingMetadata, InsertEntity
from autocad_bench_evaluator.scoring.alignment import _align
from autocad_bench_evaluator.scoring.entities import _errors
from autocad_bench_evaluator.scoring.items import _norm_layer, _side, hidden_layers, normalize_text
from autocad_bench_evaluator.scoring.report import ComponentScore, ScoreReport, _r, units_mismatch
from autocad_bench_evaluator.spec import ScoringSpec


def required_layers_present(candidate: DrawingMetadata, names: Iterable[str]) -> dict[str, bool]:
    """For each required layer: whether at least one candidate model-space entity is on it
    (a layer that is off or frozen shows nothing, so it does not count)."""
    used = {_norm_layer(e.layer) for e in candidate.model.entities}
    for e in candidate.model.entities:
        if isinstance(e, InsertEntity):
            used.update(_norm_layer(sub.layer) for sub in e.exploded)
    used -= hidden_layers(candidate)
    return {name: _norm_layer(name) in used for name in names}


def required_text_present(candidate: DrawingMetadata, texts_required: Iterable[str]) -> dict[str, bool]:
    """For each required text: whether it occurs in some candidate text (normalised substring)."""
    from autocad_bench_evaluator.metadata import texts

    contents = [normalize_text(t.content) for t in texts(candidate)]
    contents += [normalize_text(e.text_override) for e in candidate.model.entities if isinstance(e, DimensionEntity)]
    return {text: any(normalize_text(text) in c for c in contents) for text in texts_required}


def score_drawing(
    gold: DrawingMetadata, candidate: DrawingMetadata, spec: ScoringSpec, evaluator_version: str
) -> ScoreReport:
    """Score ``candidate`` against ``gold``; deterministic and translation-invariant when free.

    A candidate that declares other drawing units than the gold (``$INSUNITS``, both set and
    not unitless) scores 0 with the reason: its coordinates mean other lengths.
    """
    layers_ok = required_layers_present(candidate, spec.required_layers)
    text_ok = required_text_present(candidate, spec.required_text)

    def report(score: float, passed: bool, **rest: Any) -> ScoreReport:
        return ScoreReport(
            task_id=spec.task_id,
            evaluator_version=evaluator_version,
            schema_version=spec.schema_version,
            valid=True,
            score=score,
            passed=passed,
            pass_threshold=spec.pass_threshold,
            position=spec.position,
            required_layers=layers_ok,
            required_text=text_ok,
            gold_sha256=gold.source.sha256,
            candidate_sha256=candidate.source.sha256,
            **rest,
        )

    mismatch = units_mismatch(gold, candidate)
    if mismatch is not None:
        return report(0.0, False, reason=mismatch)
    errs = _errors(spec.tolerance)
    g = _side(gold, spec)
    c = _side(candidate, spec)
    translation, ev = _align(g, c, spec, errs)
    weights = spec.weights.as_dict()
    components = {
        name: ComponentScore(
            score=_r(min(1.0, max(0.0, comp.score))),
            weight=_r(weights[name]),
            applicable=comp.applicable and weights[name] > 0,
            gold=comp.gold,
            candidate=comp.candidate,
            matched=_r(comp.matched),
            details={
                k: (_r(v) if isinstance(v, float) else v)
                for k, v in sorted(
                    ({**comp.details, "defects": comp.defects} if comp.applicable else comp.details).items()
                )
            },
        )
        for name, comp in ev.components.items()
    }
    raw = min(1.0, max(0.0, ev.total))
    extra: dict[str, Any] = {}
    if spec.baseline > 0.0:
        # Edit tasks: the unchanged template already scores ``baseline``; only the change counts.
        extra["raw_score"] = _r(raw)
        raw = min(1.0, max(0.0, (raw - spec.baseline) / (1.0 - spec.baseline)))
    total = _r(raw)
    passed = total >= spec.pass_threshold and all(layers_ok.values()) and all(text_ok.values())
    return report(
        total,
        passed,
        translation=(_r(translation[0]), _r(translation[1])),
        components=components,
        defects=_r(ev.defects),
        **extra,
    )

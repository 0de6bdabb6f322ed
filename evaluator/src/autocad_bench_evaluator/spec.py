"""The scoring spec of one task and the manifest of one gold-cache entry.

Every task of the suite ships a ``scoring.json`` (a :class:`ScoringSpec`) beside its gold
generator. The gold cache (:mod:`autocad_bench_evaluator.gold_cache`) copies it into
``<root>/<evaluator_version>/<task_id>/`` together with ``gold.dxf``, ``metadata.json`` and
``render.png`` and lists all four in ``manifest.json`` (a :class:`GoldManifest`) with their
SHA-256.

How the spec drives scoring (:mod:`autocad_bench_evaluator.scoring`):

* ``position``: ``"fixed"`` compares coordinates as drawn (the whole drawing moved by more
  than the tolerance fails); ``"free"`` first removes the best translation between candidate
  and gold, so moving the whole drawing costs nothing.
* ``tolerance.geometric`` is an absolute distance in drawing units, what a drafter accepts as
  "the same" (0.5 by default: half a millimetre in a millimetre drawing). It is the tolerance of
  every position *and* every size (length, radius, perimeter, width and height of the drawing,
  dimension measurement, 3D extent) whatever the size, so a drawing 1% too large or moved by
  1 mm fails. An item within it earns full credit, one beyond 1.5 times it none.
  ``tolerance.relative_size`` is ignored (kept so that older ``scoring.json`` files validate;
  0 by default). Angles (text and block rotation, angular dimensions) agree within 0.5 degrees,
  block scale factors within 0.001, text heights within ``min(geometric, 10%)`` of the gold's.
* What else is compared: a text's content, height and rotation; a hatch's fill (solid or the
  pattern name); the colour and linetype of the gold's layers that carry entities when the gold
  sets them (see :mod:`autocad_bench_evaluator.scoring` for the full list).
* ``weights`` give each component its share of the total. Weights are normalised by their sum,
  so only ratios matter; a zero weight switches a component off (it then neither scores nor
  counts defects). ``extents3d`` may only be positive in a schema-v4 spec (isolated physical 3D
  extents need v4 metadata).
* Defects: on top of the weighted components, every whole missing, extra or wrong item of a
  weighted component costs 10% of the total, at most 10% in all. One defect anywhere thus caps
  the total at 0.9 of the weighted mean, clearly below the default threshold; the gold scores
  exactly 1.0.
* ``pass_threshold``: the total at or above which the attempt passes, provided every
  ``required_layers`` entry carries at least one candidate entity and every ``required_text``
  entry occurs in candidate text (case-insensitive, whitespace collapsed).
* ``ignore_layers``: POINT entities on these layers (dimension definition points on
  ``Defpoints``) are left out on both sides; anything else drawn there counts as drawn, so
  such a layer cannot hide junk. Entities on layers that are off or frozen never count: they
  do not show on paper.

* ``baseline`` (edit tasks): the raw score of the task's unchanged template against its gold,
  computed when the suite is built. The reported total is ``(raw - baseline) / (1 - baseline)``
  clipped to [0, 1]: doing nothing scores 0, the gold 1, and because the untouched part of the
  drawing is already in the baseline, every entity damaged or left behind costs a multiple of
  its raw share (collateral damage cannot hide behind a large unchanged drawing).

Validation fails (pydantic ``ValidationError``) on unknown fields, negative or all-zero
weights, a threshold outside [0, 1], or a positive ``extents3d`` weight in a schema-v3 spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from autocad_bench.models import IDENTIFIER_PATTERN, Identifier, StrictModel

SchemaVersion = Literal[3, 4]
"""Drawing metadata schema: 3 = 2D entities with model/layout spaces, 4 = adds 3D extents."""

SCORING_FILENAME = "scoring.json"
GOLD_DXF = "gold.dxf"
GOLD_METADATA = "metadata.json"
GOLD_RENDER = "render.png"
MANIFEST_FILENAME = "manifest.json"
GOLD_FILES: tuple[str, ...] = (GOLD_DXF, GOLD_METADATA, GOLD_RENDER, SCORING_FILENAME)
"""Every file of a gold-cache entry besides ``manifest.json``; all are checksummed."""

Weight = Annotated[float, Field(ge=0.0, le=1000.0)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Tolerance(StrictModel):
    """How far candidate geometry may deviate from gold and still match: an absolute distance.

    ``geometric`` (drawing units, 0.5 by default: half a millimetre in a millimetre drawing) is
    the tolerance of every position and every size alike, whatever the size. ``relative_size``
    is kept only so that ``scoring.json`` files written before tolerances became absolute still
    validate; scoring ignores it (a 1% allowance let a 1.01x drawing of a 200 mm plate pass).
    """

    geometric: float = Field(default=0.5, gt=0.0, description="absolute distance, drawing units")
    relative_size: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="ignored; accepted for scoring.json files of older builds"
    )

    def size_tolerance(self, gold_size: float) -> float:
        """The allowed absolute difference for a size (any ``gold_size``): ``geometric``."""
        return self.geometric


class ComponentWeights(StrictModel):
    """Share of each scoring component in the total (normalised by their sum).

    * ``entities``: optimal one-to-one matching of geometric entities (per kind) within tolerance;
      hatches match on their fill (solid, or the pattern name) too.
    * ``dimensions``: sizes - DIMENSION measurements, circle/arc radii, line and polyline lengths,
      the drawing's width and height.
    * ``layers``: candidate layers that carry entities vs. gold, layer agreement of matched
      entities, and the colour/linetype of the gold's entity-carrying layers where the gold
      sets them (some layer not colour 7, or not Continuous).
    * ``topology``: closed profiles (closed polylines, closed chains, full circles: centroid,
      perimeter, area) and hole patterns (the set of circle centres relative to each other).
    * ``text``: TEXT/MTEXT content, insertion point, height and rotation.
    * ``extents3d``: isolated physical 3D extents of solids (schema v4 only).
    """

    entities: Weight = 0.4
    dimensions: Weight = 0.2
    layers: Weight = 0.1
    topology: Weight = 0.2
    text: Weight = 0.1
    extents3d: Weight = 0.0

    def as_dict(self) -> dict[str, float]:
        """The weights by component name, in a fixed order."""
        return {
            "entities": self.entities,
            "dimensions": self.dimensions,
            "layers": self.layers,
            "topology": self.topology,
            "text": self.text,
            "extents3d": self.extents3d,
        }

    @model_validator(mode="after")
    def _some_weight(self) -> ComponentWeights:
        if sum(self.as_dict().values()) <= 0.0:
            raise ValueError("at least one component weight must be positive")
        return self


class ScoringSpec(StrictModel):
    """``scoring.json``: how one task's candidate drawing is compared with its gold drawing."""

    task_id: Identifier
    schema_version: SchemaVersion = 3
    position: Literal["fixed", "free"] = "free"
    tolerance: Tolerance = Tolerance()
    weights: ComponentWeights = ComponentWeights()
    pass_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    required_layers: tuple[str, ...] = ()
    required_text: tuple[str, ...] = ()
    ignore_layers: tuple[str, ...] = ()
    baseline: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="raw score of the unchanged template (edit tasks); totals are rescaled from it",
    )

    @model_validator(mode="after")
    def _extents_need_v4(self) -> ScoringSpec:
        if self.weights.extents3d > 0.0 and self.schema_version != 4:
            raise ValueError("weights.extents3d > 0 requires schema_version 4")
        return self

    @property
    def scores_3d_extents(self) -> bool:
        """True when isolated physical 3D extents are part of deterministic scoring."""
        return self.weights.extents3d > 0.0


def load_scoring_spec(path: Path) -> ScoringSpec:
    """Read and validate a ``scoring.json``; raises ``OSError`` or pydantic ``ValidationError``."""
    return ScoringSpec.model_validate_json(Path(path).read_bytes())


class GoldEntry(StrictModel):
    """One checksummed file of a gold-cache entry (a name inside the entry directory)."""

    name: str = Field(pattern=IDENTIFIER_PATTERN)
    sha256: Sha256
    size: int = Field(ge=0)


class GoldManifest(StrictModel):
    """``manifest.json`` of ``<root>/<evaluator_version>/<task_id>/``: what the entry must hold."""

    task_id: Identifier
    evaluator_version: Identifier
    schema_version: SchemaVersion
    files: tuple[GoldEntry, ...]

    def file(self, name: str) -> GoldEntry | None:
        """The manifest record for ``name``, or None when the manifest does not list it."""
        for entry in self.files:
            if entry.name == name:
                return entry
        return None

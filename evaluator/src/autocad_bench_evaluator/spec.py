"""The scoring spec of one task and the manifest of one gold-cache entry.

Every task of the suite ships a ``scoring.json`` (a :class:`ScoringSpec`) beside its gold
generator. The gold cache (:mod:`autocad_bench_evaluator.gold_cache`) copies it into
``<root>/<evaluator_version>/<task_id>/`` together with ``gold.dxf``, ``metadata.json`` and
``render.png`` and lists all four in ``manifest.json`` (a :class:`GoldManifest`) with their
SHA-256.

How the spec drives scoring (:mod:`autocad_bench_evaluator.scoring`):

* ``position``: ``"fixed"`` compares coordinates as drawn; ``"free"`` first removes the best
  translation between candidate and gold, so moving the whole drawing costs nothing.
* ``tolerance.geometric`` is an absolute distance in drawing units; two points closer than it
  are equal. ``tolerance.relative_size`` is a fraction: two sizes (radius, length, dimension
  measurement, 3D extent) agree when they differ by at most
  ``max(tolerance.geometric, relative_size * gold size)``.
* ``weights`` give each component its share of the total. Weights are normalised by their sum,
  so only ratios matter; a zero weight switches a component off. ``extents3d`` may only be
  positive in a schema-v4 spec (isolated physical 3D extents need v4 metadata).
* ``pass_threshold``: the total at or above which the attempt passes, provided every
  ``required_layers`` entry carries at least one candidate entity and every ``required_text``
  entry occurs in candidate text (case-insensitive, whitespace collapsed).
* ``ignore_layers``: POINT entities on these layers (dimension definition points on
  ``Defpoints``) are left out on both sides; anything else drawn there counts as drawn, so
  such a layer cannot hide junk. Entities on layers that are off or frozen never count: they
  do not show on paper.

Validation fails (pydantic ``ValidationError``) on unknown fields, negative or all-zero
weights, a threshold outside [0, 1], or a positive ``extents3d`` weight in a schema-v3 spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from autocad_bench.models import Identifier, StrictModel

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
    """How far candidate geometry may deviate from gold and still match."""

    geometric: float = Field(default=0.5, gt=0.0, description="absolute distance, drawing units")
    relative_size: float = Field(default=0.01, ge=0.0, lt=1.0, description="fraction of the gold size")

    def size_tolerance(self, gold_size: float) -> float:
        """The allowed absolute difference for a size whose gold value is ``gold_size``."""
        return max(self.geometric, self.relative_size * abs(gold_size))


class ComponentWeights(StrictModel):
    """Share of each scoring component in the total (normalised by their sum).

    * ``entities``: optimal one-to-one matching of geometric entities (per kind) within tolerance.
    * ``dimensions``: sizes - DIMENSION measurements, circle/arc radii, line and polyline lengths.
    * ``layers``: candidate layers that carry entities vs. gold, plus layer agreement of matched
      entities.
    * ``topology``: closed profiles (closed polylines, full circles) and hole patterns (the set
      of circle centres relative to each other).
    * ``text``: TEXT/MTEXT content (and position within tolerance when position is scored).
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

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
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

"""What the controller tells the pilot about its rollout (``assignment.json``; no secrets)."""

from __future__ import annotations

from pydantic import Field

from autocad_bench.config.models import BudgetConfig
from autocad_bench.costs.pricing import PricingContract
from autocad_bench.models import EnvName, StrictModel
from autocad_bench.providers.models import DisplaySize, ModelSpec


class PilotAssignment(StrictModel):
    """Everything the child harness needs, written by the controller before launch.

    Credentials are named in ``credential_names`` and read from the child's environment;
    their values are never in this file.
    """

    batch_id: str
    rollout_id: str
    attempt_id: str
    task_id: str
    trial: int = Field(default=1, ge=1, description="1-based trial index of this rollout's assignment")
    task_prompt: str
    reference_png: str = Field(description="absolute path of the task's fixed reference image")
    model: ModelSpec
    budgets: BudgetConfig
    pricing: PricingContract | None = Field(
        default=None, description="the effective price table the batch was admitted with")
    display: DisplaySize = Field(default_factory=DisplaySize)
    credential_names: tuple[EnvName, ...] = ()
    infrastructure_backend: str
    infrastructure_hourly_usd: float | None = None
    task_provenance: dict[str, str | int | None] = Field(
        default_factory=dict, description="skill, family, family_version, seed, difficulty, split of the task")

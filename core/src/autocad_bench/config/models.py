"""The batch configuration file (JSON), validated with unknown fields rejected."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from autocad_bench.costs.budget import RolloutBudget
from autocad_bench.costs.pricing import PricingContract
from autocad_bench.infrastructure.models import InfrastructureSpec
from autocad_bench.models import EnvName, Identifier, JsonObject, StrictModel


class RolloutEntry(StrictModel):
    """One (task, provider, model) assignment; ``rollout_id`` names its output directory."""

    rollout_id: Identifier
    task_id: str = Field(min_length=1)
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    enabled: bool = True
    provider_options: JsonObject = Field(default_factory=dict)


BudgetConfig = RolloutBudget
"""Per-rollout limits (``budgets`` in the configuration); the action and invalid-turn limits
are the benchmark contract, cost, duration and turn caps are optional guardrails."""


class JudgeConfig(StrictModel):
    """The vision judge: a separate score, never merged into the deterministic one."""

    enabled: bool = True
    model: str = Field(default="gpt-5.1", min_length=1)
    credential_env: EnvName = "OPENAI_API_KEY"


class EvaluationConfig(StrictModel):
    """Trusted post-rollout evaluation. Disable only for deliberate unevaluated runs."""

    enabled: bool = True
    evaluator_version: str | None = None
    gold_cache: str | None = None
    bucket: str | None = None
    judge: JudgeConfig | None = None


class BatchConfig(StrictModel):
    """A benchmark batch: assignments, concurrency, infrastructure, evaluation, budgets."""

    name: str | None = None
    expected_rollouts: int = Field(ge=0)
    task_suite: str | None = None
    tasks_dir: str | None = Field(
        default=None, description="directory of task folders (task.json, reference.png, template), "
        "relative to the configuration file",
    )
    max_concurrency: int = Field(default=1, ge=1)
    execution_mode: Literal["shared", "subprocess"] = "shared"
    infrastructure: InfrastructureSpec
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    budgets: BudgetConfig = Field(default_factory=BudgetConfig)
    pricing: PricingContract | None = Field(
        default=None, description="a pinned price table; without it the dated defaults (plus "
        "AUTOCAD_BENCH_PRICING_JSON) are used and recorded in batch-state.json",
    )
    rollouts: list[RolloutEntry] = Field(min_length=1)

    @property
    def enabled_rollouts(self) -> list[RolloutEntry]:
        return [r for r in self.rollouts if r.enabled]

"""The batch configuration file (JSON), validated with unknown fields rejected."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from autocad_bench.costs.budget import RolloutBudget
from autocad_bench.costs.pricing import PricingContract
from autocad_bench.infrastructure.models import InfrastructureSpec
from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, ToolMode
from autocad_bench.models import EnvName, Identifier, JsonObject, StrictModel

MAX_CONCURRENCY = 10_000
MAX_EXPECTED_ROLLOUTS = 1_000_000


class RolloutEntry(StrictModel):
    """One (task, provider, model) assignment; ``rollout_id`` names its output directory."""

    rollout_id: Identifier
    task_id: str = Field(min_length=1)
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    enabled: bool = Field(default=True, strict=True)
    provider_options: JsonObject = Field(default_factory=dict)
    tool_mode: ToolMode = Field(
        default=DEFAULT_TOOL_MODE,
        description="how the model drives the desktop: \"function\" (the computer_action function tool) or "
        "\"native\" (the model maker's computer-use tool); the provider must support it, and results of "
        "different modes are never merged")


BudgetConfig = RolloutBudget
"""Per-rollout limits (``budgets`` in the configuration); the action and invalid-turn limits
are the benchmark contract, cost, duration and turn caps are optional guardrails."""


class JudgeConfig(StrictModel):
    """The vision judge: a separate score, never merged into the deterministic one."""

    enabled: bool = Field(default=True, strict=True)
    model: str = Field(default="gpt-5.1", min_length=1)
    credential_env: EnvName = "OPENAI_API_KEY"


class EvaluationConfig(StrictModel):
    """Trusted post-rollout evaluation. Disable only for deliberate unevaluated runs."""

    enabled: bool = Field(default=True, strict=True)
    evaluator: Identifier = Field(
        default="standard", description="the evaluator plugin (entry-point group autocad_bench.evaluators) "
        "that scores drawings; \"standard\" is autocad-bench-evaluator")
    evaluator_version: str | None = None
    gold_cache: str | None = None
    bucket: str | None = None
    judge: JudgeConfig | None = None


class BatchConfig(StrictModel):
    """A benchmark batch: assignments, concurrency, infrastructure, evaluation, budgets."""

    name: Identifier | None = Field(
        default=None, description="the batch's name; it may name files, so letters, digits, . _ - only "
        "(no separators, spaces or control characters, no leading dot), at most 128 characters",
    )
    expected_rollouts: int = Field(strict=True, ge=0, le=MAX_EXPECTED_ROLLOUTS)
    task_suite: str | None = None
    tasks_dir: str | None = Field(
        default=None, description="directory of task folders (task.json, reference.png, template), "
        "relative to the configuration file",
    )
    trials: int = Field(
        default=1, strict=True, ge=1, le=100, description="rollouts per enabled assignment; with more than one, "
        "trial n of assignment <rollout_id> runs as rollout <rollout_id>.t<n>",
    )
    max_concurrency: int = Field(default=1, strict=True, ge=1, le=MAX_CONCURRENCY)
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
        """The enabled assignments as written (each runs ``trials`` times)."""
        return [r for r in self.rollouts if r.enabled]

    @model_validator(mode="after")
    def _trial_ids_fit(self) -> Self:
        from autocad_bench.config.trials import MAX_ROLLOUT_ID_LENGTH, longest_trial_id

        errors = []
        for index, entry in enumerate(self.rollouts):
            longest = longest_trial_id(entry.rollout_id, self.trials)
            if len(longest) > MAX_ROLLOUT_ID_LENGTH:
                errors.append(InitErrorDetails(
                    type=PydanticCustomError(
                        "trial_id_too_long",
                        "with trials = {trials} the id of its last trial ('{suffix}' appended) has {length} "
                        "characters; rollout ids, trial suffix included, are at most {limit}",
                        {"trials": self.trials, "suffix": longest[len(entry.rollout_id):],
                         "length": len(longest), "limit": MAX_ROLLOUT_ID_LENGTH}),
                    loc=("rollouts", index, "rollout_id"), input=entry.rollout_id))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

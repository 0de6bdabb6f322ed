"""The JSON report printed by plan mode (and recorded by execute mode)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from autocad_bench.config.models import BudgetConfig
from autocad_bench.models import JsonObject, StrictModel


class AdmissionCheck(StrictModel):
    """One admission step: ``step`` is its number in the admission sequence."""

    step: int
    name: str
    passed: bool
    reason: str
    details: JsonObject = Field(default_factory=dict)


class AssignmentReport(StrictModel):
    """One planned rollout: ``assignment_id`` is the rollout id as written, ``trial`` which
    repeat of it this is (its ``rollout_id`` is ``<assignment_id>.t<trial>`` when trials > 1)."""

    rollout_id: str
    assignment_id: str
    trial: int = 1
    task_id: str
    provider: str
    model: str
    enabled: bool
    infrastructure_backend: str


class PlanReport(StrictModel):
    """Everything admission decided, in one JSON document."""

    mode: Literal["plan", "execute"]
    config: str
    name: str | None
    passed: bool
    infrastructure_backend: str
    broker_version: str
    execution_mode: Literal["shared", "subprocess"]
    expected_rollouts: int
    trials: int = 1
    enabled_rollouts: int
    allow_partial: bool
    max_concurrency: int
    admitted_wave: int
    budgets: BudgetConfig
    checks: list[AdmissionCheck]
    warnings: list[str] = Field(
        default_factory=list,
        description="things that do not stop the batch but change what it means, e.g. a model "
                    "billed at the fallback price because the price table does not list it")
    assignments: list[AssignmentReport]

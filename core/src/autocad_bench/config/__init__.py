"""Batch configuration: models, loading, and checks on backend settings."""

from autocad_bench.config.loading import (
    MAX_COST_ENV,
    MAX_DURATION_ENV,
    LoadedConfig,
    effective_budgets,
    load_config,
    parse_config_text,
)
from autocad_bench.config.models import (
    BatchConfig,
    BudgetConfig,
    EvaluationConfig,
    JudgeConfig,
    RolloutEntry,
)
from autocad_bench.config.secrets import literal_credentials
from autocad_bench.config.trials import PlannedRollout, expand_trials, trial_rollout_id

__all__ = [
    "MAX_COST_ENV",
    "MAX_DURATION_ENV",
    "BatchConfig",
    "BudgetConfig",
    "EvaluationConfig",
    "JudgeConfig",
    "LoadedConfig",
    "PlannedRollout",
    "RolloutEntry",
    "effective_budgets",
    "expand_trials",
    "literal_credentials",
    "load_config",
    "parse_config_text",
    "trial_rollout_id",
]

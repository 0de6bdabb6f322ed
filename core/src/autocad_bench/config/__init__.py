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

__all__ = [
    "MAX_COST_ENV",
    "MAX_DURATION_ENV",
    "BatchConfig",
    "BudgetConfig",
    "EvaluationConfig",
    "JudgeConfig",
    "LoadedConfig",
    "RolloutEntry",
    "effective_budgets",
    "literal_credentials",
    "load_config",
    "parse_config_text",
]

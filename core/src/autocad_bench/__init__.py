"""autocad-bench: measure how well LLM computer-use agents operate AutoCAD.

The public API for plugin authors and embedding applications is re-exported here; heavy
dependencies (cloud SDKs, provider SDKs, desktop drivers) are never imported by core.
Applications plan and run batches in-process with :func:`plan_batch` and :func:`run_batch`
(see :mod:`autocad_bench.api`), not through the console scripts' ``main()``.
"""

from autocad_bench.api import BatchNotAdmitted, BatchOutcome, plan_batch, run_batch
from autocad_bench.errors import ConfigError, PluginError, Problem, UserError
from autocad_bench.hookspecs import hookimpl
from autocad_bench.infrastructure import InfrastructurePlugin, InfrastructureRecoveryPlugin
from autocad_bench.observers import Observer
from autocad_bench.plugins import (
    PluginHost,
    register_infrastructure_plugin,
    register_model_provider,
    register_observer,
)
from autocad_bench.providers import ModelProvider, ProviderSession

__version__ = "0.1.0"

__all__ = [
    "BatchNotAdmitted",
    "BatchOutcome",
    "ConfigError",
    "InfrastructurePlugin",
    "InfrastructureRecoveryPlugin",
    "ModelProvider",
    "Observer",
    "PluginError",
    "PluginHost",
    "Problem",
    "ProviderSession",
    "UserError",
    "__version__",
    "hookimpl",
    "plan_batch",
    "register_infrastructure_plugin",
    "register_model_provider",
    "register_observer",
    "run_batch",
]

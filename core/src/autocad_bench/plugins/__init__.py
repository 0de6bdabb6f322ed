"""Plugin discovery, registration and routing."""

from autocad_bench.plugins.host import LOAD_PLUGINS_ENV, TRACE_PLUGINS_ENV, PluginHandle, PluginHost
from autocad_bench.plugins.registry import (
    PluginRegistry,
    default_registry,
    register_evaluator,
    register_infrastructure_plugin,
    register_model_provider,
    register_observer,
)

__all__ = [
    "LOAD_PLUGINS_ENV",
    "TRACE_PLUGINS_ENV",
    "PluginHandle",
    "PluginHost",
    "PluginRegistry",
    "default_registry",
    "register_evaluator",
    "register_infrastructure_plugin",
    "register_model_provider",
    "register_observer",
]

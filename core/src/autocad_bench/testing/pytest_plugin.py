"""pytest plugin (entry point ``pytest11``): fixtures for testing autocad-bench plugins.

Loaded automatically wherever autocad-bench is installed; it only defines fixtures, so it
changes nothing for test suites that do not use them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autocad_bench.plugins import PluginHost, PluginRegistry


@pytest.fixture
def plugin_registry() -> PluginRegistry:
    """A fresh in-process registry (isolated from the process-wide default)."""
    return PluginRegistry()


@pytest.fixture
def make_plugin_host(plugin_registry: PluginRegistry) -> Callable[..., PluginHost]:
    """Build a :class:`PluginHost` over :func:`plugin_registry` with a chosen environment."""

    def make(environ: dict[str, str] | None = None) -> PluginHost:
        return PluginHost(registry=plugin_registry, environ=environ or {})

    return make

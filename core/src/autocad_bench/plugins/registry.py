"""In-process plugin registrations for applications that embed the controller."""

from __future__ import annotations

import functools
import threading

from autocad_bench.errors import PluginError
from autocad_bench.plugins.kinds import KINDS, Kind


class PluginRegistry:
    """Plugins registered in-process, by kind and name; consulted before entry points.

    A :class:`~autocad_bench.plugins.host.PluginHost` reads it when it is created, so
    register before building a controller. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plugins: dict[Kind, dict[str, object]] = {kind: {} for kind in KINDS}

    def register(self, kind: Kind, plugin: object) -> None:
        """Register ``plugin`` (an instance or a class to instantiate) under its ``name``.

        Raises :class:`PluginError` when the plugin has no name or the name is taken.
        """
        name = getattr(plugin, "name", "")
        noun = KINDS[kind].noun
        if not isinstance(name, str) or not name:
            raise PluginError(f"cannot register {plugin!r}: a {noun} needs a non-empty 'name'")
        with self._lock:
            if name in self._plugins[kind]:
                raise PluginError(f"{noun} {name!r} is already registered in this process")
            self._plugins[kind][name] = plugin

    def unregister(self, kind: Kind, name: str) -> None:
        with self._lock:
            self._plugins[kind].pop(name, None)

    def get(self, kind: Kind, name: str) -> object | None:
        with self._lock:
            return self._plugins[kind].get(name)

    def names(self, kind: Kind) -> list[str]:
        with self._lock:
            return sorted(self._plugins[kind])

    def all(self, kind: Kind) -> list[object]:
        with self._lock:
            return list(self._plugins[kind].values())


@functools.cache
def default_registry() -> PluginRegistry:
    """The process-wide registry used when none is passed (created on first use, not at import)."""
    return PluginRegistry()


def register_infrastructure_plugin(plugin: object, *, registry: PluginRegistry | None = None) -> None:
    """Make a backend selectable by name in this process without publishing an entry point."""
    (registry or default_registry()).register("infrastructure", plugin)


def register_model_provider(plugin: object, *, registry: PluginRegistry | None = None) -> None:
    """Make a model provider selectable by name in this process without an entry point."""
    (registry or default_registry()).register("providers", plugin)


def register_evaluator(plugin: object, *, registry: PluginRegistry | None = None) -> None:
    """Make an evaluator selectable by name (``evaluation.evaluator``) in this process."""
    (registry or default_registry()).register("evaluators", plugin)


def register_observer(plugin: object, *, registry: PluginRegistry | None = None) -> None:
    """Add an observer to every controller built afterwards in this process."""
    (registry or default_registry()).register("observers", plugin)

"""The plugin manager of one controller: discovery, lazy loading, validation, routing."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from autocad_bench import hookspecs
from autocad_bench.errors import MissingExtraError, PluginError, RecoveryNotSupportedError
from autocad_bench.plugins.base import PluginBase
from autocad_bench.plugins.kinds import KINDS, Kind
from autocad_bench.plugins.registry import PluginRegistry, default_registry

log = logging.getLogger(__name__)

LOAD_PLUGINS_ENV = "AUTOCAD_BENCH_LOAD_PLUGINS"
TRACE_PLUGINS_ENV = "AUTOCAD_BENCH_TRACE_PLUGINS"

EntryPointSource = Callable[[str], Iterable[EntryPoint]]


def _installed_entry_points(group: str) -> Iterable[EntryPoint]:
    return entry_points(group=group)


class _PluginManager(pluggy.PluginManager):
    """pluggy manager that also accepts unmarked overrides in our base-class subclasses."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and isinstance(plugin, PluginBase) and name in type(plugin).hook_names:
            method = getattr(plugin, name, None)
            if inspect.isroutine(method):
                return pluggy.HookimplOpts(
                    wrapper=False, hookwrapper=False, optionalhook=False,
                    tryfirst=False, trylast=False, specname=None,
                )
        return opts


class PluginHandle:
    """One loaded plugin; hook calls through it reach that plugin only."""

    def __init__(self, host: PluginHost, kind: Kind, name: str, plugin: object) -> None:
        self._host = host
        self.kind = kind
        self.name = name
        self.plugin = plugin

    def implements(self, hook: str) -> bool:
        caller = getattr(self._host._pm.hook, hook)
        return any(impl.plugin is self.plugin for impl in caller.get_hookimpls())

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on this plugin alone and return its single result."""
        if not self.implements(hook):
            raise PluginError(f"{KINDS[self.kind].noun} {self.name!r} does not implement {hook!r}")
        others = [p for p in self._host._pm.get_plugins() if p is not self.plugin]
        return self._host._pm.subset_hook_caller(hook, remove_plugins=others)(**kwargs)

    @property
    def supports_recovery(self) -> bool:
        return all(self.implements(h) for h in hookspecs.RECOVERY_HOOKS)

    def require_recovery(self) -> None:
        """Raise :class:`RecoveryNotSupportedError` unless every recovery hook is implemented."""
        if not self.supports_recovery:
            missing = [h for h in hookspecs.RECOVERY_HOOKS if not self.implements(h)]
            raise RecoveryNotSupportedError(
                f"backend {self.name!r} does not implement the recovery protocol "
                f"(missing: {', '.join(missing)}); its interrupted rollouts cannot be resumed"
            )


class PluginHost:
    """Builds and owns the pluggy manager of one controller.

    Nothing is loaded at construction except observers (every observer sees every event);
    backends and providers are imported only when :meth:`infrastructure` or
    :meth:`provider` selects them by name, so a broken plugin nobody selected cannot break
    a batch. In-process registrations (:func:`register_infrastructure_plugin`) win over
    nothing: a name both registered and installed is a duplicate and an error.

    ``AUTOCAD_BENCH_LOAD_PLUGINS`` (comma-separated entry-point names) restricts which
    installed entry points may load; in-process registrations are always allowed.
    ``AUTOCAD_BENCH_TRACE_PLUGINS=1`` writes every hook call and result to stderr.
    """

    def __init__(
        self,
        *,
        registry: PluginRegistry | None = None,
        environ: Mapping[str, str] | None = None,
        entry_point_source: EntryPointSource = _installed_entry_points,
        trace_writer: Callable[[str], object] | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        self._registry = registry if registry is not None else default_registry()
        self._entry_points = entry_point_source
        self._pm = _PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        allow = environ.get(LOAD_PLUGINS_ENV)
        self._allow: frozenset[str] | None = (
            frozenset(n.strip() for n in allow.split(",") if n.strip()) if allow is not None else None
        )
        self._handles: dict[tuple[Kind, str], PluginHandle] = {}
        self._lock = threading.RLock()
        if environ.get(TRACE_PLUGINS_ENV, "").lower() in {"1", "true", "yes", "on"}:
            self._pm.trace.root.setwriter(trace_writer or sys.stderr.write)
            self._pm.enable_tracing()
        for plugin in self._registry.all("observers"):
            self._register("observers", str(getattr(plugin, "name", "")), plugin)
        for ep in self._entry_points(KINDS["observers"].group):
            if self._allowed(ep.name):
                self._register("observers", ep.name, self._load_entry_point("observers", ep))

    # --- discovery ---------------------------------------------------------------------

    def installed_names(self, kind: Kind) -> list[str]:
        """Names selectable for ``kind``: in-process registrations and allowed entry points."""
        names = set(self._registry.names(kind))
        names.update(ep.name for ep in self._entry_points(KINDS[kind].group) if self._allowed(ep.name))
        return sorted(names)

    def infrastructure(self, name: str) -> PluginHandle:
        """Load (once) and return the backend called ``name``."""
        return self._select("infrastructure", name)

    def provider(self, name: str) -> PluginHandle:
        """Load (once) and return the model provider called ``name``."""
        return self._select("providers", name)

    def evaluator(self, name: str) -> PluginHandle:
        """Load (once) and return the evaluator called ``name``."""
        return self._select("evaluators", name)

    def observers(self) -> list[PluginHandle]:
        return [h for (kind, _), h in self._handles.items() if kind == "observers"]

    # --- observer broadcast ------------------------------------------------------------

    def has_implementations(self, hook: str) -> bool:
        """Whether any registered plugin implements ``hook`` (lets callers skip building events)."""
        return bool(getattr(self._pm.hook, hook).get_hookimpls())

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Deliver an observer event to every implementation; a failing observer is logged."""
        if hook not in hookspecs.OBSERVER_HOOKS:
            raise ValueError(f"{hook!r} is not an observer hook")
        for impl in getattr(self._pm.hook, hook).get_hookimpls():
            others = [p for p in self._pm.get_plugins() if p is not impl.plugin]
            try:
                self._pm.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
            except Exception:
                log.exception("observer %s failed in %s", impl.plugin_name, hook)

    @contextlib.contextmanager
    def observing(self, observer: object, name: str) -> Iterator[None]:
        """Deliver observer events to ``observer`` too while the block runs.

        For observers that live shorter than the host, such as a batch's progress display.
        ``observer`` is validated like any plugin and may implement observer hooks only;
        otherwise :class:`PluginError` is raised and nothing is registered. It is removed
        when the block exits, however it exits.
        """
        with self._lock:
            try:
                self._pm.register(observer, name=f"observers:{name}")
                self._pm.check_pending()
                other = sorted(c.name for c in self._pm.get_hookcallers(observer) or ()
                               if c.name not in hookspecs.OBSERVER_HOOKS)
                if other:
                    raise PluginError(f"observer {name!r} implements non-observer hooks: {', '.join(other)}")
            except (pluggy.PluginValidationError, ValueError, PluginError) as error:
                if self._pm.is_registered(observer):
                    self._pm.unregister(observer)
                if isinstance(error, PluginError):
                    raise
                raise PluginError(f"observer {name!r} is invalid: {error}") from error
        try:
            yield
        finally:
            with self._lock:
                self._pm.unregister(observer)

    # --- internals ---------------------------------------------------------------------

    def _allowed(self, name: str) -> bool:
        return self._allow is None or name in self._allow

    def _select(self, kind: Kind, name: str) -> PluginHandle:
        with self._lock:  # sandboxes on worker threads select providers concurrently
            return self._select_locked(kind, name)

    def _select_locked(self, kind: Kind, name: str) -> PluginHandle:
        key = (kind, name)
        if key in self._handles:
            return self._handles[key]
        info = KINDS[kind]
        registered = self._registry.get(kind, name)
        candidates = [ep for ep in self._entry_points(info.group) if ep.name == name]
        if registered is not None and candidates:
            raise PluginError(
                f"{info.noun} {name!r} is both registered in-process and installed by "
                f"{_dist_names(candidates)}; names must be unique"
            )
        if len({ep.value for ep in candidates}) > 1:
            raise PluginError(
                f"{info.noun} {name!r} is installed more than once ({_dist_names(candidates)}); "
                "uninstall one of them"
            )
        if registered is not None:
            plugin = registered
        elif candidates and self._allowed(name):
            plugin = self._load_entry_point(kind, candidates[0])
        elif candidates:
            raise PluginError(
                f"{info.noun} {name!r} is installed but not allowed by {LOAD_PLUGINS_ENV}="
                f"{','.join(sorted(self._allow or ()))}"
            )
        elif name in info.extras:
            raise MissingExtraError(f"{info.noun} {name!r}", info.extras[name], self.installed_names(kind))
        else:
            installed = self.installed_names(kind)
            raise PluginError(f"{info.noun} {name!r} is not installed (installed: {', '.join(installed) or 'none'})")
        return self._register(kind, name, plugin)

    def _load_entry_point(self, kind: Kind, ep: EntryPoint) -> object:
        noun = KINDS[kind].noun
        try:
            return ep.load()
        except Exception as error:
            raise PluginError(
                f"{noun} {ep.name!r} ({ep.value}, from {_dist_names([ep])}) failed to load: "
                f"{type(error).__name__}: {error}"
            ) from error

    def _register(self, kind: Kind, name: str, plugin: object) -> PluginHandle:
        info = KINDS[kind]
        if inspect.isclass(plugin):
            try:
                plugin = plugin()
            except TypeError as error:
                raise PluginError(f"{info.noun} {name!r} cannot be instantiated: {error}") from error
        declared = getattr(plugin, "name", None)
        if declared != name:
            raise PluginError(
                f"{info.noun} entry point {name!r} loads a plugin whose name is {declared!r}; "
                "they must be equal"
            )
        try:
            self._pm.register(plugin, name=f"{kind}:{name}")
        except (pluggy.PluginValidationError, ValueError) as error:
            raise PluginError(f"{info.noun} {name!r} is invalid: {error}") from error
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as error:
            self._pm.unregister(plugin)
            raise PluginError(f"{info.noun} {name!r} is invalid: {error}") from error
        handle = PluginHandle(self, kind, name, plugin)
        missing = [h for h in info.required_hooks if not handle.implements(h)]
        if missing:
            self._pm.unregister(plugin)
            raise PluginError(f"{info.noun} {name!r} does not implement {', '.join(missing)}")
        self._handles[(kind, name)] = handle
        return handle


def _dist_names(eps: Iterable[EntryPoint]) -> str:
    names = sorted({ep.dist.name if ep.dist is not None else ep.value for ep in eps})
    return ", ".join(names)

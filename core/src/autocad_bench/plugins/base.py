"""What every plugin base class shares: a name and hook-method detection."""

from __future__ import annotations

import difflib
import inspect
from typing import ClassVar

from autocad_bench.errors import PluginError


class PluginBase:
    """Base of :class:`InfrastructurePlugin`, :class:`ModelProvider` and :class:`Observer`.

    Subclasses override hook methods by name; the ``@hookimpl`` marker is optional on them
    (the plugin manager treats any method named like one of the kind's hooks as an
    implementation). A public method whose name is one typo away from a hook name is an
    error when the class is defined, so ``def validate_specs`` never silently does nothing.
    """

    name: ClassVar[str] = ""
    hook_names: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for attr, value in vars(cls).items():
            if attr.startswith("_") or attr in cls.hook_names or not inspect.isfunction(value):
                continue
            close = difflib.get_close_matches(attr, cls.hook_names, n=1, cutoff=0.85)
            if close:
                raise PluginError(
                    f"{cls.__module__}.{cls.__qualname__}.{attr} matches no hook; "
                    f"did you mean {close[0]!r}?"
                )

"""The ``provider_options`` contract: every provider declares a pydantic options model.

A provider's :attr:`~autocad_bench.providers.base.ModelProvider.options_model` is a pydantic
model with ``extra="forbid"`` that describes everything a rollout may put under
``rollouts[].provider_options``. Core validates a rollout's options through it at admission
(before any sandbox starts), exactly as backends' ``settings_model`` validates
``infrastructure.settings``, and reports one located problem per wrong value::

    batch.json: $.rollouts[0].provider_options.timeout_s: Input should be greater than 0
    batch.json: $.rollouts[0].provider_options.speed: unknown field

Everything here is SDK-free and never raises for bad input: junk options become problems.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from autocad_bench.errors import PluginError, Problem
from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, TOOL_MODES
from autocad_bench.validation import problems_from_validation_error


class NoOptions(BaseModel):
    """The options model of a provider that takes no options: any key is an unknown field."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def options_model_problem(model: object) -> str | None:
    """Why ``model`` cannot serve as an options model, or ``None`` when it can.

    It must be a pydantic model class whose configuration forbids extra keys, so an unknown
    or misspelled option is an error instead of a silently ignored setting.
    """
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return f"options_model must be a pydantic BaseModel subclass, not {model!r}"
    extra = model.model_config.get("extra")
    if extra != "forbid":
        return (f"options_model {model.__qualname__} must set model_config extra='forbid' "
                f"(it is {extra!r}): unknown provider_options would be silently accepted")
    return None


def check_options_model(provider: type) -> None:
    """Raise :class:`PluginError` when ``provider.options_model`` breaks :func:`options_model_problem`
    or ``provider.tool_modes`` names a mode that does not exist (see :data:`TOOL_MODES`)."""
    problem = options_model_problem(getattr(provider, "options_model", None))
    modes = getattr(provider, "tool_modes", frozenset({DEFAULT_TOOL_MODE}))
    if problem is None and not (isinstance(modes, frozenset) and modes and modes <= set(TOOL_MODES)):
        problem = (f"tool_modes must be a non-empty frozenset of {', '.join(TOOL_MODES)}, not {modes!r}")
    if problem is not None:
        raise PluginError(f"{provider.__module__}.{provider.__qualname__}: {problem}")


def tool_modes_of(provider: object) -> frozenset[str]:
    """The tool modes ``provider`` declares in ``tool_modes`` (only ``function`` when it declares none)."""
    modes = getattr(provider, "tool_modes", None)
    if isinstance(modes, (set, frozenset, tuple, list)) and all(isinstance(m, str) for m in modes):
        return frozenset(modes)
    return frozenset({DEFAULT_TOOL_MODE})


def tool_mode_message(provider: str, mode: str, supported: frozenset[str]) -> str:
    """The plan error for a rollout asking ``provider`` for a tool mode it does not speak."""
    return (f"provider {provider!r} has no {mode!r} tool mode (it supports: {', '.join(sorted(supported))}); "
            f"use one of those or a provider that implements {mode!r}")


def validate_options(model: type[BaseModel], options: Any, location: str) -> tuple[list[Problem], BaseModel | None]:
    """Validate ``options`` against ``model``; never raises.

    Returns the located problems (``location`` is the ``provider_options`` path, e.g.
    ``"batch.json: $.rollouts[0].provider_options"``) and the parsed options, which are
    ``None`` whenever there is a problem. Several pydantic errors at one path (the members
    of a union) are joined into one message, so each wrong value is reported once.
    """
    try:
        return [], model.model_validate(options)
    except ValidationError as error:
        return merged(problems_from_validation_error(error, location)), None
    except (TypeError, ValueError) as error:  # a validator that raised something pydantic did not wrap
        return [Problem(location, str(error) or type(error).__name__)], None


def merged(problems: list[Problem]) -> list[Problem]:
    """One problem per location, in first-seen order; messages at one location joined with ``; or ``."""
    by_location: dict[str, list[str]] = {}
    for problem in problems:
        messages = by_location.setdefault(problem.location, [])
        if problem.message not in messages:
            messages.append(problem.message)
    return [Problem(location, "; or ".join(messages)) for location, messages in by_location.items()]

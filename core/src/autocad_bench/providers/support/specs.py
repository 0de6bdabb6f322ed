"""Validation of a model spec by hand: its id and its ``provider_options``, as located problems.

Providers normally declare ``ModelProvider.options_model`` instead and let the base class
validate (see :mod:`autocad_bench.providers.options`); these helpers remain for code that
parses a spec outside a provider's ``validate_model_spec``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from autocad_bench.errors import Problem
from autocad_bench.providers.models import ModelSpec
from autocad_bench.validation import problems_from_validation_error

Options = TypeVar("Options")


def id_problems(model: ModelSpec, location: str) -> list[Problem]:
    """The problem of an empty model id, if it is empty."""
    if not isinstance(model.model, str) or not model.model.strip():
        return [Problem(f"{location}.model", "model id must not be empty")]
    return []


def spec_problems(model: ModelSpec, location: str,
                  parse: Callable[[ModelSpec], Options]) -> tuple[list[Problem], Options | None]:
    """Located problems of the id and the options of ``model`` (never raises), and the parsed options.

    The options are ``None`` when they do not parse; their problems are then located
    under ``{location}.provider_options``.
    """
    problems = id_problems(model, location)
    where = f"{location}.provider_options"
    try:
        return problems, parse(model)
    except ValidationError as error:
        return problems + problems_from_validation_error(error, where), None
    except (TypeError, ValueError) as error:
        return [*problems, Problem(where, str(error))], None

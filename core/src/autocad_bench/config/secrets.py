"""Refusing literal credentials in backend-owned settings."""

from __future__ import annotations

import re

from pydantic import JsonValue

from autocad_bench.errors import Problem
from autocad_bench.validation import json_path

# Key names that hold a credential when given a literal value.
_SECRET_KEY = re.compile(
    r"(secret|token|passw(or)?d|passphrase|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth)",
    re.IGNORECASE,
)
# Keys that *name* an environment variable or a native credential provider are fine.
_REFERENCE_KEY = re.compile(r"(_env|_env_var|_variable|_var|_profile|_provider|_name|_file|_path)$", re.IGNORECASE)


def literal_credentials(settings: JsonValue, location: str) -> list[Problem]:
    """Every key in ``settings`` (recursively) that looks like a credential with a literal value.

    The value itself is never included in the problem text.
    """
    problems: list[Problem] = []
    _walk(settings, [], location, problems)
    return problems


def _walk(value: JsonValue, parts: list[int | str], location: str, out: list[Problem]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            here = [*parts, key]
            if (
                _SECRET_KEY.search(key)
                and not _REFERENCE_KEY.search(key)
                and isinstance(item, (str, int, float))
                and not isinstance(item, bool)
                and str(item) != ""
            ):
                out.append(
                    Problem(
                        location + json_path(here, root=""),
                        "looks like a literal credential; backend settings must name an "
                        f"environment variable instead (e.g. \"{key}_env\": \"MY_{key.upper()}\") "
                        "or rely on the backend's native credential provider",
                    )
                )
            else:
                _walk(item, here, location, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, [*parts, index], location, out)

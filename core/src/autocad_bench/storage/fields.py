"""Tolerant typed reads of JSON values written by other processes (possibly mid-write).

A value of the wrong type reads as absent (``None`` or empty), never as an error: readers of
live output trees (the dashboard, the metrics) treat a file they cannot make sense of as a
file that is not there yet.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty dict for anything else."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A JSON array, or an empty list for anything else."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    """A JSON string, or None for anything else."""
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int | None:
    """A JSON integer, or None for anything else (``true`` and ``false`` are not integers)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: Any) -> float | None:
    """A JSON number as a float, or None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def as_bool(value: Any) -> bool | None:
    """A JSON boolean, or None for anything else."""
    return value if isinstance(value, bool) else None


def as_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` accepted); naive times are taken as UTC."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

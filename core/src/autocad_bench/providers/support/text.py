"""Short, single-line text for error messages, telemetry and checkpoint summaries."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """``text`` on one line (white space folded), cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."

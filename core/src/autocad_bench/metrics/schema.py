"""Print the leaderboard JSON Schema: ``python -m autocad_bench.metrics.schema``.

The repository publishes its output as ``docs/schemas/leaderboard-1.schema.json``; a test
fails when the two differ, so a change to the document's shape is always a visible,
versioned change (bump :data:`~autocad_bench.metrics.leaderboard.SCHEMA_VERSION` when it is
not backward compatible).
"""

from __future__ import annotations

import json

from autocad_bench.metrics.leaderboard import leaderboard_schema


def schema_text() -> str:
    """The leaderboard JSON schema as published (sorted, indented, newline-terminated); it must equal
    ``docs/schemas/leaderboard-1.schema.json`` (a test checks).
    """
    return json.dumps(leaderboard_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")

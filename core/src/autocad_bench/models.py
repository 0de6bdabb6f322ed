"""Small pydantic building blocks shared by every boundary model."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue

# A JSON object whose values are any JSON (used for backend settings and provider options).
JsonObject = dict[str, JsonValue]

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""The one pattern of names that also become file and directory names (rollout, task, batch,
session and artifact names): one path segment, no separators, no leading dot, at most 128."""
IDENTIFIER_RE = re.compile(IDENTIFIER_PATTERN)

Identifier = Annotated[str, Field(pattern=IDENTIFIER_PATTERN, description="letters, digits, . _ -")]

# Environment variable names (never their values).
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class StrictModel(BaseModel):
    """Configuration and wire models: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ArtifactRef(StrictModel):
    """A file the harness produced, named relative to the rollout directory, with its checksum."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    media_type: str = "image/png"
    width: int | None = None
    height: int | None = None

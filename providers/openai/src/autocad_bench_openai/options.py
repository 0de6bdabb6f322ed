"""``provider_options`` of the ``openai`` provider."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenaiOptions(BaseModel):
    """Options of one OpenAI model (all optional; unknown keys are errors).

    ``history_turns`` bounds the compact controller history: it keeps between
    ``history_turns`` and ``2 * history_turns`` past tool calls with their outcomes and drops
    the oldest half at once when the upper bound is passed, so the request prefix stays
    byte-stable (and prompt-cacheable) between two cuts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, description="API base URL (default: OpenAI's)")
    max_output_tokens: int = Field(default=4096, ge=16, le=256_000)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    reasoning_summary: Literal["auto", "concise", "detailed"] | None = None
    image_detail: Literal["auto", "low", "high", "original"] = "auto"
    history_turns: int = Field(default=16, ge=1, le=500)
    store: bool = False
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    timeout_s: float = Field(default=600.0, gt=0, le=3600, allow_inf_nan=False)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/") if value else value

"""``provider_options`` of the ``openai`` provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_ENV = "OPENAI_BASE_URL"
"""The environment variable of the base URL (as the official SDK names it), used when
``provider_options.base_url`` is unset."""


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
    computer_tool: Literal["computer", "computer_use_preview"] | None = Field(
        default=None, description="native mode: the computer tool variant (default: by model id)")
    safety_checks: Literal["acknowledge", "stop"] = Field(
        default="stop", description="native mode: what a computer call's pending_safety_checks do")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value) if value is not None else None


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


@dataclass(frozen=True, slots=True)
class BaseUrl:
    """The base URL requests go to and where it came from (for the plan report and errors)."""

    url: str
    source: Literal["config", "environment", "default"]

    @property
    def origin(self) -> str:
        """Where the URL was set, as a user would look for it."""
        if self.source == "config":
            return "provider_options.base_url"
        if self.source == "environment":
            return f"environment {BASE_URL_ENV}"
        return "the default"

    def __str__(self) -> str:
        return f"{self.url} (from {self.origin})"


def resolve_base_url(options: OpenaiOptions, environment: Mapping[str, str]) -> BaseUrl:
    """``provider_options.base_url`` wins, then ``OPENAI_BASE_URL``, then OpenAI's own URL.

    ``environment`` is what the provider was handed (its :class:`Credentials`): admission
    passes ``OPENAI_BASE_URL`` through when it is set, see
    :attr:`autocad_bench_openai.provider.OpenaiProvider.optional_env`. An empty variable
    counts as unset; a value that is not an http(s) URL raises :class:`ValueError` naming it.
    """
    if options.base_url:
        return BaseUrl(options.base_url, "config")
    value = (environment.get(BASE_URL_ENV) or "").strip()
    if value:
        try:
            return BaseUrl(_http_url(value), "environment")
        except ValueError:
            raise ValueError(f"{BASE_URL_ENV}={value!r} must be an http:// or https:// URL") from None
    return BaseUrl(DEFAULT_BASE_URL, "default")

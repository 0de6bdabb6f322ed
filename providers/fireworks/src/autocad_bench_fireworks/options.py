"""``provider_options`` of the ``fireworks`` provider and the pinned profile."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from autocad_bench.errors import Problem
from autocad_bench.providers.models import ModelSpec

DEFAULT_BASE_URL = "https://api.fireworks.ai/inference/v1"
PINNED_PROFILE = "fireworks-kimi-k2p6-fast-chat"
PINNED_MODEL = "accounts/fireworks/routers/kimi-k2p6-fast"
PROFILE_THINKING_BUDGET = 1024
PROFILE_MAX_TOKENS = 2048
MiB = 1024 * 1024
SERVICE_TIER_REFUSED = ("not supported: the Fast tier is selected by the router model id and excludes Priority "
                        "service_tier")


class FireworksOptions(BaseModel):
    """Options of one Fireworks model (all optional; the pinned profile fills the defaults).

    There is deliberately no ``service_tier``: the Fast tier is selected by the router
    model id, and Fireworks treats Priority ``service_tier`` as mutually exclusive with it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: Literal["fireworks-kimi-k2p6-fast-chat"] | None = None
    base_url: str = Field(default=DEFAULT_BASE_URL, pattern=r"^https?://\S+$")
    max_tokens: int = Field(default=PROFILE_MAX_TOKENS, ge=16, le=262_144)
    thinking_budget_tokens: int | None = Field(
        default=None, ge=0, le=262_144,
        description="Anthropic-style thinking budget; default 1024 for the pinned profile, off otherwise; 0 = off")
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    prompt_cache_key: bool = True
    session_affinity: bool = True
    strict_tools: bool = True
    max_messages: int = Field(default=24, ge=4, le=1000)
    max_request_bytes: int = Field(default=8 * MiB, ge=64 * 1024, le=64 * MiB)
    max_images: int = Field(default=30, ge=2, le=30)
    max_image_base64_bytes: int = Field(default=10_000_000, ge=64 * 1024, le=10_000_000)
    summary_outcomes: int = Field(default=16, ge=1, le=64)
    timeout_s: float = Field(default=300.0, gt=0, le=3600)
    telemetry: bool = True
    service_tier: None = Field(default=None, exclude=True,
                               description="refused: listed only to explain why (see the class docstring)")

    @field_validator("service_tier", mode="before")
    @classmethod
    def _no_service_tier(cls, value: Any) -> None:
        raise PydanticCustomError("service_tier_refused", SERVICE_TIER_REFUSED)

    @model_validator(mode="after")
    def _consistent(self) -> FireworksOptions:
        if self.thinking_budget_tokens and self.reasoning_effort is not None:
            raise ValueError("set thinking_budget_tokens or reasoning_effort, not both")
        if self.thinking_budget_tokens is not None and self.thinking_budget_tokens >= self.max_tokens:
            raise ValueError(
                f"thinking_budget_tokens ({self.thinking_budget_tokens}) must be below max_tokens ({self.max_tokens})"
            )
        return self

    def thinking_budget(self, model: str) -> int:
        """The effective thinking budget (0 = no thinking parameter is sent)."""
        if self.thinking_budget_tokens is not None:
            return self.thinking_budget_tokens
        if self.reasoning_effort is None and (self.profile == PINNED_PROFILE or model == PINNED_MODEL):
            return min(PROFILE_THINKING_BUDGET, self.max_tokens - 1)
        return 0

    def profile_name(self, model: str) -> str | None:
        return self.profile or (PINNED_PROFILE if model == PINNED_MODEL else None)


def parse_options(model: ModelSpec) -> FireworksOptions:
    """The model's options as :class:`FireworksOptions`; raises pydantic's ``ValidationError``
    when they do not validate.
    """
    return FireworksOptions.model_validate(model.options)


def profile_problems(model: ModelSpec, options: FireworksOptions, location: str) -> list[Problem]:
    """The pinned profile names its model: any other id is a problem at ``{location}.model``."""
    if options.profile == PINNED_PROFILE and model.model != PINNED_MODEL:
        return [Problem(
            f"{location}.model",
            f"profile {PINNED_PROFILE!r} pins model {PINNED_MODEL!r}, not {model.model!r}",
        )]
    return []

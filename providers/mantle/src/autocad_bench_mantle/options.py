"""``provider_options`` of the ``mantle`` provider, the pinned Kimi profile and endpoint resolution."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from autocad_bench.errors import Problem
from autocad_bench.providers.models import ModelSpec

PINNED_PROFILE = "mantle-kimi-k2.5-chat"
PINNED_MODEL = "moonshotai.kimi-k2.5"
CHAT_ONLY_MODELS = frozenset({PINNED_MODEL})
"""Models that do not support Mantle Responses."""
ENDPOINT_ENV = "AWS_ENDPOINT_URL_BEDROCK_MANTLE"
"""Overrides the Mantle endpoint root (``.../v1`` is appended), like botocore's per-service variables."""
REGION_PATTERN = r"^[a-z]{2,8}(-[a-z0-9]+)+-\d+$"
MiB = 1024 * 1024

Api = Literal["chat", "responses", "auto"]


class MantleOptions(BaseModel):
    """Options of one Mantle model. Credentials come from the AWS chain, never from here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: Literal["mantle-kimi-k2.5-chat"] | None = None
    region: str | None = Field(default=None, pattern=REGION_PATTERN)
    aws_profile: str | None = Field(default=None, min_length=1, max_length=128)
    base_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    api: Api | None = Field(default=None, description="chat for Kimi K2.5; auto (catalog-advertised) otherwise")
    max_tokens: int = Field(default=4096, ge=16, le=262_144)
    temperature: float | None = Field(default=None, ge=0, le=2)
    strict_tools: bool | None = Field(
        default=None, description="default: on for Kimi K2.5 Chat; controller-side validation for other models")
    max_messages: int = Field(default=24, ge=4, le=1000)
    max_request_bytes: int = Field(default=3 * MiB, ge=64 * 1024, le=64 * MiB)
    max_images: int = Field(default=30, ge=2, le=100)
    max_image_base64_bytes: int = Field(default=10_000_000, ge=64 * 1024, le=64 * MiB)
    summary_outcomes: int = Field(default=16, ge=1, le=64)
    timeout_s: float = Field(default=300.0, gt=0, le=3600)
    require_advertised_image_input: bool = True
    telemetry: bool = True

    @model_validator(mode="after")
    def _profile(self) -> MantleOptions:
        if self.profile == PINNED_PROFILE and self.api == "responses":
            raise ValueError(f"profile {PINNED_PROFILE!r} uses Chat Completions; Kimi K2.5 has no Mantle Responses")
        return self

    def resolved_api(self, model: str) -> Api:
        if self.api is not None:
            return self.api
        return "chat" if model in CHAT_ONLY_MODELS or self.profile == PINNED_PROFILE else "auto"

    def strict(self, api: Literal["chat", "responses"], model: str) -> bool:
        """Strict tools only where verified: Kimi K2.5 over Chat; others validate in the controller."""
        if self.strict_tools is not None:
            return self.strict_tools
        return api == "chat" and (model in CHAT_ONLY_MODELS or self.profile == PINNED_PROFILE)

    def profile_name(self, model: str) -> str | None:
        return self.profile or (PINNED_PROFILE if model == PINNED_MODEL else None)


def parse_options(model: ModelSpec) -> MantleOptions:
    """The model's options as :class:`MantleOptions`; raises pydantic's ``ValidationError``
    when they do not validate.
    """
    return MantleOptions.model_validate(model.options)


def base_url(options: MantleOptions, region: str, environ: Mapping[str, str] | None = None) -> str:
    """The OpenAI-compatible root: the option, the endpoint variable, or ``bedrock-mantle.{region}``."""
    if options.base_url:
        return options.base_url.rstrip("/")
    env = os.environ if environ is None else environ
    override = env.get(ENDPOINT_ENV, "").strip()
    if override:
        return override.rstrip("/") + "/v1"
    return f"https://bedrock-mantle.{region}.api.aws/v1"


def model_problems(model: ModelSpec, options: MantleOptions, location: str) -> list[Problem]:
    """Problems of ``options`` that depend on the model id: the pinned profile's model, chat-only models."""
    problems: list[Problem] = []
    if options.profile == PINNED_PROFILE and model.model != PINNED_MODEL:
        problems.append(Problem(f"{location}.model",
                                f"profile {PINNED_PROFILE!r} pins model {PINNED_MODEL!r}, not {model.model!r}"))
    if model.model in CHAT_ONLY_MODELS and options.api == "responses":
        problems.append(Problem(f"{location}.provider_options.api",
                                f"{model.model} does not support Mantle Responses; use 'chat'"))
    return problems

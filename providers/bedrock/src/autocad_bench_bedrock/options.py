"""``provider_options`` of the ``bedrock`` provider (Converse on bedrock-runtime)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.providers.models import ModelSpec

REGION_PATTERN = r"^[a-z]{2,8}(-[a-z0-9]+)+-\d+$"


class BedrockOptions(BaseModel):
    """Options of one Bedrock model. Credentials come from the AWS chain, never from here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str | None = Field(default=None, pattern=REGION_PATTERN)
    aws_profile: str | None = Field(default=None, min_length=1, max_length=128)
    endpoint_url: str | None = Field(default=None, pattern=r"^https?://\S+$",
                                     description="bedrock-runtime endpoint (VPC endpoints, tests)")
    catalog_endpoint_url: str | None = Field(default=None, pattern=r"^https?://\S+$",
                                             description="bedrock control-plane endpoint for the catalog check")
    max_tokens: int = Field(default=4096, ge=16, le=262_144)
    temperature: float | None = Field(default=None, ge=0, le=1)
    tool_choice: Literal["tool", "any"] = Field(
        default="tool", description="'tool' forces computer_action; 'any' for models that only support any")
    history_turns: int = Field(default=8, ge=0, le=64,
                               description="complete tool-use/tool-result exchanges kept verbatim (text only)")
    summary_outcomes: int = Field(default=16, ge=1, le=64)
    cache_point: bool = Field(default=False, description="cachePoint after the task and reference (model dependent)")
    timeout_s: float = Field(default=300.0, gt=0, le=3600)
    telemetry: bool = True


def parse_options(model: ModelSpec) -> BedrockOptions:
    """The model's options as :class:`BedrockOptions`; raises pydantic's ``ValidationError``
    when they do not validate.
    """
    return BedrockOptions.model_validate(model.options)


"""The ``bedrock`` model provider: Bedrock runtime ``Converse`` with image blocks and a forced tool.

Credentials come from the standard AWS chain (``aws_profile`` selects a named profile);
``credential_names`` is empty on purpose. See ``docs/providers-chat-and-aws.md``.
"""

from __future__ import annotations

from typing import ClassVar

from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.aws_chain import AWS_CHAIN_ENV

from .options import BedrockOptions, parse_options


class BedrockProvider(ModelProvider):
    """AWS Bedrock runtime Converse with a compact controller history."""

    name: ClassVar[str] = "bedrock"
    credential_env: ClassVar[tuple[str, ...]] = ()
    """None: the AWS standard chain (profile, SSO, roles) supplies credentials, so ``credential_names`` is empty."""
    optional_env: ClassVar[tuple[str, ...]] = AWS_CHAIN_ENV
    """The chain's variables that are set are handed to every rollout (subprocess mode included)."""
    catalog_region_option: ClassVar[str] = "region"
    catalog_profile_option: ClassVar[str] = "aws_profile"
    options_model: ClassVar[type[BedrockOptions]] = BedrockOptions

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        from .catalog import check_catalog

        return check_catalog(self.name, models)

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        from botocore.config import Config
        from botocore.exceptions import NoRegionError

        from .catalog import boto_session
        from .converse import ConverseSession, ConverseSettings

        options = parse_options(request.model)
        # botocore's ``max_attempts`` counts retries *after* the first attempt (1 would allow a
        # hidden retry); ``total_max_attempts=1`` is exactly one request per turn.
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=options.timeout_s,
            user_agent_extra="autocad-bench",
        )
        try:
            client = boto_session(options).client("bedrock-runtime", endpoint_url=options.endpoint_url, config=config)
        except NoRegionError:
            raise ValueError("no AWS region for Bedrock: set provider_options.region, AWS_DEFAULT_REGION or a profile "
                             "region") from None
        settings = ConverseSettings(
            model=request.model.model,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            tool_choice=options.tool_choice,
            history_turns=options.history_turns,
            summary_outcomes=options.summary_outcomes,
            cache_point=options.cache_point,
            telemetry=options.telemetry,
        )
        return ConverseSession(request, settings, client)

"""The flat ``infrastructure`` fields the AWS backend owns, validated with unknown fields rejected.

Every AWS resource is operator-supplied; nothing has a repository default. ``aws_profile`` is
optional (the standard credential chain applies without it). The optional fields below the
required ones tune the backend within the limits of :mod:`autocad_bench_aws.bounds`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench_aws.bounds import DEFAULT_CLONES, DEFAULT_TTL_MINUTES, MAX_CLONES, MAX_TTL_MINUTES, MIN_TTL_MINUTES

BROKER_VERSION_TAG = "AutoCADBenchBrokerVersion"
"""The image tag that labels the broker version baked into an operator-owned image."""


class AwsSettings(BaseModel):
    """The AWS fields of ``infrastructure`` (beside ``backend`` and ``broker_version``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image_id: str = Field(pattern=r"^ami-[0-9a-f]{8,17}$", description="the operator's instance image")
    subnet_ids: tuple[str, ...] = Field(min_length=1, description="launch subnets, tried in order")
    security_group_id: str = Field(pattern=r"^sg-[0-9a-f]{8,17}$")
    instance_profile_name: str = Field(min_length=1, max_length=128, pattern=r"^[\w+=,.@-]+$")
    instance_type: str = Field(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
    aws_region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    aws_profile: str | None = Field(default=None, min_length=1)
    instance_ttl_minutes: int = Field(default=DEFAULT_TTL_MINUTES, ge=MIN_TTL_MINUTES, le=MAX_TTL_MINUTES,
                                      description="the instance shuts itself down (and so terminates) after this")
    clone_attempts: int = Field(default=DEFAULT_CLONES, ge=1, le=MAX_CLONES)
    broker_port: int = Field(default=8765, ge=1, le=65535, description="the broker's port on the instance")
    gate_report: str | None = Field(default=None, description="a release-gate report the image must have passed")
    evaluation_prefix: str = Field(default="autocad-bench/evaluation", max_length=512,
                                   description="S3 key prefix of evaluation transfers in the evaluation bucket")

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        import re

        for subnet in value:
            if not re.fullmatch(r"subnet-[0-9a-f]{8,17}", subnet):
                raise ValueError(f"{subnet!r} is not a subnet id")
        if len(set(value)) != len(value):
            raise ValueError("subnet ids must be unique")
        return value

    @property
    def instance_family(self) -> str:
        return self.instance_type.split(".", 1)[0]


AWS_FIELDS: frozenset[str] = frozenset(AwsSettings.model_fields)


def aws_settings(spec: InfrastructureSpec) -> AwsSettings:
    """The validated settings of ``spec`` (call after ``validate_spec`` passed)."""
    return AwsSettings.model_validate(spec.backend_fields())

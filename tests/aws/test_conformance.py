"""The AWS backend passes the backend conformance suite against moto, and validates its fields."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import pytest

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.testing.backend_conformance import BackendConformance
from autocad_bench_aws.plugin import AwsPlugin
from tests.aws.conftest import AwsEnv


class TestAwsConformance(BackendConformance):
    @pytest.fixture
    def backend(self) -> AwsPlugin:
        return AwsPlugin()

    @pytest.fixture
    def valid_spec(self, aws: AwsEnv) -> InfrastructureSpec:
        return aws.spec()

    @pytest.fixture
    def external_state(self, aws: AwsEnv) -> Callable[[], Hashable]:
        """Every instance that is not terminated (id, state, tags): preflight must launch none, and a
        rollout's worker must be gone (terminated) once the rollout ended or its batch was reaped."""

        def snapshot() -> Hashable:
            reservations = aws.client("ec2").describe_instances()["Reservations"]
            return tuple(sorted(
                (i["InstanceId"], i["State"]["Name"], tuple(sorted((t["Key"], t["Value"]) for t in i.get("Tags", []))))
                for r in reservations for i in r["Instances"]
                if i["State"]["Name"] not in ("terminated", "shutting-down")))

        return snapshot


def test_the_entry_point_resolves_to_the_plugin() -> None:
    host = PluginHost(registry=PluginRegistry(), environ={})
    handle = host.infrastructure("aws")
    assert handle.name == "aws"
    assert handle.implements("list_active_workers") and handle.implements("terminate_worker")


@pytest.mark.parametrize(("field", "value", "where"), [
    ("image_id", "not-an-ami", "image_id"),
    ("subnet_ids", [], "subnet_ids"),
    ("subnet_ids", ["subnet-0123456789abcdef0", "subnet-0123456789abcdef0"], "subnet_ids"),
    ("security_group_id", "sg-x", "security_group_id"),
    ("instance_type", "G4DN", "instance_type"),
    ("aws_region", "mars", "aws_region"),
    ("instance_ttl_minutes", 5, "instance_ttl_minutes"),
    ("clone_attempts", 4, "clone_attempts"),
    ("surprise", 1, "surprise"),
])
def test_bad_fields_are_reported_where_they_are(field: str, value: object, where: str) -> None:
    spec = InfrastructureSpec.model_validate({
        "backend": "aws", "broker_version": "windows-autocad-2019-v11", "image_id": "ami-0123456789abcdef0",
        "subnet_ids": ["subnet-0123456789abcdef0"], "security_group_id": "sg-0123456789abcdef0",
        "instance_profile_name": "P", "instance_type": "g4dn.xlarge", "aws_region": "us-east-1", field: value})
    problems = AwsPlugin().validate_spec(spec, "cfg.json: $.infrastructure")
    assert problems and all(p.location.startswith(f"cfg.json: $.infrastructure.{where}") for p in problems), problems


def test_a_missing_required_field_is_reported() -> None:
    spec = InfrastructureSpec.model_validate({"backend": "aws", "broker_version": "windows-autocad-2019-v11",
                                              "image_id": "ami-0123456789abcdef0"})
    locations = {p.location for p in AwsPlugin().validate_spec(spec, "$.infrastructure")}
    assert {"$.infrastructure.subnet_ids", "$.infrastructure.instance_type", "$.infrastructure.aws_region"} <= locations

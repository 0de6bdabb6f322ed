"""Fixtures of the AWS backend tests: moto behind a loopback endpoint, a fake SSM plugin on PATH."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest
from tests.aws.fakeaws import FakeAws, HostBehaviour

# The default AMI catalogue costs seconds per test; the operator's image is registered instead.
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")

VERSION = "windows-autocad-2019-v11"
INSTANCE_TYPE = "g4dn.xlarge"
PROFILE = "AutoCADBenchWorkerProfile"
TIME_SCALE = "0.02"
PLUGIN_SOURCE = Path(__file__).with_name("fake_ssm_plugin.py")
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "scripts" / "line-and-circle.jsonl"
TASKS = REPO / "examples" / "tasks"


def install_fake_plugin(directory: Path) -> Path:
    """Write ``session-manager-plugin`` (the fake, run by this interpreter) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "session-manager-plugin"
    path.write_text(f"#!{sys.executable}\n" + PLUGIN_SOURCE.read_text())
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@dataclass
class AwsEnv:
    fake: FakeAws
    tmp: Path
    image_id: str
    subnet_ids: list[str]
    security_group_id: str
    region: str = "us-east-1"

    def spec(self, **fields: Any) -> InfrastructureSpec:
        return InfrastructureSpec.model_validate({
            "backend": "aws", "broker_version": VERSION, "image_id": self.image_id, "subnet_ids": self.subnet_ids,
            "security_group_id": self.security_group_id, "instance_profile_name": PROFILE,
            "instance_type": INSTANCE_TYPE, "aws_region": self.region, **fields})

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=self.region)

    def instances(self, batch_id: str | None = None) -> list[dict[str, Any]]:
        filters = [{"Name": "tag:BatchId", "Values": [batch_id]}] if batch_id else [
            {"Name": "tag-key", "Values": ["BatchId"]}]
        pages = self.client("ec2").describe_instances(Filters=filters)
        return [i for r in pages["Reservations"] for i in r["Instances"]]

    def instances_by_id(self, instance_ids: list[str]) -> list[dict[str, Any]]:
        pages = self.client("ec2").describe_instances(InstanceIds=instance_ids)
        return [i for r in pages["Reservations"] for i in r["Instances"]]

    def live(self, batch_id: str | None = None) -> list[str]:
        """Tagged instances that are not terminated (the leak invariant: must end empty)."""
        return [i["InstanceId"] for i in self.instances(batch_id)
                if i["State"]["Name"] not in ("terminated", "shutting-down")]

    def request(self, rollout_id: str = "r1", *, batch_id: str = "test-batch",
                child: tuple[str, ...] = ("true",), evaluation: EvaluationArguments | None = None,
                **fields: Any) -> RolloutLaunchRequest:
        out = self.tmp / "batch" / "rollouts" / rollout_id
        out.mkdir(parents=True, exist_ok=True)
        return RolloutLaunchRequest(
            batch_id=batch_id, rollout_id=rollout_id, attempt_id=f"{batch_id}.{rollout_id}.1",
            task_id="line-and-circle", spec=self.spec(**fields), child_command=child, output_dir=out,
            log_path=self.tmp / "batch" / "logs" / f"{rollout_id}.log",
            evaluation=evaluation or EvaluationArguments(enabled=False, task_id="line-and-circle"))


def provision(fake: FakeAws, region: str = "us-east-1") -> tuple[str, list[str], str]:
    """The operator's resources: an instance profile, a tagged image, subnets, a security group."""
    boto3.client("iam", region_name=region).create_instance_profile(InstanceProfileName=PROFILE)
    ec2 = boto3.client("ec2", region_name=region)
    image = ec2.register_image(Name="autocad-bench-worker", RootDeviceName="/dev/sda1", Architecture="x86_64",
                               VirtualizationType="hvm")["ImageId"]
    ec2.create_tags(Resources=[image], Tags=[{"Key": "AutoCADBenchBrokerVersion", "Value": VERSION}])
    subnets = [s["SubnetId"] for s in ec2.describe_subnets()["Subnets"][:2]]
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    group = ec2.create_security_group(GroupName="autocad-bench-workers", Description="workers", VpcId=vpc)["GroupId"]
    return image, subnets, group


@pytest.fixture(autouse=True)
def _owns_its_processes(owned_processes: Path) -> None:
    """Desktops, brokers, controllers and wrappers a test starts die with it, whatever the outcome."""


@dataclass
class _Shared:
    fake: FakeAws
    image: str
    subnets: list[str]
    group: str
    env: dict[str, str]


@pytest.fixture(scope="package")
def _aws_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Shared]:
    """One moto and one loopback endpoint for the whole package (moto's first EC2 use costs seconds)."""
    root = tmp_path_factory.mktemp("aws")
    plugin_dir = root / "bin"
    install_fake_plugin(plugin_dir)
    with pytest.MonkeyPatch.context() as patch, mock_aws():
        fake = FakeAws().start()
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": fake.url, "AWS_EC2_METADATA_DISABLED": "true",
               "AUTOCAD_BENCH_AWS_TIME_SCALE": TIME_SCALE,
               "PATH": f"{plugin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        for key, value in env.items():
            patch.setenv(key, value)
        patch.delenv("AWS_PROFILE", raising=False)
        try:
            image, subnets, group = provision(fake)
            yield _Shared(fake, image, subnets, group, env)
        finally:
            fake.stop()


@pytest.fixture
def aws(_aws_package: _Shared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsEnv]:
    shared = _aws_package
    for key, value in shared.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AUTOCAD_BENCH_STATE_DIR", str(tmp_path / "state"))
    fake = shared.fake
    fake.faults.clear()
    fake.behaviour = lambda n: HostBehaviour()
    fake.export_metadata = None
    fake.launches = 0
    fake.page_size = None
    fake.quotas.update({"L-1216C47A": 512.0, "L-DB2E81BA": 512.0})
    fake.reset_counts()
    yield AwsEnv(fake=fake, tmp=tmp_path, image_id=shared.image, subnet_ids=shared.subnets,
                 security_group_id=shared.group)
    fake.faults.clear()

"""Read-only preflight: image, network, plugin, gate report and quota admission."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from autocad_bench.infrastructure import AssignmentView, PreflightReport, PreflightRequest
from autocad_bench_aws.calls import AwsSession
from autocad_bench_aws.gate import GateReport
from autocad_bench_aws.plugin import AwsPlugin
from autocad_bench_aws.quota import G_VT, STANDARD, quota_class
from tests.aws.conftest import VERSION, AwsEnv


def preflight(aws: AwsEnv, assignments: int = 3, concurrency: int = 2, plugin: AwsPlugin | None = None,
              **fields: Any) -> PreflightReport:
    request = PreflightRequest(
        batch_id="plan", spec=aws.spec(**fields), max_concurrency=concurrency,
        assignments=tuple(AssignmentView(rollout_id=f"r{i}", task_id="t", provider="scripted", model=f"m{i}")
                          for i in range(assignments)))
    return (plugin or AwsPlugin()).preflight(request)


def checks(report: PreflightReport) -> dict[str, bool]:
    return {c.name: c.passed for c in report.checks}


def test_preflight_passes_read_only_and_admits_the_wave(aws: AwsEnv) -> None:
    report = preflight(aws)
    assert report.passed, report.checks
    assert set(checks(report)) >= {"aws_credentials", "image", "image_broker_version", "subnets",
                                   "instance_type_offered", "security_group", "session_manager_plugin", "quota"}
    assert report.admitted_wave == 2
    assert aws.fake.count("RunInstances", "TerminateInstances", "CreateTags") == 0


def test_plan_mode_calls_do_not_grow_with_the_batch(aws: AwsEnv) -> None:
    preflight(aws, assignments=5, concurrency=5)
    small = sum(aws.fake.calls.values())
    aws.fake.reset_counts()
    preflight(aws, assignments=500, concurrency=200)
    assert sum(aws.fake.calls.values()) == small


def test_a_wrong_broker_version_label_fails(aws: AwsEnv) -> None:
    spec = aws.spec().model_copy(update={"broker_version": "windows-autocad-2019-v10"})
    request = PreflightRequest(batch_id="plan", spec=spec, max_concurrency=1, assignments=(
        AssignmentView(rollout_id="r", task_id="t", provider="scripted", model="m"),))
    report = AwsPlugin().preflight(request)
    assert checks(report)["image_broker_version"] is False


def test_missing_resources_are_reported(aws: AwsEnv) -> None:
    report = preflight(aws, image_id="ami-0000000000000000f", subnet_ids=["subnet-0123456789abcdef0"],
                       security_group_id="sg-0123456789abcdef0")
    result = checks(report)
    assert result["image"] is False and result["subnets"] is False and result["security_group"] is False
    assert not report.passed


def test_no_session_manager_plugin_fails(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert checks(preflight(aws))["session_manager_plugin"] is False


def test_quota_counts_running_vcpus_of_the_class(aws: AwsEnv) -> None:
    ec2 = aws.client("ec2")
    others = ec2.run_instances(ImageId=aws.image_id, InstanceType="g4dn.2xlarge", MinCount=2, MaxCount=2)
    standard = ec2.run_instances(ImageId=aws.image_id, InstanceType="m5.large", MinCount=1, MaxCount=1)
    ids = [i["InstanceId"] for i in others["Instances"] + standard["Instances"]]
    try:
        aws.fake.quotas["L-DB2E81BA"] = 28.0  # 2 x g4dn.2xlarge = 16 in use, 12 free = 3 x g4dn.xlarge
        report = preflight(aws, assignments=10, concurrency=8)
        quota = next(c for c in report.checks if c.name == "quota")
        assert quota.passed and report.admitted_wave == 3
        assert quota.details["used_vcpus"] == 16 and quota.details["quota_code"] == "L-DB2E81BA"
        aws.fake.quotas["L-DB2E81BA"] = 18.0
        short = preflight(aws, assignments=10, concurrency=8)
        assert short.admitted_wave == 0 and checks(short)["quota"] is False
    finally:
        ec2.terminate_instances(InstanceIds=ids)


def _launch(aws: AwsEnv, instance_type: str, count: int = 1, **fields: Any) -> list[str]:
    """``count`` reservations of one instance each (moto pages DescribeInstances by reservation)."""
    ec2 = aws.client("ec2")
    return [ec2.run_instances(ImageId=aws.image_id, InstanceType=instance_type, MinCount=1, MaxCount=1,
                              **fields)["Instances"][0]["InstanceId"] for _ in range(count)]


def _quota(report: PreflightReport) -> dict[str, Any]:
    return dict(next(c for c in report.checks if c.name == "quota").details)


def test_quota_counts_instances_on_every_page_of_describe_instances(aws: AwsEnv) -> None:
    ids = _launch(aws, "g4dn.2xlarge", 3) + _launch(aws, "m5.large", 2)
    try:
        aws.fake.page_size = 1  # one reservation per page: the G instances sit on pages 1 to 5
        aws.fake.quotas["L-DB2E81BA"] = 36.0  # 3 x 8 vCPUs in use, 12 free = 3 x g4dn.xlarge
        report = preflight(aws, assignments=10, concurrency=8)
        details = _quota(report)
        assert (details["used_vcpus"], details["running_instances"], report.admitted_wave) == (24, 3, 3), details
        assert aws.fake.count("DescribeInstances") >= 5, "the fake did not paginate"
        aws.fake.quotas["L-DB2E81BA"] = 27.0  # 3 free: not one more instance fits
        short = preflight(aws, assignments=10, concurrency=8)
        assert short.admitted_wave == 0 and checks(short)["quota"] is False
    finally:
        aws.client("ec2").terminate_instances(InstanceIds=ids)


def test_only_on_demand_instances_count_against_the_on_demand_quota(aws: AwsEnv) -> None:
    spot = _launch(aws, "g4dn.2xlarge", 2, InstanceMarketOptions={"MarketType": "spot"})
    on_demand = _launch(aws, "g4dn.2xlarge", 2)
    aws.fake.set_lifecycle(on_demand[1], "scheduled")
    ids = spot + on_demand
    try:
        described = {i["InstanceId"]: i.get("InstanceLifecycle") for i in aws.instances_by_id(ids)}
        assert described == {spot[0]: "spot", spot[1]: "spot", on_demand[0]: None, on_demand[1]: "scheduled"}
        aws.fake.quotas["L-DB2E81BA"] = 20.0
        # Spot and Scheduled Instances have quotas of their own: 8 of 20 vCPUs in use, 3 fit.
        details = _quota(report := preflight(aws, assignments=10, concurrency=8))
        assert (details["used_vcpus"], details["running_instances"], report.admitted_wave) == (8, 1, 3), details
        aws.fake.set_lifecycle(spot[0], None)  # On-Demand now: counted
        details = _quota(report := preflight(aws, assignments=10, concurrency=8))
        assert (details["used_vcpus"], details["running_instances"], report.admitted_wave) == (16, 2, 1), details
        aws.fake.set_lifecycle(on_demand[1], None)
        assert preflight(aws, assignments=10, concurrency=8).admitted_wave == 0
    finally:
        aws.client("ec2").terminate_instances(InstanceIds=ids)


@pytest.mark.parametrize(("instance_type", "expected"), [
    ("g4dn.xlarge", G_VT), ("g5.2xlarge", G_VT), ("vt1.3xlarge", G_VT), ("m5.large", STANDARD),
    ("c6i.xlarge", STANDARD), ("t3.micro", STANDARD), ("z1d.large", STANDARD), ("i4i.large", STANDARD),
    ("inf2.xlarge", None), ("p4d.24xlarge", None), ("x2idn.16xlarge", None), ("trn1.2xlarge", None),
    ("mac2.metal", None), ("hpc6a.48xlarge", None), ("dl1.24xlarge", None),
])
def test_quota_classes(instance_type: str, expected: object) -> None:
    assert quota_class(instance_type) == expected


def test_service_quotas_through_an_injected_stubbed_client(aws: AwsEnv) -> None:
    """moto has no EC2 service quotas: a botocore Stubber answers GetServiceQuota instead."""
    quotas = boto3.client("service-quotas", region_name="us-east-1", endpoint_url="https://invalid.example")
    stubber = Stubber(quotas)
    stubber.add_response("get_service_quota", {"Quota": {"Value": 8.0, "QuotaCode": "L-DB2E81BA"}},
                         {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"})
    plugin = AwsPlugin(session_factory=lambda s: AwsSession(s.aws_region, clients={"service-quotas": quotas}))
    with stubber:
        report = preflight(aws, assignments=5, concurrency=5, plugin=plugin)
    stubber.assert_no_pending_responses()
    assert report.admitted_wave == 2  # 8 vCPUs / 4 per g4dn.xlarge


def test_worker_status_through_an_injected_stubbed_ssm_client(aws: AwsEnv) -> None:
    ec2 = aws.client("ec2")
    instance = ec2.run_instances(ImageId=aws.image_id, InstanceType="m5.large", MinCount=1, MaxCount=1)
    instance_id = instance["Instances"][0]["InstanceId"]
    ssm = boto3.client("ssm", region_name="us-east-1", endpoint_url="https://invalid.example")
    stubber = Stubber(ssm)
    stubber.add_response("describe_instance_information", {"InstanceInformationList": [
        {"InstanceId": instance_id, "PingStatus": "ConnectionLost"}]})
    session = AwsSession("us-east-1", clients={"ssm": ssm})
    try:
        with stubber:
            status = AwsPlugin().worker_status(session, instance_id)
        assert status.state == "running" and status.reconnectable is False
        assert "ConnectionLost" in status.detail
    finally:
        ec2.terminate_instances(InstanceIds=[instance_id])


def test_a_gate_report_is_required_when_configured(aws: AwsEnv, tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    report = GateReport(image_id=aws.image_id, broker_version=VERSION, passed=True, started_at="x", finished_at="y")
    path.write_text(report.model_dump_json())
    assert checks(preflight(aws, gate_report=str(path)))["gate_report"] is True
    path.write_text(report.model_copy(update={"image_id": "ami-0123456789abcdef0"}).model_dump_json())
    assert checks(preflight(aws, gate_report=str(path)))["gate_report"] is False
    path.write_text(json.dumps({"not": "a report"}))
    assert checks(preflight(aws, gate_report=str(path)))["gate_report"] is False
    assert os.path.exists(path)


def test_missing_credentials_fail_at_once_without_retries() -> None:
    from botocore.exceptions import NoCredentialsError

    from autocad_bench_aws.calls import AwsCallError, call, is_transient

    assert not is_transient(NoCredentialsError())
    sleeps: list[float] = []
    tries = 0

    def refuse() -> None:
        nonlocal tries
        tries += 1
        raise NoCredentialsError()

    with pytest.raises(AwsCallError) as caught:
        call("sts:GetCallerIdentity", refuse, requests=3, sleep=sleeps.append)
    assert (tries, sleeps, caught.value.attempts) == (1, [], 0)
    assert str(caught.value) == "sts:GetCallerIdentity: NoCredentialsError: Unable to locate credentials " \
                                "(no request was sent)"

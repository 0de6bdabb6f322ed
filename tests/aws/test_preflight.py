"""Read-only preflight: image, network, plugin, gate report and quota admission."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from autocad_bench.infrastructure import (
    AssignmentView,
    CheckResult,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
)
from autocad_bench_aws.calls import AwsSession
from autocad_bench_aws.gate import GateReport
from autocad_bench_aws.plugin import AwsPlugin
from autocad_bench_aws.preflight import admit_quota, gate_check, run_preflight, session_manager_plugin
from autocad_bench_aws.quota import (
    G_VT,
    STANDARD,
    QuotaClass,
    quota_class,
    quota_value,
    same_class,
    used_vcpus,
    vcpus_of,
)
from autocad_bench_aws.settings import aws_settings
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


# --- scripted clients (no moto, no network): every verdict of quota.py and preflight.py, fast ----------------------

IMAGE = "ami-0123456789abcdef0"
SUBNETS = ("subnet-0123456789abcdef0", "subnet-0123456789abcdef1")
GROUP = "sg-0123456789abcdef0"
ACCOUNT = "123456789012"
RUNNING = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
Instance = tuple[str, str | None]
"""(instance type, InstanceLifecycle) of one described instance; None is On-Demand."""


def _aws_error(operation: str, code: str, message: str, status: int) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, operation)


def _wire(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` as a client parses it off the wire: fresh objects, never the test's own strings."""
    return json.loads(json.dumps(answer))  # type: ignore[no-any-return]


class Scripted:
    """A stand-in AWS client: records every request (operation, parameters) and answers the
    operations in ``failing`` with a non-retryable AWS error, so the bounded call fails at once."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.failing: set[str] = set()

    def _record(self, operation: str, kwargs: dict[str, Any]) -> None:
        self.requests.append((operation, kwargs))
        if operation in self.failing:
            raise _aws_error(operation, "UnauthorizedOperation", "not allowed", 403)

    def sent(self, operation: str) -> list[dict[str, Any]]:
        return [kwargs for name, kwargs in self.requests if name == operation]


class FakeEc2(Scripted):
    """EC2 as plain data. DescribeInstances serves ``pages`` (each a list of reservations) with
    ``NextToken`` ``page-N`` and fails when asked for more pages than there are."""

    def __init__(self) -> None:
        super().__init__()
        self.vcpus = {"g4dn.xlarge": 4, "g4dn.2xlarge": 8, "g5.xlarge": 4, "m5.large": 2}
        self.pages: list[list[list[Instance]]] = [[]]
        self.images: dict[str, dict[str, Any]] = {IMAGE: {
            "ImageId": IMAGE, "State": "available", "Tags": [{"Key": "AutoCADBenchBrokerVersion", "Value": VERSION}]}}
        self.subnets = {SUBNETS[0]: "us-east-1a", SUBNETS[1]: "us-east-1b"}
        self.offered = {"us-east-1a", "us-east-1b"}
        self.groups = {GROUP}

    def describe_instance_types(self, **kwargs: Any) -> dict[str, Any]:
        self._record("DescribeInstanceTypes", kwargs)
        assert len(kwargs["InstanceTypes"]) <= 100, "DescribeInstanceTypes takes at most 100 instance types"
        return _wire({"InstanceTypes": [{"InstanceType": t, "VCpuInfo": {"DefaultVCpus": self.vcpus[t]}}
                                        for t in kwargs["InstanceTypes"] if t in self.vcpus]})

    def describe_instances(self, **kwargs: Any) -> dict[str, Any]:
        self._record("DescribeInstances", kwargs)
        assert len(self.sent("DescribeInstances")) <= len(self.pages), "asked for more pages than there are"
        index = int(kwargs.get("NextToken", "page-0").removeprefix("page-"))
        reservations = [{"Instances": [{"InstanceId": f"i-{index:08x}{n:09x}", "InstanceType": kind,
                                        **({"InstanceLifecycle": life} if life else {})}
                                       for n, (kind, life) in enumerate(reservation)]}
                        for reservation in self.pages[index]]
        page: dict[str, Any] = {"Reservations": reservations}
        if index + 1 < len(self.pages):
            page["NextToken"] = f"page-{index + 1}"
        return _wire(page)

    def describe_images(self, **kwargs: Any) -> dict[str, Any]:
        self._record("DescribeImages", kwargs)
        return _wire({"Images": [self.images[i] for i in kwargs["ImageIds"] if i in self.images]})

    def describe_subnets(self, **kwargs: Any) -> dict[str, Any]:
        self._record("DescribeSubnets", kwargs)
        return _wire({"Subnets": [{"SubnetId": s, "AvailabilityZone": self.subnets[s]}
                                  for s in kwargs["SubnetIds"] if s in self.subnets]})

    def describe_instance_type_offerings(self, **kwargs: Any) -> dict[str, Any]:
        self._record("DescribeInstanceTypeOfferings", kwargs)
        wanted = {f["Name"]: f["Values"] for f in kwargs["Filters"]}
        return _wire({"InstanceTypeOfferings": [{"InstanceType": wanted["instance-type"][0], "Location": zone,
                                                 "LocationType": kwargs["LocationType"]}
                                                for zone in wanted["location"] if zone in self.offered]})

    def describe_security_groups(self, **kwargs: Any) -> dict[str, Any]:
        self._record("DescribeSecurityGroups", kwargs)
        return _wire({"SecurityGroups": [{"GroupId": g} for g in kwargs["GroupIds"] if g in self.groups]})


class FakeQuotas(Scripted):
    def __init__(self, values: dict[str, float] | None = None) -> None:
        super().__init__()
        self.values = {"L-1216C47A": 512.0, "L-DB2E81BA": 512.0, **(values or {})}

    def get_service_quota(self, **kwargs: Any) -> dict[str, Any]:
        self._record("GetServiceQuota", kwargs)
        code = kwargs["QuotaCode"]
        return _wire({"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": self.values[code]}})


class FakeSts(Scripted):
    def get_caller_identity(self) -> dict[str, Any]:
        self._record("GetCallerIdentity", {})
        return _wire({"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/operator", "UserId": "AIDA"})


class FakeS3(Scripted):
    def __init__(self) -> None:
        super().__init__()
        self.buckets = {"transfer-bucket"}

    def head_bucket(self, **kwargs: Any) -> dict[str, Any]:
        self._record("HeadBucket", kwargs)
        if kwargs["Bucket"] not in self.buckets:
            raise _aws_error("HeadBucket", "404", "Not Found", 404)
        return {}


@dataclasses.dataclass
class Account:
    ec2: FakeEc2 = dataclasses.field(default_factory=FakeEc2)
    quotas: FakeQuotas = dataclasses.field(default_factory=FakeQuotas)
    sts: FakeSts = dataclasses.field(default_factory=FakeSts)
    s3: FakeS3 = dataclasses.field(default_factory=FakeS3)

    def session(self) -> AwsSession:
        return AwsSession("us-east-1", clients={"ec2": self.ec2, "service-quotas": self.quotas, "sts": self.sts,
                                                "s3": self.s3})

    def running(self, *reservations: list[Instance]) -> None:
        """One page per reservation, so admission has to follow the tokens."""
        self.ec2.pages = [[list(reservation)] for reservation in reservations] or [[]]


def _request(assignments: int = 3, concurrency: int = 2, *, evaluation_enabled: bool = False,
             evaluation_bucket: str | None = None, **fields: Any) -> PreflightRequest:
    spec = InfrastructureSpec.model_validate({
        "backend": "aws", "broker_version": VERSION, "image_id": IMAGE, "subnet_ids": list(SUBNETS),
        "security_group_id": GROUP, "instance_profile_name": "AutoCADBenchWorkerProfile",
        "instance_type": "g4dn.xlarge", "aws_region": "us-east-1", **fields})
    return PreflightRequest(
        batch_id="plan", spec=spec, max_concurrency=concurrency, evaluation_enabled=evaluation_enabled,
        evaluation_bucket=evaluation_bucket,
        assignments=tuple(AssignmentView(rollout_id=f"r{i}", task_id="t", provider="scripted", model="m")
                          for i in range(assignments)))


def _run(account: Account, request: PreflightRequest | None = None) -> PreflightReport:
    request = request or _request()
    return run_preflight(request, aws_settings(request.spec), account.session())


def _admit(account: Account, request: PreflightRequest) -> tuple[CheckResult, int]:
    return admit_quota(request, aws_settings(request.spec), account.session())


def _by_name(report: PreflightReport) -> dict[str, CheckResult]:
    return {c.name: c for c in report.checks}


def _write_plugin(directory: Path, script: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "session-manager-plugin"
    path.write_text(script)
    path.chmod(0o755)
    return path


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory that is all of PATH, holding a plugin that answers ``--version`` with 1.2.3."""
    directory = tmp_path / "bin"
    _write_plugin(directory, "#!/bin/sh\necho 1.2.3\n")
    monkeypatch.setenv("PATH", str(directory))
    return directory


def test_used_vcpus_follows_every_page_and_counts_on_demand_instances_of_the_class() -> None:
    ec2 = FakeEc2()
    ec2.pages = [
        [[("g4dn.xlarge", "spot"), ("g4dn.2xlarge", None), ("m5.large", None)]],  # Spot first in its reservation
        [],  # an empty page that still carries a token
        [[("g4dn.xlarge", "scheduled")], [("g5.xlarge", None), ("p4d.24xlarge", None)]],
    ]
    known = {"g4dn.xlarge": 4}
    assert used_vcpus(ec2, G_VT, known) == (12, 2)  # g4dn.2xlarge + g5.xlarge
    assert ec2.sent("DescribeInstances") == [
        {"Filters": RUNNING, "MaxResults": 1000},
        {"Filters": RUNNING, "MaxResults": 1000, "NextToken": "page-1"},
        {"Filters": RUNNING, "MaxResults": 1000, "NextToken": "page-2"}]
    assert ec2.sent("DescribeInstanceTypes") == [{"InstanceTypes": ["g4dn.2xlarge", "g5.xlarge"]}]
    assert known == {"g4dn.xlarge": 4, "g4dn.2xlarge": 8, "g5.xlarge": 4}
    ec2.requests.clear()
    assert used_vcpus(ec2, STANDARD, known) == (2, 1)
    assert ec2.sent("DescribeInstanceTypes") == [{"InstanceTypes": ["m5.large"]}]


def test_used_vcpus_reads_one_page_when_there_is_no_token() -> None:
    ec2 = FakeEc2()
    ec2.pages = [[[("g4dn.xlarge", None), ("g4dn.xlarge", None)]]]
    assert used_vcpus(ec2, G_VT, {"g4dn.xlarge": 4}) == (8, 2)
    assert ec2.requests == [("DescribeInstances", {"Filters": RUNNING, "MaxResults": 1000})]
    ec2.pages = [[]]
    ec2.requests.clear()
    assert used_vcpus(ec2, G_VT, {}) == (0, 0)
    assert ec2.requests == [("DescribeInstances", {"Filters": RUNNING, "MaxResults": 1000})]


def test_a_running_type_ec2_does_not_describe_counts_as_an_instance_without_vcpus() -> None:
    ec2 = FakeEc2()
    ec2.pages = [[[("g4dn.xlarge", None), ("g6.unlisted", None)]]]
    assert used_vcpus(ec2, G_VT, {}) == (4, 2)


def test_a_quota_class_is_an_immutable_value() -> None:
    g_vt, standard = QuotaClass(G_VT.code, G_VT.name), QuotaClass(STANDARD.code, STANDARD.name)
    assert same_class("g4dn.xlarge", g_vt) and same_class("vt1.3xlarge", g_vt) and same_class("m5.large", standard)
    assert not same_class("m5.large", g_vt) and not same_class("g5.xlarge", standard)
    assert not same_class("p4d.24xlarge", g_vt) and not same_class("p4d.24xlarge", standard)
    ec2 = FakeEc2()
    ec2.pages = [[[("g4dn.xlarge", None), ("m5.large", None)]]]
    assert used_vcpus(ec2, g_vt, {"g4dn.xlarge": 4, "m5.large": 2}) == (4, 1)
    assert {G_VT: "g", STANDARD: "s"}[g_vt] == "g"
    with pytest.raises(dataclasses.FrozenInstanceError):
        g_vt.code = STANDARD.code  # type: ignore[misc]


def test_vcpus_of_asks_for_at_most_100_types_per_request() -> None:
    ec2 = FakeEc2()
    names = sorted(f"m{i}.large" for i in range(201))
    ec2.vcpus = dict.fromkeys(names, 2)
    assert vcpus_of(ec2, set(names)) == dict.fromkeys(names, 2)
    assert ec2.sent("DescribeInstanceTypes") == [
        {"InstanceTypes": names[:100]}, {"InstanceTypes": names[100:200]}, {"InstanceTypes": names[200:]}]
    ec2.requests.clear()
    assert vcpus_of(ec2, set(names[:100])) == dict.fromkeys(names[:100], 2)
    assert ec2.sent("DescribeInstanceTypes") == [{"InstanceTypes": names[:100]}]
    ec2.requests.clear()
    assert vcpus_of(ec2, set()) == {} and ec2.requests == []


def test_quota_value_reads_the_applied_quota_of_the_class() -> None:
    quotas = FakeQuotas({"L-DB2E81BA": 28})
    assert quota_value(quotas, G_VT) == 28.0
    assert quotas.requests == [("GetServiceQuota", {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"})]


@pytest.mark.parametrize(("quota", "running", "assignments", "concurrency", "wave"), [
    (36.0, 2, 50, 50, 5),  # 16 of 36 in use: 20 free, 5 x 4 vCPUs
    (16.0, 2, 50, 50, 0),  # exactly used up
    (19.0, 2, 50, 50, 0),  # 3 vCPUs free: one short of an instance
    (20.0, 2, 50, 50, 1),  # exactly one instance free
    (12.0, 2, 50, 50, 0),  # over the quota by one instance
    (4.0, 2, 50, 50, 0),  # over the quota by three instances
    (13.0, 0, 50, 50, 3),  # nothing running, a quota that is no multiple of the instance
    (36.0, 2, 3, 8, 3),  # fewer assignments than fit
    (36.0, 2, 10, 2, 2),  # max_concurrency caps the wave
    (512.0, 0, 1, 1, 1),
])
def test_admission_admits_what_fits_in_the_quota(quota: float, running: int, assignments: int, concurrency: int,
                                                  wave: int) -> None:
    account = Account(quotas=FakeQuotas({"L-DB2E81BA": quota}))
    on_demand: list[Instance] = [("g4dn.2xlarge", None)]
    account.running(*[on_demand for _ in range(running)])
    check, admitted = _admit(account, _request(assignments, concurrency))
    wanted = min(assignments, concurrency)
    assert (admitted, check.passed) == (wave, wave > 0)
    assert check.details == {"quota_code": "L-DB2E81BA", "quota_vcpus": quota, "used_vcpus": 8 * running,
                             "running_instances": running, "vcpus_per_instance": 4, "wanted": wanted,
                             "admitted": wave}
    assert check.reason == (f"L-DB2E81BA: {8 * running} of {quota:g} vCPUs in use; 4 per g4dn.xlarge; "
                            f"admitting {wave} of {wanted} at once")
    assert account.quotas.requests == [("GetServiceQuota", {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"})]


def test_admission_of_a_standard_type_counts_the_standard_class() -> None:
    account = Account(quotas=FakeQuotas({"L-1216C47A": 10.0, "L-DB2E81BA": 0.0}))
    account.running([("m5.large", None), ("g4dn.2xlarge", None)], [("m5.large", None), ("m5.large", "spot")])
    check, wave = _admit(account, _request(8, 8, instance_type="m5.large"))
    assert (wave, check.passed, check.details["used_vcpus"], check.details["quota_code"]) == (3, True, 4, "L-1216C47A")


def test_admission_refuses_a_type_of_no_admitted_quota_class_without_asking_aws() -> None:
    account = Account()
    check, wave = _admit(account, _request(instance_type="p4d.24xlarge"))
    assert (wave, check.passed) == (0, False)
    assert check.reason == "p4d.24xlarge is not in the Standard or G/VT On-Demand quota class"
    assert account.ec2.requests == [] and account.quotas.requests == []


@pytest.mark.parametrize("vcpus", [None, 0])
def test_admission_refuses_an_instance_type_without_vcpus(vcpus: int | None) -> None:
    account = Account()
    if vcpus is not None:
        account.ec2.vcpus["g6.xlarge"] = vcpus
    check, wave = _admit(account, _request(instance_type="g6.xlarge"))
    assert (wave, check.passed, check.reason) == (0, False, "unknown instance type g6.xlarge")
    assert [name for name, _ in account.ec2.requests] == ["DescribeInstanceTypes"] and account.quotas.requests == []


def test_preflight_of_a_ready_account_passes_every_check(plugin_dir: Path) -> None:
    report = _run(Account())
    found = _by_name(report)
    assert list(found) == ["aws_credentials", "evaluation_bucket", "image_broker_version", "image",
                           "instance_type_offered", "subnets", "security_group", "session_manager_plugin", "quota"]
    assert report.passed and report.admitted_wave == 2
    assert {name: c.reason for name, c in found.items() if name not in ("session_manager_plugin", "quota")} == {
        "aws_credentials": f"account {ACCOUNT} in us-east-1",
        "evaluation_bucket": "evaluation disabled: no transfer bucket needed",
        "image_broker_version": f"tag AutoCADBenchBrokerVersion={VERSION} matches broker_version",
        "image": f"{IMAGE} is available",
        "instance_type_offered": "g4dn.xlarge offered in us-east-1a, us-east-1b",
        "subnets": "all subnets exist",
        "security_group": f"{GROUP} exists",
    }
    assert found["aws_credentials"].details == {"account": ACCOUNT, "region": "us-east-1"}
    assert found["image"].details == {"state": "available"}
    assert found["subnets"].details == {"zones": {SUBNETS[0]: "us-east-1a", SUBNETS[1]: "us-east-1b"}}


@pytest.mark.parametrize(("label", "configured"), [
    (VERSION, "windows-autocad-2019-v10"), (VERSION, "windows-autocad-2019-v12"), (None, VERSION)])
def test_an_image_labelled_with_another_broker_version_fails(plugin_dir: Path, label: str | None,
                                                             configured: str) -> None:
    account = Account()
    account.ec2.images[IMAGE]["Tags"] = [{"Key": "AutoCADBenchBrokerVersion", "Value": label}] if label else []
    request = _request()
    request = request.model_copy(update={"spec": request.spec.model_copy(update={"broker_version": configured})})
    found = _by_name(_run(account, request))
    assert not found["image_broker_version"].passed
    assert found["image_broker_version"].reason == (
        f"image tag AutoCADBenchBrokerVersion is {label!r}, the config says {configured!r}")
    assert found["image_broker_version"].details == {"tag": label, "broker_version": configured}
    assert found["image"].passed


@pytest.mark.parametrize("state", ["pending", "failed", "deregistered", None])
def test_an_image_that_is_not_available_fails(plugin_dir: Path, state: str | None) -> None:
    account = Account()
    if state is None:
        del account.ec2.images[IMAGE]["State"]
    else:
        account.ec2.images[IMAGE]["State"] = state
    image = _by_name(_run(account))["image"]
    assert (image.passed, image.reason, image.details) == (False, f"{IMAGE} is {state}", {"state": state})


def test_missing_image_subnet_group_and_offering_fail_with_their_reasons(plugin_dir: Path) -> None:
    account = Account()
    account.ec2.images.clear()
    del account.ec2.subnets[SUBNETS[1]]
    account.ec2.groups.clear()
    account.ec2.offered = {"us-east-1b"}
    found = _by_name(_run(account))
    assert {name: (c.passed, c.reason) for name, c in found.items()
            if name in ("image", "subnets", "security_group", "instance_type_offered")} == {
        "image": (False, f"{IMAGE} not found"),
        "subnets": (False, f"not found: {SUBNETS[1]}"),
        "security_group": (False, "not found"),
        "instance_type_offered": (False, "g4dn.xlarge is not offered in the zones of the subnets (us-east-1a)"),
    }
    assert "image_broker_version" not in found and found["instance_type_offered"].details == {"zones": []}


def test_a_failed_aws_call_fails_its_check_and_preflight_goes_on(plugin_dir: Path) -> None:
    account = Account()
    account.ec2.failing = {"DescribeImages", "DescribeSecurityGroups"}
    account.sts.failing = {"GetCallerIdentity"}
    report = _run(account)
    found = _by_name(report)
    for name, operation in (("aws_credentials", "GetCallerIdentity"), ("image", "DescribeImages"),
                            ("security_group", "DescribeSecurityGroups")):
        assert not found[name].passed
        assert found[name].reason == f"{operation}: UnauthorizedOperation: not allowed (after 1 request(s))"
    assert found["subnets"].passed and found["quota"].passed and report.admitted_wave == 2


def test_a_failed_quota_read_admits_nothing(plugin_dir: Path) -> None:
    account = Account()
    account.quotas.failing = {"GetServiceQuota"}
    report = _run(account)
    quota = _by_name(report)["quota"]
    assert (quota.passed, report.admitted_wave) == (False, 0)
    assert quota.reason == "GetServiceQuota: UnauthorizedOperation: not allowed (after 1 request(s))"


def test_evaluation_needs_a_reachable_bucket_only_when_enabled(plugin_dir: Path) -> None:
    account = Account()
    bucket = _by_name(_run(account, _request(evaluation_enabled=False, evaluation_bucket="gone")))["evaluation_bucket"]
    assert (bucket.passed, account.s3.requests) == (True, [])
    bucket = _by_name(_run(account, _request(evaluation_enabled=True)))["evaluation_bucket"]
    assert not bucket.passed and "set evaluation.bucket" in bucket.reason and account.s3.requests == []
    bucket = _by_name(_run(account, _request(evaluation_enabled=True, evaluation_bucket="transfer-bucket")))[
        "evaluation_bucket"]
    assert (bucket.passed, bucket.reason) == (True, "bucket transfer-bucket is reachable")
    assert account.s3.requests == [("HeadBucket", {"Bucket": "transfer-bucket"})]
    bucket = _by_name(_run(account, _request(evaluation_enabled=True, evaluation_bucket="gone")))["evaluation_bucket"]
    assert (bucket.passed, bucket.reason) == (False, "HeadBucket: 404: Not Found (after 1 request(s))")


def test_a_configured_gate_report_is_checked(plugin_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text(GateReport(image_id=IMAGE, broker_version=VERSION, passed=True, started_at="s",
                               finished_at="f").model_dump_json())
    found = _by_name(_run(Account(), _request(gate_report=str(path))))
    assert list(found)[-2:] == ["gate_report", "quota"] and found["gate_report"].passed


def test_the_session_manager_plugin_reports_its_first_line(plugin_dir: Path) -> None:
    path = _write_plugin(plugin_dir, "#!/bin/sh\necho '  1.2.3'\necho 'second line'\n")
    check = session_manager_plugin()
    assert (check.passed, check.reason, check.details) == (
        True, f"{path} version 1.2.3", {"path": str(path), "version": "1.2.3"})
    _write_plugin(plugin_dir, "#!/bin/sh\nexit 0\n")
    check = session_manager_plugin()
    assert (check.passed, check.reason, check.details["version"]) == (True, f"{path} version ?", "")


@pytest.mark.parametrize("script", ["#!/bin/sh\necho 1.2.3\nexit 1\n", "#!/bin/sh\necho 1.2.3\nkill -9 $$\n"])
def test_a_session_manager_plugin_that_fails_fails_the_check(plugin_dir: Path, script: str) -> None:
    path = _write_plugin(plugin_dir, script)
    check = session_manager_plugin()
    assert (check.passed, check.reason) == (False, f"{path} version 1.2.3")


def test_a_session_manager_plugin_that_cannot_start_or_answer_fails_the_check(
        plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write_plugin(plugin_dir, "#!/nonexistent/interpreter\n")
    check = session_manager_plugin()
    assert not check.passed and check.reason.startswith(f"{path} --version failed: ")
    _write_plugin(plugin_dir, "#!/bin/sh\nexec /bin/sleep 5\n")
    monkeypatch.setattr("autocad_bench_aws.preflight.PLUGIN_VERSION_S", 0.2)
    check = session_manager_plugin()
    assert not check.passed and check.reason.startswith(f"{path} --version failed: ")
    monkeypatch.setenv("PATH", str(plugin_dir.parent))
    check = session_manager_plugin()
    assert (check.passed, check.reason) == (
        False, "session-manager-plugin is not on PATH (install the AWS Session Manager plugin)")


def _gate(path: Path, **fields: Any) -> Path:
    path.write_text(GateReport.model_validate({"image_id": IMAGE, "broker_version": VERSION, "passed": True,
                                               "started_at": "s", "finished_at": "f", **fields}).model_dump_json())
    return path


def test_a_passed_gate_report_for_this_image_and_broker_passes(tmp_path: Path) -> None:
    path = _gate(tmp_path / "gate.json")
    check = gate_check(path, IMAGE, VERSION)
    assert (check.passed, check.reason, check.details) == (
        True, f"{IMAGE} passed the release gate at f", {"path": str(path)})


@pytest.mark.parametrize(("fields", "reason"), [
    ({"image_id": "ami-0123456789abcdeef"}, f"report is for ami-0123456789abcdeef, not {IMAGE}"),
    ({"image_id": "ami-0123456789abcdef1"}, f"report is for ami-0123456789abcdef1, not {IMAGE}"),
    ({"broker_version": "windows-autocad-2019-v10"}, f"report is for broker windows-autocad-2019-v10, not {VERSION}"),
    ({"broker_version": "windows-autocad-2019-v12"}, f"report is for broker windows-autocad-2019-v12, not {VERSION}"),
    ({"passed": False}, "the gate did not pass"),
    ({"image_id": "ami-0123456789abcdef1", "broker_version": "windows-autocad-2019-v10", "passed": False},
     f"report is for ami-0123456789abcdef1, not {IMAGE}; report is for broker windows-autocad-2019-v10, "
     f"not {VERSION}; the gate did not pass"),
])
def test_a_gate_report_for_another_image_or_broker_or_not_passed_fails(tmp_path: Path, fields: dict[str, Any],
                                                                       reason: str) -> None:
    check = gate_check(_gate(tmp_path / "gate.json", **fields), IMAGE, VERSION)
    assert (check.passed, check.reason) == (False, reason)


def test_an_unreadable_gate_report_fails(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    check = gate_check(missing, IMAGE, VERSION)
    assert not check.passed and check.reason.startswith(f"cannot read gate report {missing}: ")
    (tmp_path / "bad.json").write_text('{"not": "a report"}')
    check = gate_check(tmp_path / "bad.json", IMAGE, VERSION)
    assert not check.passed and check.reason.startswith(f"cannot read gate report {tmp_path / 'bad.json'}: ")


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

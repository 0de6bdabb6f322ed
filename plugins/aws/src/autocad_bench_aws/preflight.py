"""Read-only preflight: the image, network, instance type, SSM plugin, gate report and quota.

Nothing here changes AWS state (only Describe*/Get* calls) and nothing launches: plan mode
never calls RunInstances. The number of requests does not depend on how many rollouts the
batch has (the quota count reads the account's instances, not the batch's).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from autocad_bench.infrastructure import CheckResult, PreflightReport, PreflightRequest
from autocad_bench_aws.bounds import PLUGIN_VERSION_S
from autocad_bench_aws.calls import AwsCallError, AwsSession, call
from autocad_bench_aws.gate import GateReport
from autocad_bench_aws.quota import quota_class, quota_value, used_vcpus, vcpus_of
from autocad_bench_aws.settings import BROKER_VERSION_TAG, AwsSettings

PLUGIN_EXECUTABLE = "session-manager-plugin"


def run_preflight(request: PreflightRequest, settings: AwsSettings, session: AwsSession) -> PreflightReport:
    """Check credentials, the evaluation bucket, the image and its broker version tag, subnets,
    the security group, the Session Manager plugin, the gate report (when configured) and the
    vCPU quota. A failed AWS call becomes a failed check; the report carries the admitted wave.
    """
    broker_version = request.spec.broker_version
    checks: list[CheckResult] = []
    ec2 = session.ec2

    def check(name: str, fn: object) -> None:
        try:
            checks.append(fn())  # type: ignore[operator]
        except AwsCallError as error:
            checks.append(CheckResult(name=name, passed=False, reason=str(error)))

    def evaluation_bucket() -> CheckResult:
        if not request.evaluation_enabled:
            return CheckResult(name="evaluation_bucket", passed=True,
                               reason="evaluation disabled: no transfer bucket needed")
        if not request.evaluation_bucket:
            return CheckResult(name="evaluation_bucket", passed=False,
                               reason="evaluation is enabled: set evaluation.bucket to an S3 bucket in your "
                                      'account (or "evaluation": {"enabled": false} for an unevaluated run)')
        bucket = request.evaluation_bucket
        call("HeadBucket", lambda: session.client("s3").head_bucket(Bucket=bucket))
        return CheckResult(name="evaluation_bucket", passed=True, reason=f"bucket {bucket} is reachable")

    def credentials() -> CheckResult:
        identity = call("GetCallerIdentity", lambda: session.client("sts").get_caller_identity())
        return CheckResult(name="aws_credentials", passed=True,
                           reason=f"account {identity['Account']} in {settings.aws_region}",
                           details={"account": identity["Account"], "region": settings.aws_region})

    def image() -> CheckResult:
        images = call("DescribeImages", lambda: ec2.describe_images(ImageIds=[settings.image_id]))["Images"]
        if not images:
            return CheckResult(name="image", passed=False, reason=f"{settings.image_id} not found")
        found = images[0]
        tags = {t["Key"]: t["Value"] for t in found.get("Tags", [])}
        label = tags.get(BROKER_VERSION_TAG)
        state = found.get("State")
        checks.append(CheckResult(
            name="image_broker_version", passed=label == broker_version,
            reason=(f"tag {BROKER_VERSION_TAG}={label} matches broker_version" if label == broker_version else
                    f"image tag {BROKER_VERSION_TAG} is {label!r}, the config says {broker_version!r}"),
            details={"tag": label, "broker_version": broker_version}))
        return CheckResult(name="image", passed=state == "available",
                           reason=f"{settings.image_id} is {state}", details={"state": state})

    def subnets() -> CheckResult:
        found = call("DescribeSubnets", lambda: ec2.describe_subnets(SubnetIds=list(settings.subnet_ids)))["Subnets"]
        zones = {s["SubnetId"]: s["AvailabilityZone"] for s in found}
        missing = [s for s in settings.subnet_ids if s not in zones]
        offered = call("DescribeInstanceTypeOfferings", lambda: ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [settings.instance_type]},
                     {"Name": "location", "Values": sorted(set(zones.values()))}]))["InstanceTypeOfferings"]
        offered_zones = {o["Location"] for o in offered}
        usable = [s for s, zone in zones.items() if zone in offered_zones]
        checks.append(CheckResult(
            name="instance_type_offered", passed=bool(usable),
            reason=(f"{settings.instance_type} offered in {', '.join(sorted(offered_zones))}" if usable else
                    f"{settings.instance_type} is not offered in the zones of the subnets "
                    f"({', '.join(zones.values())})"),
            details={"zones": sorted(offered_zones)}))
        return CheckResult(name="subnets", passed=not missing,
                           reason="all subnets exist" if not missing else f"not found: {', '.join(missing)}",
                           details={"zones": zones})

    def security_group() -> CheckResult:
        groups = call("DescribeSecurityGroups", lambda: ec2.describe_security_groups(
            GroupIds=[settings.security_group_id]))["SecurityGroups"]
        return CheckResult(name="security_group", passed=bool(groups),
                           reason=f"{settings.security_group_id} exists" if groups else "not found")

    check("aws_credentials", credentials)
    check("evaluation_bucket", evaluation_bucket)
    check("image", image)
    check("subnets", subnets)
    check("security_group", security_group)
    checks.append(session_manager_plugin())
    if settings.gate_report:
        checks.append(gate_check(Path(settings.gate_report), settings.image_id, broker_version))
    wave = 0
    try:
        quota_check, wave = admit_quota(request, settings, session)
        checks.append(quota_check)
    except AwsCallError as error:
        checks.append(CheckResult(name="quota", passed=False, reason=str(error)))
    return PreflightReport(checks=tuple(checks), admitted_wave=wave)


def admit_quota(request: PreflightRequest, settings: AwsSettings, session: AwsSession) -> tuple[CheckResult, int]:
    """How many instances may run at once: ``min(enabled, max_concurrency, what the quota fits)``."""
    wanted = min(len(request.assignments), request.max_concurrency)
    quota = quota_class(settings.instance_type)
    if quota is None:
        return CheckResult(name="quota", passed=False,
                           reason=f"{settings.instance_type} is not in the Standard or G/VT On-Demand quota class"), 0
    known = vcpus_of(session.ec2, {settings.instance_type})
    per = known.get(settings.instance_type)
    if not per:
        return CheckResult(name="quota", passed=False, reason=f"unknown instance type {settings.instance_type}"), 0
    limit = quota_value(session.client("service-quotas"), quota)
    used, running = used_vcpus(session.ec2, quota, known)
    fits = max(0, int((limit - used) // per))
    wave = min(wanted, fits)
    details = {"quota_code": quota.code, "quota_vcpus": limit, "used_vcpus": used, "running_instances": running,
               "vcpus_per_instance": per, "wanted": wanted, "admitted": wave}
    reason = (f"{quota.code}: {used:g} of {limit:g} vCPUs in use; {per} per {settings.instance_type}; "
              f"admitting {wave} of {wanted} at once")
    return CheckResult(name="quota", passed=wave > 0, reason=reason, details=details), wave


def session_manager_plugin() -> CheckResult:
    """Whether ``session-manager-plugin`` is on PATH and answers ``--version`` (failed, not
    raised, when it is missing, fails or times out).
    """
    path = shutil.which(PLUGIN_EXECUTABLE)
    if path is None:
        return CheckResult(name="session_manager_plugin", passed=False,
                           reason=f"{PLUGIN_EXECUTABLE} is not on PATH (install the AWS Session Manager plugin)")
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=PLUGIN_VERSION_S,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return CheckResult(name="session_manager_plugin", passed=False, reason=f"{path} --version failed: {error}")
    version = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    return CheckResult(name="session_manager_plugin", passed=done.returncode == 0,
                       reason=f"{path} version {version or '?'}", details={"path": path, "version": version})


def gate_check(path: Path, image_id: str, broker_version: str) -> CheckResult:
    """Whether the gate report at ``path`` is readable, passed, and is for this image and broker
    version (failed, not raised, otherwise).
    """
    try:
        report = GateReport.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as error:
        return CheckResult(name="gate_report", passed=False, reason=f"cannot read gate report {path}: {error}")
    problems = []
    if report.image_id != image_id:
        problems.append(f"report is for {report.image_id}, not {image_id}")
    if report.broker_version != broker_version:
        problems.append(f"report is for broker {report.broker_version}, not {broker_version}")
    if not report.passed:
        problems.append("the gate did not pass")
    return CheckResult(name="gate_report", passed=not problems,
                       reason="; ".join(problems) or f"{image_id} passed the release gate at {report.finished_at}",
                       details={"path": str(path)})

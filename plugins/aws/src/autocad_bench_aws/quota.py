"""On-Demand vCPU quota classes and the admission count.

EC2 limits running On-Demand instances by vCPUs per quota class: Standard (``L-1216C47A``)
for the A, C, D, H, I, M, R, T and Z families, G and VT (``L-DB2E81BA``) for GPU desktops.
Admission counts the pending and running On-Demand vCPUs of the class and admits as many
instances of the configured type as fit, never more than the wave asked for.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from autocad_bench_aws.calls import call, chunks


@dataclass(frozen=True, slots=True)
class QuotaClass:
    """One On-Demand vCPU quota: its Service Quotas code and display name."""

    code: str
    name: str


STANDARD = QuotaClass("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances")
G_VT = QuotaClass("L-DB2E81BA", "Running On-Demand G and VT instances")

_STANDARD_LETTERS = frozenset("acdhimrtz")
# Families whose first letter looks Standard but which have quota classes of their own.
_OWN_CLASS_PREFIXES = ("inf", "hpc", "dl", "trn", "mac", "u-")


def quota_class(instance_type: str) -> QuotaClass | None:
    """The quota class of ``instance_type``, or None for families this backend does not admit."""
    family = instance_type.split(".", 1)[0].lower()
    if family.startswith("vt") or family.startswith("g"):
        return G_VT
    if family.startswith(_OWN_CLASS_PREFIXES):
        return None
    return STANDARD if family[:1] in _STANDARD_LETTERS else None


def same_class(instance_type: str, quota: QuotaClass) -> bool:
    """Whether ``instance_type`` counts against ``quota`` (False for types of no admitted class)."""
    return quota_class(instance_type) == quota


def vcpus_of(ec2: Any, instance_types: set[str]) -> dict[str, int]:
    """Default vCPUs per instance type (DescribeInstanceTypes, 100 types per request)."""
    found: dict[str, int] = {}
    for batch in chunks(sorted(instance_types), 100):
        response = call("DescribeInstanceTypes", functools.partial(ec2.describe_instance_types, InstanceTypes=batch))
        for item in response.get("InstanceTypes", []):
            found[item["InstanceType"]] = int(item["VCpuInfo"]["DefaultVCpus"])
    return found


def used_vcpus(ec2: Any, quota: QuotaClass, known: dict[str, int]) -> tuple[int, int]:
    """(vCPUs, instances) of pending/running On-Demand instances in ``quota`` (paginated reads)."""
    types: list[str] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "Filters": [{"Name": "instance-state-name", "Values": ["pending", "running"]}], "MaxResults": 1000}
        if token:
            kwargs["NextToken"] = token
        page = call("DescribeInstances", functools.partial(ec2.describe_instances, **kwargs))
        for reservation in page.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("InstanceLifecycle") in ("spot", "scheduled"):
                    continue
                if same_class(instance["InstanceType"], quota):
                    types.append(instance["InstanceType"])
        token = page.get("NextToken")
        if not token:
            break
    missing = {t for t in types if t not in known}
    if missing:
        known.update(vcpus_of(ec2, missing))
    return sum(known.get(t, 0) for t in types), len(types)


def quota_value(quotas: Any, quota: QuotaClass) -> float:
    """The applied quota in vCPUs (Service Quotas GetServiceQuota)."""
    response = call("GetServiceQuota", lambda: quotas.get_service_quota(ServiceCode="ec2", QuotaCode=quota.code))
    return float(response["Quota"]["Value"])

"""RunInstances with the bounded retries of the retry matrix, and idempotent termination."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autocad_bench_aws.bounds import QUOTA_RELEASE_BACKOFF_S, RUN_INSTANCES_REQUESTS, TERMINATE_REQUESTS, scaled
from autocad_bench_aws.calls import CAPACITY, QUOTA_RELEASE, AwsCallError, backoff, call, error_code, is_transient
from autocad_bench_aws.settings import AwsSettings
from autocad_bench_aws.worker import WorkerConfig, user_data


class LaunchError(Exception):
    """No instance could be started within the RunInstances bound (no model call happened)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Launched:
    """An instance RunInstances started: where it landed and how many requests it took."""

    instance_id: str
    subnet_id: str
    zone: str
    requests: int
    launch_time: str


def client_token(config: WorkerConfig, subnet: str) -> str:
    """Idempotency token of one clone in one subnet: a lost response is not a second instance."""
    return hashlib.sha256(f"{config.attempt_id}#{config.clone}#{subnet}".encode()).hexdigest()[:64]


def run_instance(
    ec2: Any,
    settings: AwsSettings,
    config: WorkerConfig,
    tags: list[dict[str, str]],
    *,
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> Launched:
    """Start one worker; retries quota release, capacity (next subnet), throttling, transient errors."""
    subnets = list(settings.subnet_ids)
    index = 0
    data = user_data(config, settings.instance_ttl_minutes)
    last = ""
    for attempt in range(1, RUN_INSTANCES_REQUESTS + 1):
        subnet = subnets[index % len(subnets)]
        try:
            response = ec2.run_instances(
                ImageId=settings.image_id, InstanceType=settings.instance_type, MinCount=1, MaxCount=1,
                SubnetId=subnet, SecurityGroupIds=[settings.security_group_id],
                IamInstanceProfile={"Name": settings.instance_profile_name}, UserData=data,
                InstanceInitiatedShutdownBehavior="terminate", ClientToken=client_token(config, subnet),
                MetadataOptions={"HttpTokens": "required", "HttpEndpoint": "enabled"},
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags},
                                   {"ResourceType": "volume", "Tags": tags}],
            )
        except Exception as error:
            code = error_code(error)
            last = f"{code}: {getattr(error, 'response', {}).get('Error', {}).get('Message', error)}"
            if attempt == RUN_INSTANCES_REQUESTS:
                break
            if code in QUOTA_RELEASE:
                pause = scaled(QUOTA_RELEASE_BACKOFF_S * random.uniform(0.75, 1.25))
                why = "waiting for terminated vCPUs to return to the quota"
            elif code in CAPACITY:
                index += 1
                pause = backoff(attempt)
                why = f"no capacity; next subnet {subnets[index % len(subnets)]}"
            elif is_transient(error):
                pause = backoff(attempt)
                why = "transient"
            else:
                raise LaunchError(f"RunInstances refused: {last}", code) from None
            log(f"RunInstances request {attempt} of {RUN_INSTANCES_REQUESTS} failed ({last}); {why}; "
                f"retrying in {pause:.1f} s")
            sleep(pause)
            continue
        instance = response["Instances"][0]
        return Launched(instance_id=instance["InstanceId"], subnet_id=subnet,
                        zone=instance.get("Placement", {}).get("AvailabilityZone", ""), requests=attempt,
                        launch_time=str(instance.get("LaunchTime", "")))
    raise LaunchError(f"RunInstances failed {RUN_INSTANCES_REQUESTS} times; last: {last}", last.split(":")[0])


def terminate(ec2: Any, instance_ids: list[str]) -> list[str]:
    """Request termination (bounded, idempotent); returns the ids EC2 acknowledged or does not know."""
    if not instance_ids:
        return []
    try:
        response = call("TerminateInstances", lambda: ec2.terminate_instances(InstanceIds=instance_ids),
                        requests=TERMINATE_REQUESTS)
    except AwsCallError as error:
        if error.code == "InvalidInstanceID.NotFound" and len(instance_ids) == 1:
            return list(instance_ids)
        raise
    return [item["InstanceId"] for item in response.get("TerminatingInstances", [])]

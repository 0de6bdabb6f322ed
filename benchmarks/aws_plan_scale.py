"""AWS API calls of the ``aws`` backend at batch scale, against moto behind the loopback endpoint.

Two tables:

1. plan mode (preflight) for 1 to 500 assignments: wall time and AWS requests. The requests do
   not depend on the number of rollouts (preflight never launches; the quota count reads the
   account, not the batch).
2. one full rollout lifecycle per assignment (launch, status checks, SSM, readiness, tunnel,
   a child that leases, resets and releases, termination) for 1, 10 and 100 concurrent
   rollouts in shared mode: requests per rollout, split into per-launch calls and the status
   polls that the batch's shared poller aggregates.

    uv run python benchmarks/aws_plan_scale.py [--lifecycles 1,10,100] [--plans 1,10,100,500]

Times of the lifecycle table are compressed (AUTOCAD_BENCH_AWS_TIME_SCALE=0.2: the 45 s tunnel
bound becomes 9 s, still ample for a hundred fake plugin processes starting on two cores);
the request counts are what matter there.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")

POLLED = ("DescribeInstanceStatus", "DescribeInstanceInformation")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", default="1,10,100,500")
    parser.add_argument("--lifecycles", default="1,10,100")
    args = parser.parse_args()
    from moto import mock_aws

    from tests.aws.conftest import install_fake_plugin, provision
    from tests.aws.fakeaws import FakeAws

    tmp = Path(tempfile.mkdtemp(prefix="aws-bench-"))
    install_fake_plugin(tmp / "bin")
    with mock_aws():
        fake = FakeAws().start()
        os.environ.update({
            "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": fake.url, "AWS_EC2_METADATA_DISABLED": "true",
            "AUTOCAD_BENCH_AWS_TIME_SCALE": "0.2", "AUTOCAD_BENCH_STATE_DIR": str(tmp / "state"),
            "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"})
        os.environ.pop("AWS_PROFILE", None)
        try:
            image, subnets, group = provision(fake)
            spec = {"backend": "aws", "broker_version": "windows-autocad-2019-v11", "image_id": image,
                    "subnet_ids": subnets, "security_group_id": group,
                    "instance_profile_name": "AutoCADBenchWorkerProfile", "instance_type": "g4dn.xlarge",
                    "aws_region": "us-east-1"}
            plan_table(fake, spec, [int(n) for n in args.plans.split(",") if n])
            lifecycle_table(fake, spec, tmp, [int(n) for n in args.lifecycles.split(",") if n])
        finally:
            fake.stop()
    return 0


def plan_table(fake, spec, sizes):  # type: ignore[no-untyped-def]
    from autocad_bench.infrastructure import AssignmentView, InfrastructureSpec, PreflightRequest
    from autocad_bench_aws.plugin import AwsPlugin

    plugin = AwsPlugin()
    infrastructure = InfrastructureSpec.model_validate(spec)
    plugin.preflight(PreflightRequest(batch_id="warm", spec=infrastructure, max_concurrency=1, assignments=(
        AssignmentView(rollout_id="w", task_id="t", provider="scripted", model="m"),)))
    print("\nPlan mode (preflight, read-only) against moto")
    print(f"{'assignments':>11} | {'wall ms':>8} | {'AWS requests':>12} | {'RunInstances':>12} | {'admitted':>8}")
    print("-" * 63)
    for n in sizes:
        fake.reset_counts()
        request = PreflightRequest(batch_id="plan", spec=infrastructure, max_concurrency=min(n, 128),
                                   assignments=tuple(AssignmentView(rollout_id=f"r{i}", task_id="t",
                                                                    provider="scripted", model=f"m{i}")
                                                     for i in range(n)))
        began = time.perf_counter()
        report = plugin.preflight(request)
        wall = (time.perf_counter() - began) * 1000
        print(f"{n:>11} | {wall:>8.0f} | {sum(fake.calls.values()):>12} | {fake.count('RunInstances'):>12} | "
              f"{report.admitted_wave:>8}")
    print("requests by action:", dict(sorted(fake.calls.items())))


class _Child:
    async def run(self, environ):  # type: ignore[no-untyped-def]
        from autocad_bench.broker.client import BrokerClient

        client = BrokerClient(environ["AUTOCAD_BENCH_BROKER_URL"], environ["AUTOCAD_BENCH_BROKER_TOKEN"])
        lease = await client.lease("bench", environ["AUTOCAD_BENCH_BROKER_URL"])
        await client.reset(lease.session_id)
        await client.release(lease.session_id)
        return 0


def lifecycle_table(fake, spec, tmp, sizes):  # type: ignore[no-untyped-def]
    from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest
    from autocad_bench_aws.plugin import AwsPlugin

    print("\nRollout lifecycles in shared mode (one batch, all rollouts concurrent)")
    print(f"{'rollouts':>8} | {'wall s':>7} | {'requests':>8} | {'per rollout':>11} | {'per-launch/rollout':>18} | "
          f"{'status polls':>12} | {'polls/rollout':>13} | ok")
    print("-" * 104)
    breakdown: dict[int, Counter[str]] = {}
    for n in sizes:
        fake.reset_counts()
        plugin = AwsPlugin()
        batch = f"bench-{n}-{int(time.time())}"
        codes: list[int] = []
        lock = threading.Lock()

        def one(i: int, batch: str, plugin: AwsPlugin, codes: list[int], lock: threading.Lock) -> None:
            out = tmp / batch / "rollouts" / f"r{i}"
            out.mkdir(parents=True, exist_ok=True)
            request = RolloutLaunchRequest(
                batch_id=batch, rollout_id=f"r{i}", attempt_id=f"{batch}.r{i}.1", task_id="t",
                spec=InfrastructureSpec.model_validate(spec), child_command=("true",), output_dir=out,
                log_path=tmp / batch / "logs" / f"r{i}.log",
                evaluation=EvaluationArguments(enabled=False, task_id="t"))
            code = plugin.run_shared(request, _Child())
            with lock:
                codes.append(code)

        began = time.perf_counter()
        threads = [threading.Thread(target=one, args=(i, batch, plugin, codes, lock)) for i in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
        calls = Counter({k.split(":")[1]: v for k, v in fake.calls.items()})
        breakdown[n] = calls
        total = sum(calls.values())
        polls = sum(calls[a] for a in POLLED)
        print(f"{n:>8} | {wall:>7.1f} | {total:>8} | {total / n:>11.2f} | {(total - polls) / n:>18.2f} | "
              f"{polls:>12} | {polls / n:>13.2f} | {codes.count(0)}/{n}")
    for n, calls in breakdown.items():
        print(f"  {n:>3} rollouts:", dict(sorted(calls.items())))


if __name__ == "__main__":
    sys.exit(main())

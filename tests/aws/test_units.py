"""Bounds table, user data and TTL, log parsing, the trace publisher, aggregated polling, the gate."""

from __future__ import annotations

import asyncio
import base64
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from autocad_bench.broker.client import BrokerClient
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, TracePublisherRequest
from autocad_bench_aws.bounds import BOUNDS, bounds_table
from autocad_bench_aws.calls import AwsSession
from autocad_bench_aws.gate import run_gate
from autocad_bench_aws.launch import run_instance
from autocad_bench_aws.plugin import AwsPlugin
from autocad_bench_aws.publisher import S3TracePublisher, parse_destination, trace_destination
from autocad_bench_aws.settings import aws_settings
from autocad_bench_aws.worker import WorkerConfig, config_from_user_data, tags, user_data
from tests.aws.conftest import REPO, VERSION, AwsEnv


def test_the_docs_print_the_bounds_table_of_the_code() -> None:
    text = (REPO / "docs" / "aws.md").read_text()
    between = text.split("<!-- bounds:start -->")[1].split("<!-- bounds:end -->")[0].strip()
    assert between == bounds_table()
    assert {b.boundary for b in BOUNDS} >= {"EC2 RunInstances", "SSM port-forward startup",
                                            "SSM port-forward during the rollout", "Evidence retrieval",
                                            "Session release", "Batch straggler cleanup", "Instance lifetime (TTL)"}


def _config(**fields: object) -> WorkerConfig:
    return WorkerConfig.model_validate({"batch_id": "b", "rollout_id": "r", "attempt_id": "b.r.1", "clone": 1,
                                        "broker_version": VERSION, "broker_port": 8765,
                                        "broker_token": "t" * 43, "expires_at": "x", **fields})


def test_user_data_starts_the_ttl_timer_and_round_trips_the_config() -> None:
    text = user_data(_config(), ttl_minutes=90)
    assert 'shutdown.exe /s /t 5400 /f' in text.splitlines()[2]
    assert config_from_user_data(text) == _config()
    assert config_from_user_data(base64.b64encode(text.encode()).decode()) == _config()
    assert config_from_user_data("<powershell>nothing</powershell>") is None


def test_a_launched_worker_terminates_itself_on_shutdown(aws: AwsEnv) -> None:
    settings = aws_settings(aws.spec(instance_ttl_minutes=45))
    ec2 = aws.client("ec2")
    launched = run_instance(ec2, settings, _config(), tags("ttl-batch", "r", "b.r.1", 1), log=lambda line: None)
    try:
        behaviour = ec2.describe_instance_attribute(InstanceId=launched.instance_id,
                                                    Attribute="instanceInitiatedShutdownBehavior")
        assert behaviour["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
        data = ec2.describe_instance_attribute(InstanceId=launched.instance_id, Attribute="userData")
        assert "shutdown.exe /s /t 2700" in base64.b64decode(data["UserData"]["Value"]).decode()
        labels = {t["Key"]: t["Value"] for t in aws.instances("ttl-batch")[0]["Tags"]}
        assert labels["BatchId"] == "ttl-batch" and labels["RolloutId"] == "r"
    finally:
        ec2.terminate_instances(InstanceIds=[launched.instance_id])


def test_legacy_logs_name_the_launched_worker() -> None:
    log = ("2026 aws: launched instance i-0aaaaaaaaaaaaaaaa for rollout r (clone 1)\n"
           "2026 aws: launched instance i-0bbbbbbbbbbbbbbbb for rollout r (clone 2)\n")
    assert AwsPlugin().worker_id_from_log(log) == "i-0bbbbbbbbbbbbbbbb"
    assert AwsPlugin().worker_id_from_log("worker i-0123456789abcdef0 ready") == "i-0123456789abcdef0"
    assert AwsPlugin().worker_id_from_log("nothing here") is None


def test_trace_destinations_current_and_legacy() -> None:
    assert trace_destination({"AUTOCAD_BENCH_TRACE_DESTINATION": "s3://b/p", "AUTOCAD_BENCH_TRACE_PREFIX": "x"}) == (
        "s3://b/p", "x")
    assert trace_destination({"AUTOCAD_BENCH_TRACE_S3_BUCKET": "b", "AUTOCAD_BENCH_TRACE_S3_PREFIX": "y"}) == (
        "s3://b", "y")
    assert trace_destination({}) is None
    assert parse_destination("s3://bucket/a/b", "c") == ("bucket", "a/b/c")
    assert parse_destination("bucket") == ("bucket", "")
    with pytest.raises(ValueError):
        parse_destination("gs://bucket")


def _trace_keys(aws: AwsEnv, bucket: str) -> set[str]:
    return {o["Key"] for o in aws.client("s3").list_objects_v2(Bucket=bucket).get("Contents", [])}


def test_closing_the_trace_publisher_sends_every_file_it_has_not_sent(
        aws: AwsEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Production bounds (no time scale): the scanner's first round is 2 s away and the final
    # round has 30 s, so what this asserts is close()'s completeness, not a race against a
    # shrunken budget (under CPU load, 0.6 s did not always cover two uploads).
    monkeypatch.delenv("AUTOCAD_BENCH_AWS_TIME_SCALE")
    aws.client("s3").create_bucket(Bucket="traces-on-close")
    out = tmp_path / "batch"
    (out / "rollouts" / "r").mkdir(parents=True)
    (out / "batch-state.json").write_text("{}")
    publisher = AwsPlugin().create_trace_publisher(TracePublisherRequest(
        batch_id="b1", output_dir=out, destination="s3://traces-on-close/live", prefix="run"))
    assert publisher is not None
    (out / "rollouts" / "r" / "model_turns.jsonl").write_text('{"turn": 1}\n')
    (out / "rollouts" / "r" / "frame.png.partial").write_text("half")
    publisher.publish(out / "rollouts" / "r" / "model_turns.jsonl")
    publisher.close()
    assert _trace_keys(aws, "traces-on-close") == {"live/run/b1/batch-state.json",
                                                   "live/run/b1/rollouts/r/model_turns.jsonl"}
    assert publisher.describe()["destination"] == "s3://traces-on-close"


def test_the_trace_publisher_mirrors_files_while_the_batch_runs(aws: AwsEnv, tmp_path: Path) -> None:
    aws.client("s3").create_bucket(Bucket="traces-live")
    out = tmp_path / "batch"
    out.mkdir()
    publisher = AwsPlugin().create_trace_publisher(TracePublisherRequest(
        batch_id="b1", output_dir=out, destination="s3://traces-live"))
    assert publisher is not None
    try:
        (out / "batch-state.json").write_text('{"v": 1}')  # never published: the scanner finds it
        deadline = time.monotonic() + 30
        while "b1/batch-state.json" not in _trace_keys(aws, "traces-live"):
            assert time.monotonic() < deadline, "the scanner never uploaded the file"
            time.sleep(0.02)
    finally:
        publisher.close()


class _StuckS3:
    """An S3 client whose uploads hang until released (a network that has stopped answering)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def put_object(self, **_: object) -> dict[str, object]:
        self.calls += 1
        self.release.wait(20)
        return {}


def test_closing_the_trace_publisher_returns_within_its_flush_bound_when_s3_hangs(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.json").write_text("{}")
    s3 = _StuckS3()
    publisher = S3TracePublisher(AwsSession("us-east-1", clients={"s3": s3}), "b1", tmp_path, "traces", "",
                                 scan_s=0.01, flush_s=0.5)
    try:
        deadline = time.monotonic() + 20
        while s3.calls == 0:  # the scanner's round is now stuck in its first upload
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
        publisher.close()
        closed_in = time.monotonic() - started
    finally:
        s3.release.set()
    assert closed_in < 10, f"close() waited {closed_in:.1f} s for a hung upload (its bound is 0.5 s)"
    assert publisher.uploaded == 0


class _Handoff:
    async def run(self, environ: Mapping[str, str]) -> int:
        client = BrokerClient(environ[BROKER_URL_ENV], environ[BROKER_TOKEN_ENV])
        lease = await client.lease("t", environ[BROKER_URL_ENV])
        await client.reset(lease.session_id)
        await client.release(lease.session_id)
        return 0


def _rollouts(aws: AwsEnv, batch: str, count: int) -> list[int]:
    plugin = AwsPlugin()
    codes: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            code = plugin.run_shared(aws.request(f"p{i}", batch_id=batch), _Handoff())
        except Exception as error:  # reported with the rollout logs below, not lost in a thread
            log = aws.tmp / "batch" / "logs" / f"p{i}.log"
            code = -1
            failures.append(f"p{i}: {type(error).__name__}: {error}\n{log.read_text() if log.exists() else ''}")
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, "\n".join(failures)
    return codes


def test_status_polling_is_shared_by_the_batch(aws: AwsEnv) -> None:
    """Counted AWS requests per rollout: 6 per launch, plus a share of the batch's polls."""
    assert _rollouts(aws, "poll-1", 1) == [0]
    single = aws.fake.count("DescribeInstanceStatus")
    aws.fake.reset_counts()
    logs = aws.tmp / "batch" / "logs"
    before = {path.name: len(path.read_text()) for path in logs.iterdir()}
    assert _rollouts(aws, "poll-8", 8) == [0] * 8
    polls = aws.fake.count("DescribeInstanceStatus")
    text = "".join((logs / f"p{i}.log").read_text()[before.get(f"p{i}.log", 0):] for i in range(8))
    assert polls < 8 * single, f"{polls} status polls for 8 rollouts vs {single} for one"
    # One of each per launch: no clone was replaced (a lost watch registration used to make a
    # waiter miss its bound and replace its clone).
    for operation in ("RunInstances", "SendCommand", "TerminateInstances"):
        assert aws.fake.count(operation) == 8, f"{operation}\n{text}"
    # Timing decides how often a readiness command is polled before it finishes and whether
    # the watchdog restarts a slow tunnel; both are bounded retries, so they are counted
    # exactly from what happened rather than bounded by a guess: one successful poll per
    # command, one session per tunnel process started, each ended.
    assert aws.fake.count("GetCommandInvocation") == 8 + aws.fake.in_progress_answers
    processes = 8 + len(re.findall(r"tunnel process \d+ of \d+ to \S+ failed", text)) + len(
        re.findall(r"; restart \d+ of \d+ on ", text))
    sessions = aws.fake.count("StartSession")
    assert 8 <= sessions <= processes, text  # a restart cut short by the rollout's end starts none
    assert aws.fake.count("TerminateSession") == sessions
    assert aws.live("poll-8") == []


def test_throttled_polls_back_off_and_recover(aws: AwsEnv) -> None:
    aws.fake.fail("DescribeInstanceStatus", "RequestLimitExceeded", times=6, status=503)
    assert _rollouts(aws, "throttled", 2) == [0, 0]
    assert aws.live("throttled") == []


def test_the_release_gate_passes_an_untouched_clone_and_binds_the_report(aws: AwsEnv, tmp_path: Path) -> None:
    spec = aws.spec()
    report = asyncio.run(run_gate(spec, session=AwsSession("us-east-1"), output_dir=tmp_path / "gate"))
    assert report.passed, report.checks
    assert report.image_id == aws.image_id and report.broker_version == VERSION
    names = [c.name for c in report.checks]
    assert names == ["launch", "handoff", "lease", "reset", "action_batch", "checkpoint", "evidence", "release",
                     "terminate"]
    assert report.instance_id is not None and report.instance_id not in aws.live()


def test_the_release_gate_fails_a_clone_that_fails_readiness(aws: AwsEnv, tmp_path: Path) -> None:
    from tests.aws.fakeaws import HostBehaviour

    aws.fake.behaviour = lambda n: HostBehaviour(stale_readiness=True)
    report = asyncio.run(run_gate(aws.spec(), session=AwsSession("us-east-1"), output_dir=tmp_path / "gate"))
    assert not report.passed
    assert report.instance_id not in aws.live()


def test_a_watch_registration_is_never_seen_half_written(tmp_path: Path) -> None:
    """A waiter's poll must not drop another waiter's registration while it is being made.

    ``watch`` used to create the file empty and write the PID after; a concurrent
    ``watched`` read PID 0, took it for a dead process and deleted the registration, so the
    instance was never polled and its waiter replaced a healthy clone at its bound.
    """
    from autocad_bench_aws.fleet import FleetPoller

    registering = FleetPoller(tmp_path, AwsSession("us-east-1"))
    polling = FleetPoller(tmp_path, AwsSession("us-east-1"))
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            polling.watched()

    poller = threading.Thread(target=poll)
    poller.start()
    lost = []
    try:
        for i in range(1500):
            instance_id = f"i-{i:017x}"
            registering.watch(instance_id)
            if not (tmp_path / "watch" / instance_id).exists():
                lost.append(instance_id)
            registering.unwatch(instance_id)
    finally:
        stop.set()
        poller.join()
    assert lost == []


def test_only_registrations_of_dead_processes_are_dropped(tmp_path: Path) -> None:
    from autocad_bench_aws.fleet import FleetPoller

    fleet = FleetPoller(tmp_path, AwsSession("us-east-1"))
    fleet.watch("i-0aaaaaaaaaaaaaaaa")
    watch = tmp_path / "watch"
    (watch / "i-0bbbbbbbbbbbbbbbb").write_text("")  # unreadable: never taken for a dead process
    (watch / "i-0cccccccccccccccc").write_text("999999999")  # no such process
    (watch / "not-an-instance").write_text("1")
    assert fleet.watched() == ["i-0aaaaaaaaaaaaaaaa"]
    assert sorted(p.name for p in watch.iterdir()) == ["i-0aaaaaaaaaaaaaaaa", "i-0bbbbbbbbbbbbbbbb",
                                                       "not-an-instance"]

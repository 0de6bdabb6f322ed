"""A loopback AWS endpoint for the AWS backend tests (and the benchmark).

``FakeAws`` is a real HTTP server on 127.0.0.1. Every client in this process *and in
subprocess wrappers* reaches it through ``AWS_ENDPOINT_URL``:

* EC2, S3, STS and IAM requests are dispatched into moto (``mock_aws`` must be active in this
  process): the URL is rewritten to the service's AWS host and handed to moto's request
  dispatcher, so moto's state is the single source of truth, also for presigned S3 URLs;
* SSM (instance information, commands, sessions) and Service Quotas, which moto lacks, are
  answered here at the wire level (AWS JSON protocol), backed by one :class:`FakeHost` per
  launched instance: the stand-in for the operator's Windows image. A host boots when
  RunInstances succeeds, reads the broker token from the instance's user data (exactly what
  the image's scheduled task does) and serves a real :class:`FakeBroker` on loopback; the
  readiness command reports its boot and broker identity; StartSession streams to its port.

Every request is counted per ``service:Action``; :meth:`FakeAws.fail` queues AWS errors for
an action (throttling storms, VcpuLimitExceeded, capacity, failing TerminateInstances).

Answers a real account gives and moto alone would not: :attr:`FakeAws.page_size` makes
DescribeInstances return short pages with a ``NextToken`` (EC2 may return fewer items than
``MaxResults`` asks for; moto pages by reservation), and :meth:`FakeAws.set_lifecycle` gives an
instance any ``InstanceLifecycle`` (moto itself reports ``spot`` for instances launched with
``InstanceMarketOptions`` and nothing for On-Demand ones).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import re
import threading
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from autocad_bench.broker.protocol import Route
from autocad_bench.testing.fake_broker import FakeBroker, Fault, FaultKind, png_frame
from autocad_bench_aws.worker import WorkerConfig, config_from_user_data
from tests.harness.brokers import BrokerThread

_CREDENTIAL = re.compile(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request")
_EC2_ERROR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
              "<Message>{message}</Message></Error></Errors><RequestID>fake-{rid}</RequestID></Response>")
_S3_ERROR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
             "<RequestId>fake-{rid}</RequestId></Error>")


@dataclass
class AwsFault:
    action: str
    code: str
    times: int = 1
    status: int = 400
    message: str = "injected by FakeAws"


@dataclass
class HostBehaviour:
    """How a fake worker image behaves; chosen per launch by :attr:`FakeAws.behaviour`."""

    reset_failures: int = 0
    """The broker answers the first N resets with HTTP 500 (a clone that fails the handoff)."""
    stale_readiness: bool = False
    """The readiness record belongs to an earlier boot (a clone that fails readiness)."""
    ssm_online: bool = True
    broker: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeHost:
    instance_id: str
    config: WorkerConfig
    broker: FakeBroker
    behaviour: HostBehaviour
    boot_id: str
    booted_at: datetime
    alive: bool = True

    def readiness(self) -> dict[str, Any]:
        b = self.broker
        return {
            "boot_id": self.boot_id, "booted_at": self.booted_at.isoformat(),
            "readiness": {
                "rollout_id": self.config.rollout_id,
                "boot_id": "previous-boot" if self.behaviour.stale_readiness else b.boot_id,
                "startup_id": b.startup_id, "pid": 12345,
                "ready_at": (self.booted_at + timedelta(seconds=1)).isoformat(),
                "interactive_session_id": 1, "console_user": "Administrator",
                "desktop_width": b.display.width, "desktop_height": b.display.height,
                "broker_version": b.broker_version, "input_driver_version": "fake-input-1",
                "manifest_sha256": b.manifest_sha256, "deployment_id": "fake-deployment",
                "broker_sha256": "0" * 64, "broker_port": self.config.broker_port, "prewarm_ok": True,
            },
        }


class FakeAws:
    """See the module docstring. Use as a context manager inside ``mock_aws()``."""

    def __init__(self, *, region: str = "us-east-1", quotas: dict[str, float] | None = None,
                 behaviour: Callable[[int], HostBehaviour] | None = None,
                 export_metadata: Callable[[bytes], dict[str, Any]] | None = None) -> None:
        self.region = region
        self.quotas = {"L-1216C47A": 512.0, "L-DB2E81BA": 512.0, **(quotas or {})}
        self.behaviour = behaviour or (lambda n: HostBehaviour())
        self.export_metadata = export_metadata
        self.calls: Counter[str] = Counter()
        self.in_progress_answers = 0
        """GetCommandInvocation answers that found the command still running (a poll too early)."""
        self.log: list[str] = []
        self.faults: list[AwsFault] = []
        self.hosts: dict[str, FakeHost] = {}
        self.commands: list[dict[str, Any]] = []
        self.sessions: dict[str, str] = {}
        self.launches = 0
        self.page_size: int | None = None
        """At most this many reservations per DescribeInstances page (None: what ``MaxResults`` asks)."""
        self._invocations: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._moto_lock = threading.Lock()
        self.brokers = BrokerThread()
        self._server: http.server.ThreadingHTTPServer | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeAws:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                fake._handle(self)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _any

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.brokers.close(*[h.broker for h in self.hosts.values()])

    def __enter__(self) -> FakeAws:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail(self, action: str, code: str, times: int = 1, status: int = 400) -> None:
        with self._lock:
            self.faults.append(AwsFault(action, code, times, status))

    def count(self, *actions: str) -> int:
        with self._lock:
            return sum(n for key, n in self.calls.items() if not actions or key.split(":")[1] in actions)

    def set_lifecycle(self, instance_id: str, lifecycle: str | None) -> None:
        """Make DescribeInstances report ``InstanceLifecycle`` (``spot``, ``scheduled``,
        ``capacity-block``; None: On-Demand) for ``instance_id``."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        with self._moto_lock:
            ec2_backends[DEFAULT_ACCOUNT_ID][self.region].get_instance(instance_id).lifecycle = lifecycle

    def reset_counts(self) -> None:
        with self._lock:
            self.calls.clear()
            self.in_progress_answers = 0

    # --- dispatch ----------------------------------------------------------------------------

    def _handle(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        parts = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(parts.query)
        credential = handler.headers.get("Authorization", "") or (
            "Credential=" + query.get("X-Amz-Credential", [""])[0])
        match = _CREDENTIAL.search(credential)
        region, service = (match.group(1), match.group(2)) if match else (self.region, "s3")
        target = handler.headers.get("X-Amz-Target", "")
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace")) if service in ("ec2", "sts", "iam") else {}
        if target:
            action = target.split(".", 1)[1]
        elif form:
            action = form.get("Action", ["?"])[0]
        else:
            action = f"{handler.command}Object" if parts.path.count("/") >= 2 else f"{handler.command}Bucket"
        with self._lock:
            self.calls[f"{service}:{action}"] += 1
            fault = next((f for f in self.faults if f.action == action and f.times > 0), None)
            if fault is not None:
                fault.times -= 1
        if fault is not None:
            return self._error(handler, service, fault.code, fault.message, fault.status)
        if service == "ssm":
            return self._json(handler, *self._ssm(action, json.loads(body or b"{}")))
        if service == "servicequotas":
            request = json.loads(body or b"{}")
            code = request.get("QuotaCode", "")
            return self._json(handler, 200, {"Quota": {"ServiceCode": "ec2", "QuotaCode": code,
                                                       "Value": self.quotas.get(code, 0.0)}})
        if action == "DescribeInstances" and self.page_size is not None:
            body = self._short_page(form, body)
        status, headers, payload = self._moto(handler, service, region, body)
        if status == 200 and action == "RunInstances":
            self._boot(form, payload)
        if status == 200 and action == "TerminateInstances":
            for key, values in form.items():
                if key.startswith("InstanceId."):
                    self._shutdown(values[0])
        self._reply(handler, status, headers, payload)

    def _short_page(self, form: dict[str, list[str]], body: bytes) -> bytes:
        """Cap a paginated DescribeInstances request at :attr:`page_size` (a request naming
        instance ids is never paginated, as in EC2)."""
        if "MaxResults" not in form or any(key.startswith("InstanceId.") for key in form):
            return body
        assert self.page_size is not None
        capped = {**form, "MaxResults": [str(min(int(form["MaxResults"][0]), self.page_size))]}
        return urllib.parse.urlencode(capped, doseq=True).encode()

    def _moto(self, handler: http.server.BaseHTTPRequestHandler, service: str, region: str, body: bytes
              ) -> tuple[int, dict[str, str], bytes]:
        from botocore.awsrequest import AWSPreparedRequest
        from botocore.compat import HTTPHeaders
        from moto.core.models import botocore_stubber

        host = {"ec2": f"ec2.{region}.amazonaws.com", "sts": "sts.amazonaws.com",
                "iam": "iam.amazonaws.com"}.get(service, f"s3.{region}.amazonaws.com")
        headers = HTTPHeaders()
        for key, value in handler.headers.items():
            headers[key] = value
        if "Content-Length" in headers:
            headers.replace_header("Content-Length", str(len(body)))
        headers.replace_header("Host", host) if "Host" in headers else headers.add_header("Host", host)
        request = AWSPreparedRequest(method=handler.command, url=f"https://{host}{handler.path}", headers=headers,
                                     body=body, stream_output=False)
        with self._moto_lock:
            result = botocore_stubber.process_request(request)
        if result is None:
            return 404, {}, b"not implemented by moto"
        status, out_headers, payload = result
        data = payload.encode() if isinstance(payload, str) else bytes(payload or b"")
        return int(status), {str(k): str(v) for k, v in dict(out_headers).items()}, data

    def _reply(self, handler: http.server.BaseHTTPRequestHandler, status: int, headers: dict[str, str],
               payload: bytes) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(0 if handler.command == "HEAD" else len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)

    def _json(self, handler: http.server.BaseHTTPRequestHandler, status: int, value: Any) -> None:
        body = json.dumps(value, default=str).encode()
        self._reply(handler, status, {"Content-Type": "application/x-amz-json-1.1"}, body)

    def _error(self, handler: http.server.BaseHTTPRequestHandler, service: str, code: str, message: str,
               status: int) -> None:
        rid = uuid.uuid4().hex[:8]
        if service in ("ssm", "servicequotas"):
            return self._json(handler, status, {"__type": code, "message": message})
        template = _S3_ERROR if service == "s3" else _EC2_ERROR
        self._reply(handler, status, {"Content-Type": "text/xml"},
                    template.format(code=code, message=message, rid=rid).encode())

    # --- fake worker hosts -------------------------------------------------------------------

    def _boot(self, form: dict[str, list[str]], payload: bytes) -> None:
        ids = re.findall(r"<instanceId>(i-[0-9a-f]+)</instanceId>", payload.decode("utf-8", "replace"))
        raw = form.get("UserData", [""])[0]
        config = config_from_user_data(raw)
        if not ids or config is None:
            return
        with self._lock:
            self.launches += 1
            behaviour = self.behaviour(self.launches)
        broker = self.brokers.start(token=config.broker_token, broker_version=config.broker_version,
                                    **behaviour.broker)
        for _ in range(behaviour.reset_failures):
            broker.add_faults(Fault(FaultKind.HTTP_ERROR, Route.RESET, status=500))
        host = FakeHost(ids[0], config, broker, behaviour, boot_id=broker.boot_id,
                        booted_at=datetime.now(UTC) - timedelta(seconds=5))
        with self._lock:
            self.hosts[ids[0]] = host
            self.log.append(f"boot {ids[0]} rollout {config.rollout_id} clone {config.clone}")

    def _shutdown(self, instance_id: str) -> None:
        with self._lock:
            host = self.hosts.get(instance_id)
            if host is None or not host.alive:
                return
            host.alive = False
            self.log.append(f"shutdown {instance_id}")
        with contextlib.suppress(Exception):
            self.brokers.call(host.broker.stop())

    def _host(self, instance_id: str) -> FakeHost | None:
        with self._lock:
            host = self.hosts.get(instance_id)
        return host if host is not None and host.alive else None

    # --- SSM ---------------------------------------------------------------------------------

    def _ssm(self, action: str, request: dict[str, Any]) -> tuple[int, Any]:
        if action == "DescribeInstanceInformation":
            wanted: list[str] = []
            for item in request.get("Filters", []) + request.get("InstanceInformationFilterList", []):
                wanted += item.get("Values", []) + item.get("valueSet", [])
            found = []
            for instance_id in wanted:
                host = self._host(instance_id)
                if host is not None and host.behaviour.ssm_online:
                    found.append({"InstanceId": instance_id, "PingStatus": "Online", "PlatformType": "Windows",
                                  "AgentVersion": "3.3.0.0"})
            return 200, {"InstanceInformationList": found}
        if action == "SendCommand":
            command_id = str(uuid.uuid4())
            text = "\n".join(request.get("Parameters", {}).get("commands", []))
            with self._lock:
                self.commands.append({"id": command_id, "instances": request.get("InstanceIds", []), "text": text})
            for instance_id in request.get("InstanceIds", []):
                with self._lock:
                    self._invocations[(command_id, instance_id)] = {"Status": "InProgress"}
                threading.Thread(target=self._run_command, args=(command_id, instance_id, text), daemon=True).start()
            return 200, {"Command": {"CommandId": command_id, "Status": "Pending"}}
        if action == "GetCommandInvocation":
            key = (request.get("CommandId", ""), request.get("InstanceId", ""))
            with self._lock:
                found_invocation = self._invocations.get(key)
                if found_invocation is not None and found_invocation.get("Status") == "InProgress":
                    self.in_progress_answers += 1
            if found_invocation is None:
                return 400, {"__type": "InvocationDoesNotExist", "message": "no such invocation"}
            return 200, {"CommandId": key[0], "InstanceId": key[1], "ResponseCode": 0,
                         "StandardOutputContent": "", "StandardErrorContent": "", **found_invocation}
        if action == "StartSession":
            host = self._host(request.get("Target", ""))
            if host is None:
                return 400, {"__type": "TargetNotConnected", "message": f"{request.get('Target')} is not connected"}
            port = urllib.parse.urlsplit(host.broker.url).port
            session_id = f"fake-{uuid.uuid4().hex[:12]}"
            with self._lock:
                self.sessions[session_id] = host.instance_id
            return 200, {"SessionId": session_id, "TokenValue": "fake-session-token",
                         "StreamUrl": f"tcp://127.0.0.1:{port}"}
        if action == "TerminateSession":
            with self._lock:
                self.sessions.pop(request.get("SessionId", ""), None)
            return 200, {"SessionId": request.get("SessionId", "")}
        return 400, {"__type": "InvalidAction", "message": f"FakeAws does not implement ssm:{action}"}

    def _run_command(self, command_id: str, instance_id: str, text: str) -> None:
        host = self._host(instance_id)
        result: dict[str, Any]
        if host is None:
            result = {"Status": "Failed", "StandardErrorContent": "instance not connected", "ResponseCode": 1}
        elif "readiness.ps1" in text:
            result = {"Status": "Success", "StandardOutputContent": json.dumps(host.readiness()) + "\n"}
        elif "export-evaluation.ps1" in text:
            try:
                self._export(host, text)
                result = {"Status": "Success", "StandardOutputContent": "exported\n"}
            except Exception as error:
                result = {"Status": "Failed", "StandardErrorContent": f"{error}", "ResponseCode": 1}
        else:
            result = {"Status": "Failed", "StandardErrorContent": "unknown script", "ResponseCode": 1}
        with self._lock:
            self._invocations[(command_id, instance_id)] = result

    def _export(self, host: FakeHost, text: str) -> None:
        """The image's exporter: the checkpointed drawing, its metadata and a render, PUT to the URLs."""
        def arg(name: str) -> str:
            match = re.search(rf"-{name} '([^']*)'", text)
            assert match is not None, name
            return match.group(1)

        drawing = next(iter(host.broker._artifacts.values()))
        sha = hashlib.sha256(drawing).hexdigest()
        if sha != arg("DrawingSha256"):
            raise RuntimeError("the broker's drawing is not the one asked for")
        metadata = self.export_metadata(drawing) if self.export_metadata else None
        export = {"format": "autocad-bench-dwg-metadata", "dwg_sha256": sha, "exporter": "fake-autocad",
                  "valid": metadata is not None, "reason": "" if metadata else "no metadata", "metadata": metadata}
        for url, data in ((arg("CandidateUrl"), drawing), (arg("MetadataUrl"), json.dumps(export).encode()),
                          (arg("RenderUrl"), png_frame(64, 48, 0, 0))):
            put = urllib.request.Request(url, data=data, method="PUT",
                                         headers={"Content-Type": "application/octet-stream"})
            with urllib.request.urlopen(put, timeout=30) as response:
                assert response.status == 200, response.status


def user_data_of(form_value: str) -> str:
    return base64.b64decode(form_value).decode()

"""Mantle wire fakes: Chat Completions and Responses that verify AWS SigV4 like the real endpoint.

Every request (model and catalog routes) must carry a valid ``AWS4-HMAC-SHA256`` signature
for service ``bedrock-mantle`` in the expected region, recomputed here with botocore from
the known test credentials; anything else is answered 403 like AWS does.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from autocad_bench.testing.wire import RecordedRequest, Reply, ResponsesWire
from tests.providers.fireworks.wire_chat import ChatCompletionsWire

ACCESS_KEY = "AKIAMANTLETESTKEY001"
SECRET_KEY = "mantle/test/secret+key/4f9c2d7e1a6b8c3d5e"
SESSION_TOKEN = "mantle-test-session-token-8e2f1d3c"
REGION = "us-east-1"

_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})"
)


@dataclass(frozen=True)
class SigV4Check:
    ok: bool
    reason: str
    service: str | None = None
    region: str | None = None
    signed_headers: tuple[str, ...] = ()


def verify_sigv4(request: RecordedRequest, *, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY,
                 token: str | None = None, region: str = REGION, service: str = "bedrock-mantle") -> SigV4Check:
    match = _AUTH.fullmatch(request.headers.get("authorization", ""))
    if match is None:
        return SigV4Check(False, "no SigV4 Authorization header")
    signed = tuple(match["signed"].split(";"))
    facts = {"service": match["service"], "region": match["region"], "signed_headers": signed}
    if (match["key"], match["region"], match["service"]) != (access_key, region, service):
        return SigV4Check(False, f"unexpected credential scope {match['key']}/{match['region']}/{match['service']}",
                          **facts)  # type: ignore[arg-type]
    if token is not None and request.headers.get("x-amz-security-token") != token:
        return SigV4Check(False, "missing or wrong X-Amz-Security-Token", **facts)  # type: ignore[arg-type]
    headers = {name: request.headers[name] for name in signed if name in request.headers}
    # The recorded path is percent-decoded; re-encode it as the client did (botocore encodes ':').
    path = quote(request.path, safe="/~")
    url = f"http://{request.headers['host']}{path}" + (f"?{request.query}" if request.query else "")
    aws = AWSRequest(method=request.method, url=url, headers=headers, data=request.body)
    aws.context["timestamp"] = request.headers.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(access_key, secret_key, token), service, region)
    expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
    if not hmac.compare_digest(expected, match["signature"]):
        return SigV4Check(False, "signature mismatch", **facts)  # type: ignore[arg-type]
    return SigV4Check(True, "ok", **facts)  # type: ignore[arg-type]


class _Verifying:
    """Mixin: 403 for requests whose SigV4 signature does not verify."""

    token: str | None = None
    region = REGION

    def check(self, request: RecordedRequest) -> SigV4Check:
        return verify_sigv4(request, token=self.token, region=self.region)

    def forbidden(self, check: SigV4Check) -> Reply:
        return Reply.json({"message": f"The request signature we calculated does not match: {check.reason}"},
                          status=403, headers={"x-amzn-ErrorType": "InvalidSignatureException"})


class MantleChatWire(_Verifying, ChatCompletionsWire):
    """Mantle Chat Completions (``/v1/chat/completions``) and catalog (``/v1/models``), signed."""

    def __init__(self, *, catalog: Iterable[str | Mapping[str, Any]] = (), token: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(catalog=catalog, **kwargs)
        self.token = token

    def _model_reply(self, recorded: RecordedRequest, size: int) -> Reply:
        check = self.check(recorded)
        return super()._model_reply(recorded, size) if check.ok else self.forbidden(check)

    def _list_models(self, request: RecordedRequest) -> Reply:
        check = self.check(request)
        return super()._list_models(request) if check.ok else self.forbidden(check)


class MantleResponsesWire(_Verifying, ResponsesWire):
    """Mantle Responses (``/v1/responses``) with catalog entries that may carry extra fields."""

    def __init__(self, *, entries: Iterable[Mapping[str, Any]] = (), token: str | None = None,
                 **kwargs: Any) -> None:
        self.entries = [dict(e) for e in entries]
        super().__init__(catalog=[e["id"] for e in self.entries], **kwargs)
        self.token = token

    def _model_reply(self, recorded: RecordedRequest, size: int) -> Reply:
        check = self.check(recorded)
        return super()._model_reply(recorded, size) if check.ok else self.forbidden(check)

    def _list_models(self, request: RecordedRequest) -> Reply:
        check = self.check(request)
        if not check.ok:
            return self.forbidden(check)
        data = [{"object": "model", "created": 1_700_000_000, "owned_by": "wire-fake", **e} for e in self.entries]
        return Reply.json({"object": "list", "data": data})

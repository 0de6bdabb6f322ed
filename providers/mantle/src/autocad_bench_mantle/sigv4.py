"""AWS SigV4 signing (service ``bedrock-mantle``) as an ``httpx`` auth flow.

The OpenAI SDK accepts an ``httpx.AsyncClient``; this auth signs every request it sends
with botocore's :class:`~botocore.auth.SigV4Auth` and credentials from the standard AWS
chain (environment, shared config and credentials files, SSO, container and instance
roles), optionally for a named profile. Credentials are resolved and refreshed by
botocore, off the event loop, and never stored or logged by the harness.

Only ``host``, ``content-type`` and the ``x-amz-*`` headers are signed: the SDK's other
headers are hop-by-hop or informational and a proxy may legitimately change them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Generator
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from botocore.credentials import Credentials as BotoCredentials

SERVICE = "bedrock-mantle"
_SIGNED = ("host", "content-type")
_STRIPPED = ("authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256")


class NoAwsCredentialsError(RuntimeError):
    """The standard AWS credential chain found nothing (names the profile, never values)."""


class AwsCredentialSource:
    """Resolves credentials from the standard chain once, refreshing them through botocore."""

    def __init__(self, profile: str | None = None) -> None:
        self.profile = profile
        self._lock = threading.Lock()
        self._credentials: BotoCredentials | None = None

    def __repr__(self) -> str:
        return f"AwsCredentialSource(profile={self.profile!r})"

    def describe(self) -> str:
        return f"AWS standard credential chain (profile {self.profile!r})" if self.profile else (
            "AWS standard credential chain (default profile)")

    def frozen(self) -> Any:
        """Current ``ReadOnlyCredentials``; raises :class:`NoAwsCredentialsError` when there are none."""
        with self._lock:
            if self._credentials is None:
                import botocore.session

                session = botocore.session.Session(profile=self.profile)
                credentials = session.get_credentials()
                if credentials is None:
                    raise NoAwsCredentialsError(f"no AWS credentials found in the {self.describe()}")
                self._credentials = credentials
            return self._credentials.get_frozen_credentials()

    def region(self) -> str | None:
        """The region configured for the profile (or the environment), if any."""
        import botocore.session

        region = botocore.session.Session(profile=self.profile).get_config_variable("region")
        return region if isinstance(region, str) and region else None


class MantleSigV4Auth(httpx.Auth):
    """Signs each request for ``bedrock-mantle`` in ``region`` (requires the body, which it hashes)."""

    requires_request_body = True

    def __init__(self, source: AwsCredentialSource, region: str, service: str = SERVICE) -> None:
        self._source = source
        self.region = region
        self.service = service

    def __repr__(self) -> str:
        return f"MantleSigV4Auth(region={self.region!r}, service={self.service!r}, source={self._source!r})"

    def sign(self, request: httpx.Request) -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._source.frozen()
        for name in _STRIPPED:
            request.headers.pop(name, None)
        headers = {k: v for k, v in request.headers.items() if k.lower() in _SIGNED or k.lower().startswith("x-amz-")}
        aws = AWSRequest(method=request.method, url=str(request.url), headers=headers, data=request.content)
        SigV4Auth(credentials, self.service, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name] = value

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.read()
        self.sign(request)
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await request.aread()
        # Resolving or refreshing credentials can do blocking I/O (SSO, instance metadata).
        await asyncio.to_thread(self.sign, request)
        yield request

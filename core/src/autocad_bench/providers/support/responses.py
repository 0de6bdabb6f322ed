"""The Responses API pieces shared by the providers that post to ``/responses`` through the OpenAI SDK.

The ``openai`` and ``openrouter`` providers keep different histories (a compact
controller history versus an append-only log) but send the same instructions, derive
the same rollout-stable cache key, post the same way (pre-serialized body, SDK retries
off, every failure classified and the API key redacted) and read the same response
objects. Response objects are read by attribute (duck typing), so nothing here imports
the SDK: a session's :meth:`ResponsesClientSession._connect` creates the SDK client and
names the SDK's ``Response`` type for it to parse the body into.
"""

from __future__ import annotations

import abc
import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from autocad_bench.actions.schema import COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import ArtifactRef
from autocad_bench.providers.models import (
    Credentials,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.errors import classify, failed_response, redacted
from autocad_bench.providers.support.images import DataUrlCache

INSTRUCTIONS = (
    "You operate a CAD application on a {width}x{height} desktop, only through the "
    "computer_action tool. The first message gives the task and a reference image of the expected "
    "result. After each of your tool calls the controller reports what happened and you receive a "
    "new screenshot of the whole desktop. Work step by step, check every screenshot, and finish with "
    "a batch whose last action is 'done' once the drawing matches the task."
)
"""The fixed ``instructions`` of every request (formatted with the display size)."""


def rollout_cache_key(request: SessionRequest) -> str:
    """A short key (36 characters) stable for the whole rollout (all attempts), unique per rollout and model."""
    digest = hashlib.sha256(f"{request.rollout_id}\x00{request.model.model}".encode()).hexdigest()
    return f"acb-{digest[:32]}"


class ClientOptions(Protocol):
    """Provider options that say where and how long to wait (fields of the same names)."""

    @property
    def base_url(self) -> str | None: ...

    @property
    def timeout_s(self) -> float: ...


class ResponsesClientSession(ProviderSession):
    """The client side of a Responses session: credential, images, a lazily created SDK client, closing.

    Subclasses set the class variables, keep their own history and checkpoint, and
    implement :meth:`_connect`, the only place that imports the SDK.
    """

    provider_name: ClassVar[str]
    credential: ClassVar[str]
    """The environment variable of the API key."""
    checkpoint_format: ClassVar[str]

    def __init__(self, request: SessionRequest, options: ClientOptions, credentials: Credentials,
                 default_base_url: str) -> None:
        self._request = request
        self._api_key = credentials.get(self.credential)
        self._images = DataUrlCache(request.rollout_dir)
        self._client: Any = None
        self._response_type: type[Any] = object
        self._base_url = options.base_url or default_base_url
        self._timeout_s = options.timeout_s

    def _check_checkpoint(self, checkpoint_format: str, reference: ArtifactRef) -> None:
        """Refuse a checkpoint of another format or made with another reference image."""
        if checkpoint_format != self.checkpoint_format:
            raise ValueError(f"cannot resume from checkpoint format {checkpoint_format!r}")
        if reference.sha256 != self._request.reference.sha256:
            raise ValueError("the checkpoint was made with a different reference image")

    def _require_credential(self) -> None:
        if not self._api_key:
            raise ProviderRequestError(ProviderErrorKind.FATAL, f"{self.credential} is not set")

    @abc.abstractmethod
    def _connect(self) -> tuple[Any, type[Any]]:
        """A new SDK client (retries off, ``self._base_url``, ``self._timeout_s``) and the SDK's ``Response``."""

    async def _post(self, content: Any, headers: dict[str, str]) -> Any:
        """:func:`post_response` through this session's client (created on first use)."""
        if self._client is None:
            self._client, self._response_type = self._connect()
        return await post_response(self._client, self._response_type, content, headers=headers,
                                   timeout_s=self._timeout_s, provider=self.provider_name, api_key=self._api_key)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


async def post_response(client: Any, cast_to: type[Any], content: Any, *, headers: dict[str, str],
                        timeout_s: float, provider: str, api_key: str | None) -> Any:
    """``POST /responses`` with a pre-serialized body through an SDK client; the parsed response.

    SDK exceptions become :class:`~autocad_bench.providers.models.ProviderRequestError`
    (anything else propagates unchanged), as does a 2xx response whose status is
    ``failed``; ``api_key`` never appears in their messages.
    """
    try:
        response = await client.post(
            "/responses", cast_to=cast_to, content=content,
            options={"headers": headers, "timeout": timeout_s},
        )
    except Exception as error:
        classified = classify(error, provider)
        if classified is None:
            raise
        raise redacted(classified, api_key) from None
    failed = failed_response(getattr(response, "status", None), getattr(response, "error", None), provider)
    if failed is not None:
        raise redacted(failed, api_key)
    return response


@dataclass(frozen=True, slots=True)
class ResponseOutput:
    """What a Responses ``response`` says, read defensively."""

    items: list[Any]
    """The output items, in order."""
    text: str
    """Message text (and refusals), one line per part."""
    calls: list[Any]
    """Every ``function_call`` item."""
    ours: list[Any]
    """The ``computer_action`` calls among :attr:`calls`."""
    usage: TokenUsage
    response_id: Any
    status: Any
    reason: Any
    """Why the response is incomplete, if it says."""
    stop: str
    """``status`` or ``status:reason``."""

    def missing_call(self) -> str:
        """Why there is no usable ``computer_action`` call (when :attr:`ours` is empty)."""
        others = sorted({str(getattr(c, "name", "?")) for c in self.calls})
        missing = ("the response called " + ", ".join(others) + " instead of computer_action" if others
                   else "the response did not call computer_action")
        if self.reason:
            missing += f" (response {self.status}: {self.reason})"
        return missing

    def no_call_id(self, responses: int) -> str:
        """The tool-use id of a response without a usable call (``responses`` so far)."""
        return f"{self.response_id or f'response-{responses}'}-nocall"


def read_output(response: Any) -> ResponseOutput:
    """The text, the function calls, the usage and the stop reason of a Responses ``response``."""
    items = list(getattr(response, "output", None) or [])
    texts: list[str] = []
    calls: list[Any] = []
    for item in items:
        kind = getattr(item, "type", None)
        if kind == "function_call":
            calls.append(item)
        elif kind == "message":
            for part in getattr(item, "content", None) or []:
                text = getattr(part, "text", None) or getattr(part, "refusal", None)
                if isinstance(text, str):
                    texts.append(text)
    status = getattr(response, "status", None) or "completed"
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None) if details is not None else None
    return ResponseOutput(
        items=items,
        text="\n".join(texts),
        calls=calls,
        ours=[c for c in calls if getattr(c, "name", None) == COMPUTER_ACTION_TOOL_NAME],
        usage=usage_of(response),
        response_id=getattr(response, "id", None),
        status=status,
        reason=reason,
        stop=f"{status}:{reason}" if reason else str(status),
    )


def usage_of(response: Any) -> TokenUsage:
    """TokenUsage from a Responses ``usage``: uncached input = input - cached - cache writes."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return TokenUsage()
    details = getattr(usage, "input_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    written = int(getattr(details, "cache_write_tokens", 0) or 0)
    out_details = getattr(usage, "output_tokens_details", None)
    reasoning = int(getattr(out_details, "reasoning_tokens", 0) or 0)
    total_input = int(getattr(usage, "input_tokens", 0) or 0)
    return TokenUsage(
        input_tokens=max(0, total_input - cached - written),
        cached_input_tokens=cached,
        cache_write_tokens=written,
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        reasoning_tokens=reasoning,
    )

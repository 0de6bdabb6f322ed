"""The provider conformance suite: the model-provider contract as tests an author inherits.

Subclass :class:`ProviderConformance` in a class named ``Test...`` and override four
fixtures; pytest then runs every ``test_*`` method against your provider, talking to a
wire-level fake of your API through your real SDK::

    class TestMyProvider(ProviderConformance):
        @pytest.fixture
        def provider(self):
            return MyProvider()

        @pytest.fixture
        def wire_server(self):
            with MyApiWire() as wire:          # a WireServer subclass for your format
                yield wire

        @pytest.fixture
        def model_spec(self, wire_server):
            return ModelSpec(provider="mine", model="m-1", options={"base_url": wire_server.url + "/v1"})

``credentials`` defaults to every name in ``provider.credential_env`` mapped to
:data:`PROVIDER_CONFORMANCE_SECRET`; override it if your provider authenticates otherwise.

What it proves: the provider registers through :class:`~autocad_bench.plugins.PluginHost`
with only known hooks; ``validate_model_spec`` accepts the valid spec, locates problems in
bad ones and never raises on junk; ``credential_names`` are names, never values;
``open_session`` sends nothing; every ``next_turn`` makes exactly one request (SDK retries
off) and returns a turn whose ``action_input`` passes :func:`validate_batch` for a valid
scripted call; a missing or malformed call is a :class:`ModelTurn` with ``action_input=None``
or ``malformed`` set, never an exception, and the conversation continues after it; HTTP
errors and connection resets raise :class:`ProviderRequestError` with the right
:class:`ProviderErrorKind` (``retry_after_s`` parsed for 429); a failed request leaves the
history unchanged (the retried body equals the failed one byte for byte); ``checkpoint()``
is JSON and a session resumed from it sends a byte-identical next request (the checkpoint
goes through a sorted-keys JSON round trip first, as the harness stores it, so do not
depend on dict key order); a frame whose
checksum does not match is refused before anything is sent; the credential value appears
in no checkpoint, ``repr``, error message or file the session writes.

The named rules below are checked on top of that; a broken provider fails with a
:class:`ProviderContractViolation` whose message starts ``provider contract rule '<rule>'
violated`` (see :data:`RULES`):

``tool-schema``
    every request declares exactly one ``computer_action`` tool whose schema is the declared
    one (``SessionRequest.action_schema``), and every past call it replays validates
    against that schema;
``retry-classification``
    429 is rate limited, 5xx a server error, 408/409, resets and client timeouts
    transient, 413 too large, 400/401/403 fatal: what the core retry accounting
    (:mod:`autocad_bench.retry`) retries and what fails the rollout at once;
``cost-accounting``
    every response reports exactly the usage the wire billed
    (:meth:`WireServer.billed_usage`), once, so the cost the core prices from its usage
    equals the price table's cost of the wire's tokens, malformed responses included;
``options-validation``
    the provider declares an ``options_model`` that forbids extra keys, the valid spec's
    options parse under it, and an unknown option is one problem located at
    ``<location>.provider_options.<key>``;
``refusal-and-malformed-output``
    a refusal, a text-only answer and malformed arguments are each a :class:`ModelTurn`
    without a usable call (``action_input=None`` or ``malformed`` set), never an exception
    and never a silent empty action list.

The wire fake runs on its own thread and each test drives the session with
:func:`asyncio.run`, so the suite needs no asyncio pytest plugin and no setting of the
host repository's pytest configuration (``asyncio_mode``, timeouts).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import functools
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
from pydantic import JsonValue, ValidationError

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.actions.validation import BatchRejection, validate_batch
from autocad_bench.costs.calculator import cost_of, quantize_usd
from autocad_bench.costs.pricing import ModelPrice, PricingContract
from autocad_bench.errors import Problem
from autocad_bench.hookspecs import PROVIDER_HOOKS
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.plugins import PluginHandle, PluginHost, PluginRegistry
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import (
    Credentials,
    DisplaySize,
    ModelSpec,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.options import options_model_problem
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry.caller import ModelCaller, is_well_formed, malformed_feedback
from autocad_bench.testing.fake_broker import png_frame
from autocad_bench.testing.wire import Reply, WireServer

PROVIDER_CONFORMANCE_SECRET = "sk-conformance-9d41c7e2b5a8f03361"
"""The canary credential value the default ``credentials`` fixture hands the provider."""

VALID_ACTIONS: JsonObject = {
    "actions": [
        {"type": "click", "x": 10, "y": 12, "button": "left", "count": 1},
        {"type": "type", "text": "LINE"},
        {"type": "key", "keys": ["enter"]},
    ]
}
"""A valid ``computer_action`` argument object for :data:`CONFORMANCE_DISPLAY`."""

CONFORMANCE_DISPLAY = DisplaySize(width=64, height=48)

TOOL_SCHEMA = "tool-schema"
RETRY_CLASSIFICATION = "retry-classification"
COST_ACCOUNTING = "cost-accounting"
OPTIONS_VALIDATION = "options-validation"
MODEL_OUTPUT = "refusal-and-malformed-output"

RULES: dict[str, str] = {
    TOOL_SCHEMA: "each request declares computer_action with exactly the declared schema; replayed calls validate",
    RETRY_CLASSIFICATION: "429/5xx/408/409/resets/timeouts are retried kinds, 413 too large, 400/401/403 fatal",
    COST_ACCOUNTING: "each response reports the wire's billed usage exactly once; cost = price table x wire tokens",
    OPTIONS_VALIDATION: "options_model forbids extra keys; unknown options are located problems; valid ones pass",
    MODEL_OUTPUT: "refusals and malformed output are turns without a usable call, never exceptions or empty actions",
}
"""The rules the suite names in its failures, with a one-line summary each."""

CONFORMANCE_PRICE = ModelPrice(input=Decimal("3"), cached_input=Decimal("0.3"), cache_write=Decimal("3.75"),
                               output=Decimal("15"))
"""Distinct rates per token category, so tokens reported in the wrong category change the cost."""


class ProviderContractViolation(AssertionError):
    """A provider broke one of the named :data:`RULES`; :attr:`rule` names it."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"provider contract rule {rule!r} violated: {detail}")
        self.rule = rule
        self.detail = detail


def violation(rule: str, detail: str) -> NoReturn:
    """Fail the running check with a :class:`ProviderContractViolation` for ``rule``."""
    raise ProviderContractViolation(rule, detail)


def first_difference(actual: JsonValue, expected: JsonValue, path: str = "$") -> str | None:
    """The JSON path of the first place ``actual`` differs from ``expected`` (``None`` if equal)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        for key in sorted(set(actual) | set(expected)):
            if key not in actual:
                return f"{path}.{key} (missing)"
            if key not in expected:
                return f"{path}.{key} (not in the declared schema)"
            found = first_difference(actual[key], expected[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(actual, list) and isinstance(expected, list):
        if len(actual) != len(expected):
            return f"{path} (length {len(actual)}, declared {len(expected)})"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            found = first_difference(a, e, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if type(actual) is not type(expected) or actual != expected:
        return f"{path} ({actual!r}, declared {expected!r})"
    return None


def schema_problem(instance: JsonValue, schema: JsonValue) -> str | None:
    """Why ``instance`` does not validate against the JSON schema ``schema`` (``None`` if it does).

    Uses :mod:`jsonschema` when it is installed; without it the instance must equal
    :data:`VALID_ACTIONS` (the only arguments the suite's scripted model produces).
    """
    try:
        import jsonschema  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None if instance == VALID_ACTIONS else "differs from the arguments the model sent"
    assert isinstance(schema, dict)
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(instance))
    return None if error is None else f"{error.json_path}: {error.message}"

_T = TypeVar("_T")

ERROR_CASES: list[tuple[str, int | None, dict[str, str], ProviderErrorKind, float | None]] = [
    ("429-retry-after", 429, {"retry-after": "7"}, ProviderErrorKind.RATE_LIMITED, 7.0),
    ("429-bare", 429, {}, ProviderErrorKind.RATE_LIMITED, None),
    ("500", 500, {}, ProviderErrorKind.SERVER_ERROR, None),
    ("502", 502, {}, ProviderErrorKind.SERVER_ERROR, None),
    ("503", 503, {}, ProviderErrorKind.SERVER_ERROR, None),
    ("408", 408, {}, ProviderErrorKind.TRANSIENT, None),
    ("409", 409, {}, ProviderErrorKind.TRANSIENT, None),
    ("reset", None, {}, ProviderErrorKind.TRANSIENT, None),
    ("413", 413, {}, ProviderErrorKind.REQUEST_TOO_LARGE, None),
    ("400", 400, {}, ProviderErrorKind.FATAL, None),
    ("401", 401, {}, ProviderErrorKind.FATAL, None),
    ("403", 403, {}, ProviderErrorKind.FATAL, None),
]
"""``(id, HTTP status or None for a connection reset, headers, expected kind, retry_after_s)``."""


def run_async(factory: Callable[[], Awaitable[_T]]) -> _T:
    """Run one scenario coroutine on a fresh event loop (the suite's tests are synchronous)."""

    async def main() -> _T:
        return await factory()

    return asyncio.run(main())


def write_png(rollout_dir: Path, relative: str, data: bytes, width: int, height: int) -> ArtifactRef:
    """Write ``data`` under ``rollout_dir`` and return its checksummed reference."""
    path = rollout_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(), width=width, height=height)


class ProviderConformance:
    """Inherit this in a ``Test*`` class; override ``provider``, ``wire_server`` and ``model_spec``."""

    # --- fixtures an author overrides ----------------------------------------------------

    @pytest.fixture
    def provider(self) -> ModelProvider:
        """The provider instance under test."""
        raise NotImplementedError("override the 'provider' fixture")

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        """A started :class:`WireServer` speaking the provider's wire format (yield it, then stop it)."""
        raise NotImplementedError("override the 'wire_server' fixture")

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        """A valid spec whose options point the provider at ``wire_server.url``."""
        raise NotImplementedError("override the 'model_spec' fixture")

    @pytest.fixture
    def credentials(self, provider: ModelProvider) -> Credentials:
        """Credential values for the session (default: the canary secret for every name)."""
        return Credentials({name: PROVIDER_CONFORMANCE_SECRET for name in provider.credential_env})

    @pytest.fixture
    def secret_values(self, credentials: Credentials) -> list[str]:
        """Values that must never be written anywhere (default: every credential value)."""
        return [credentials[name] for name in credentials if len(credentials[name]) >= 8]

    @pytest.fixture
    def invalid_model_specs(self, model_spec: ModelSpec) -> list[ModelSpec]:
        """Specs ``validate_model_spec`` must reject (default: empty id, unknown option)."""
        return [
            model_spec.model_copy(update={"model": ""}),
            model_spec.model_copy(update={"options": {**model_spec.options, "no_such_option_xyz": 1}}),
        ]

    # --- shared fixtures -----------------------------------------------------------------

    @pytest.fixture
    def handle(self, provider: ModelProvider) -> PluginHandle:
        registry = PluginRegistry()
        registry.register("providers", provider)
        # Only the plugin under test: an installed copy of it must not count as a duplicate.
        host = PluginHost(registry=registry, environ={}, entry_point_source=lambda group: ())
        return host.provider(provider.name)

    @pytest.fixture
    def rollout_dir(self, tmp_path: Path) -> Path:
        root = tmp_path / "rollout"
        root.mkdir()
        return root

    @pytest.fixture
    def reference(self, rollout_dir: Path) -> ArtifactRef:
        d = CONFORMANCE_DISPLAY
        return write_png(rollout_dir, "reference.png", png_frame(d.width, d.height, 99, 7), d.width, d.height)

    @pytest.fixture
    def frames(self, rollout_dir: Path) -> list[ArtifactRef]:
        """Eight distinct desktop frames, ``frames/000000.png`` onwards."""
        d = CONFORMANCE_DISPLAY
        return [
            write_png(rollout_dir, f"frames/{i:06d}.png", png_frame(d.width, d.height, i, i), d.width, d.height)
            for i in range(8)
        ]

    @pytest.fixture
    def make_request(
        self, model_spec: ModelSpec, rollout_dir: Path, reference: ArtifactRef
    ) -> Callable[..., SessionRequest]:
        """Build the rollout's :class:`SessionRequest`, optionally with ``resume_state``."""

        def make(resume_state: JsonObject | None = None) -> SessionRequest:
            return SessionRequest(
                rollout_id="conformance-rollout",
                attempt_id="conformance-batch.conformance-rollout.1",
                model=model_spec,
                task_prompt="Draw a line from (0,0) to (100,0) and save the drawing.",
                reference=reference,
                rollout_dir=rollout_dir,
                display=CONFORMANCE_DISPLAY,
                action_schema=computer_action_schema(),
                action_budget=5000,
                resume_state=resume_state,
            )

        return make

    # --- helpers -------------------------------------------------------------------------

    @staticmethod
    def observation(frames: list[ArtifactRef], index: int, previous: ModelTurn | None = None,
                    feedback: str = "") -> Observation:
        """The observation of turn ``index`` answering ``previous`` (``None`` on the first turn)."""
        return Observation(
            turn_index=index,
            frame=frames[index % len(frames)],
            feedback=feedback or ("" if previous is None else f"Executed 3 actions; turn {index}."),
            tool_use_id=None if previous is None else previous.tool_use_id,
            remaining_actions=5000 - 3 * index,
            post_action_visual_stable=None if previous is None else True,
            # As a real broker reports it: a provider must accept (and may use) the pointer.
            pointer=(960 + index, 540 + index),
        )

    @staticmethod
    def open(handle: PluginHandle, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        session = handle.call("open_session", request=request, credentials=credentials)
        assert isinstance(session, ProviderSession), f"open_session returned {type(session).__name__}"
        return session

    def normalize_body(self, body: bytes) -> bytes:
        """Request bytes as compared by the history tests (override if your wire has a nonce)."""
        return body

    async def one_turn(self, session: ProviderSession, wire: WireServer, observation: Observation) -> ModelTurn:
        """``next_turn`` that must make exactly one request."""
        before = len(wire.model_requests())
        try:
            return await session.next_turn(observation)
        finally:
            sent = len(wire.model_requests()) - before
            assert sent == 1, f"next_turn made {sent} requests; it must make exactly one (SDK retries off)"

    async def two_turns(self, session: ProviderSession, wire: WireServer,
                        frames: list[ArtifactRef]) -> tuple[ModelTurn, ModelTurn]:
        wire.push_tool_call(VALID_ACTIONS)
        wire.push_tool_call(VALID_ACTIONS)
        first = await self.one_turn(session, wire, self.observation(frames, 0))
        second = await self.one_turn(session, wire, self.observation(frames, 1, first))
        return first, second

    # --- registration and offline checks ---------------------------------------------------

    def test_registers_with_only_known_hooks(self, handle: PluginHandle) -> None:
        for hook in PROVIDER_HOOKS:
            assert handle.implements(hook), f"provider does not implement {hook}"

    def test_valid_model_spec_has_no_problems(self, handle: PluginHandle, model_spec: ModelSpec) -> None:
        problems = handle.call("validate_model_spec", model=model_spec, location="cfg.json: $.rollouts[0]")
        assert problems == []

    def test_invalid_model_specs_are_reported_with_locations(
        self, handle: PluginHandle, invalid_model_specs: list[ModelSpec]
    ) -> None:
        for spec in invalid_model_specs:
            problems = handle.call("validate_model_spec", model=spec, location="cfg.json: $.rollouts[0]")
            assert problems, f"validate_model_spec accepted an invalid spec: {spec!r}"
            for problem in problems:
                assert isinstance(problem, Problem)
                assert problem.location.startswith("cfg.json: $.rollouts[0]"), problem

    @pytest.mark.parametrize("junk", [None, 0, -1, "x", [], [{}], {"a": {"b": None}}, 1e308, True])
    def test_validate_model_spec_never_raises_on_junk_options(
        self, handle: PluginHandle, model_spec: ModelSpec, junk: Any
    ) -> None:
        for key in [*model_spec.options, "junk_option_xyz"]:
            spec = model_spec.model_copy(update={"options": {**model_spec.options, key: junk}})
            result = handle.call("validate_model_spec", model=spec, location="$")
            assert isinstance(result, list)

    def test_credential_names_are_names_not_values(
        self, handle: PluginHandle, model_spec: ModelSpec, secret_values: list[str]
    ) -> None:
        names = handle.call("credential_names", model=model_spec)
        assert isinstance(names, list)
        for name in names:
            assert isinstance(name, str) and name.replace("_", "").isalnum() and not name[0].isdigit(), name
            assert name not in secret_values

    def test_options_model_is_declared_and_enforced(
        self, handle: PluginHandle, provider: ModelProvider, model_spec: ModelSpec
    ) -> None:
        declared = getattr(provider, "options_model", None)
        problem = options_model_problem(declared)
        if problem is not None:
            violation(OPTIONS_VALIDATION, problem)
        assert declared is not None
        try:
            declared.model_validate(model_spec.options)
        except ValidationError as error:
            violation(OPTIONS_VALIDATION, f"the valid spec's provider_options do not parse under "
                      f"{declared.__qualname__}: {error.errors(include_url=False)[0]['msg']}")

    @pytest.mark.parametrize("key", ["no_such_option_xyz", "timeout"])
    def test_unknown_option_is_one_located_problem(
        self, handle: PluginHandle, model_spec: ModelSpec, key: str
    ) -> None:
        if key in model_spec.options or key in getattr(handle.plugin, "options_model", _NoFields).model_fields:
            pytest.skip(f"{key!r} is a declared option of this provider")
        location = "cfg.json: $.rollouts[0]"
        spec = model_spec.model_copy(update={"options": {**model_spec.options, key: 1}})
        problems = handle.call("validate_model_spec", model=spec, location=location) or []
        where = f"{location}.provider_options.{key}"
        located = [p for p in problems if isinstance(p, Problem) and p.location == where]
        if not located:
            violation(OPTIONS_VALIDATION, f"unknown option {key!r} was accepted silently or not located at "
                      f"{where!r} (problems: {[str(p) for p in problems]})")
        if len(located) > 1:
            violation(OPTIONS_VALIDATION, f"unknown option {key!r} reported {len(located)} times; report it once")
        others = [str(p) for p in problems if p not in located]
        if others:
            violation(OPTIONS_VALIDATION, f"adding the unknown option {key!r} to a valid spec also reported {others}")

    # --- one request per turn, well-formed and malformed turns ------------------------------

    def test_open_session_sends_nothing_and_hides_credentials(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, secret_values: list[str],
    ) -> None:
        async def scenario() -> None:
            session = self.open(handle, make_request(), credentials)
            try:
                assert wire_server.model_requests() == []
                for text in (repr(session), str(session), repr(handle.plugin)):
                    for secret in secret_values:
                        assert secret not in text
            finally:
                await session.aclose()

        run_async(scenario)

    def test_valid_tool_call_passes_core_validation(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef],
    ) -> None:
        async def scenario() -> ModelTurn:
            session = self.open(handle, make_request(), credentials)
            try:
                wire_server.push_tool_call(VALID_ACTIONS)
                return await self.one_turn(session, wire_server, self.observation(frames, 0))
            finally:
                await session.aclose()

        turn = run_async(scenario)
        assert isinstance(turn, ModelTurn)
        assert turn.malformed is None
        assert turn.tool_use_id
        assert isinstance(turn.usage, TokenUsage)
        validated = validate_batch(turn.action_input, CONFORMANCE_DISPLAY, 5000)
        assert not isinstance(validated, BatchRejection), validated.messages()
        assert turn.action_input == VALID_ACTIONS

    def test_requests_declare_the_tool_schema(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef],
    ) -> None:
        request = make_request()

        async def scenario() -> None:
            session = self.open(handle, request, credentials)
            try:
                _, second = await self.two_turns(session, wire_server, frames)
                wire_server.push_tool_call(VALID_ACTIONS)
                await self.one_turn(session, wire_server, self.observation(frames, 2, second))
            finally:
                await session.aclose()

        run_async(scenario)
        declared = request.action_schema
        for number, sent in enumerate(wire_server.model_requests(), start=1):
            try:
                body = sent.json()
            except ValueError:
                violation(TOOL_SCHEMA, f"request {number} is not JSON; override tool_declarations() on the wire")
            tools = wire_server.tool_declarations(body)
            if len(tools) != 1:
                violation(TOOL_SCHEMA, f"request {number} declares {len(tools)} computer_action tools; "
                          "it must declare exactly one")
            difference = first_difference(tools[0], declared)
            if difference is not None:
                violation(TOOL_SCHEMA, f"request {number} sends a computer_action schema that differs from the "
                          f"declared one (SessionRequest.action_schema) at {difference}")
            for call in wire_server.replayed_calls(body):
                problem = schema_problem(call, tools[0])
                if problem is not None:
                    violation(TOOL_SCHEMA, f"request {number} replays a computer_action call that does not "
                              f"validate against the declared schema: {problem}")

    @pytest.mark.parametrize("shape", ["text-only", "malformed-arguments", "refusal"])
    def test_missing_or_malformed_call_is_a_turn_not_an_exception(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], shape: str,
    ) -> None:
        async def scenario() -> tuple[ModelTurn, ModelTurn]:
            session = self.open(handle, make_request(), credentials)
            try:
                if shape == "text-only":
                    wire_server.push_text("Let me think about the drawing first.")
                elif shape == "refusal":
                    wire_server.push_refusal("I can't help with that.")
                else:
                    wire_server.push_malformed_arguments('{"actions": [{"type": "cli')
                first_obs = self.observation(frames, 0)
                try:
                    bad = await self.one_turn(session, wire_server, first_obs)
                except ProviderContractViolation:
                    raise
                except Exception as error:  # the rule: a bad answer is a turn, not a crash
                    violation(MODEL_OUTPUT, f"next_turn raised {type(error).__name__} ({error}) on a {shape} "
                              "response; return a ModelTurn with action_input=None or malformed set")
                # The conversation continues: the core answers with feedback and asks again.
                wire_server.push_tool_call(VALID_ACTIONS)
                good = await self.one_turn(session, wire_server, malformed_feedback(first_obs, bad))
                return bad, good
            finally:
                await session.aclose()

        bad, good = run_async(scenario)
        if not isinstance(bad, ModelTurn):
            violation(MODEL_OUTPUT, f"next_turn returned {type(bad).__name__} for a {shape} response")
        if is_well_formed(bad):
            empty = isinstance(bad.action_input, dict) and bad.action_input.get("actions") == []
            what = "an empty action list" if empty else f"a usable call {bad.action_input!r}"
            violation(MODEL_OUTPUT, f"a {shape} response became {what}; it must be a turn with "
                      "action_input=None or malformed set, so the core feeds it back to the model")
        assert bad.tool_use_id
        assert good.malformed is None and good.action_input == VALID_ACTIONS

    # --- error classification --------------------------------------------------------------

    @pytest.mark.parametrize(
        ("status", "headers", "kind", "retry_after"),
        [case[1:] for case in ERROR_CASES],
        ids=[case[0] for case in ERROR_CASES],
    )
    def test_errors_are_classified(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], secret_values: list[str],
        status: int | None, headers: dict[str, str], kind: ProviderErrorKind, retry_after: float | None,
    ) -> None:
        async def scenario() -> ProviderRequestError:
            session = self.open(handle, make_request(), credentials)
            try:
                if status is None:
                    wire_server.push_reset()
                else:
                    wire_server.push_error(status, f"injected {status}", headers=headers)
                with pytest.raises(ProviderRequestError) as caught:
                    await self.one_turn(session, wire_server, self.observation(frames, 0))
                return caught.value
            finally:
                await session.aclose()

        error = run_async(scenario)
        if error.kind is not kind:
            what = f"HTTP {status}" if status is not None else "a connection reset"
            violation(RETRY_CLASSIFICATION, f"{what} classified as {error.kind.value} ({_retry_effect(error.kind)}), "
                      f"expected {kind.value} ({_retry_effect(kind)})")
        if status is not None:
            assert error.status == status
        if retry_after is None:
            assert error.retry_after_s is None
        else:
            assert error.retry_after_s == pytest.approx(retry_after)
        for secret in secret_values:
            assert secret not in str(error) and secret not in repr(error)

    def test_client_timeout_is_transient(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], model_spec: ModelSpec,
    ) -> None:
        """Runs when the options model declares ``timeout_s`` (the per-request timeout)."""
        if "timeout_s" not in getattr(handle.plugin, "options_model", _NoFields).model_fields:
            pytest.skip("the provider declares no timeout_s option")
        spec = model_spec.model_copy(update={"options": {**model_spec.options, "timeout_s": 1.0}})
        request = make_request().model_copy(update={"model": spec})

        async def scenario() -> ProviderRequestError | ModelTurn:
            session = self.open(handle, request, credentials)
            try:
                slow = wire_server.tool_call_reply(VALID_ACTIONS, call_id="call_too_slow")
                wire_server.push(dataclasses.replace(slow, delay_s=4.0))
                try:
                    return await self.one_turn(session, wire_server, self.observation(frames, 0))
                except ProviderRequestError as error:
                    return error
            finally:
                await session.aclose()

        outcome = run_async(scenario)
        if not isinstance(outcome, ProviderRequestError):
            violation(RETRY_CLASSIFICATION, "a reply slower than timeout_s=1 did not time out")
        if outcome.kind is not ProviderErrorKind.TRANSIENT:
            transient = ProviderErrorKind.TRANSIENT
            violation(RETRY_CLASSIFICATION, f"a client timeout classified as {outcome.kind.value} "
                      f"({_retry_effect(outcome.kind)}), expected transient ({_retry_effect(transient)})")

    def test_retry_after_is_not_invented(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef],
    ) -> None:
        async def scenario() -> ProviderRequestError:
            session = self.open(handle, make_request(), credentials)
            try:
                wire_server.push_error(429, "slow down", headers={"retry-after": "not-a-number"})
                with pytest.raises(ProviderRequestError) as caught:
                    await self.one_turn(session, wire_server, self.observation(frames, 0))
                return caught.value
            finally:
                await session.aclose()

        error = run_async(scenario)
        assert error.kind is ProviderErrorKind.RATE_LIMITED and error.retry_after_s is None

    # --- cost accounting ----------------------------------------------------------------------

    def test_cost_is_counted_once_per_response(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], model_spec: ModelSpec,
    ) -> None:
        billed = wire_server.billed_usage()
        prices = PricingContract(as_of=datetime.date(2026, 1, 1), models={model_spec.model: CONFORMANCE_PRICE})
        caller = ModelCaller(pricer=functools.partial(cost_of, model_spec.model, prices=prices),
                             sleep=_no_sleep, instrument=False)

        async def scenario() -> list[Any]:
            session = self.open(handle, make_request(), credentials)
            try:
                # A malformed response is billed too; the core then asks again.
                wire_server.push_malformed_arguments('{"actions": [{"type": "cli')
                wire_server.push_tool_call(VALID_ACTIONS)
                first = await caller.request_turn(session, self.observation(frames, 0))
                wire_server.push_tool_call(VALID_ACTIONS)
                second = await caller.request_turn(session, self.observation(frames, 1, first.turn))
                return [first, second]
            finally:
                await session.aclose()

        results = run_async(scenario)
        responses = [turn for result in results for turn in result.responses]
        sent = len(wire_server.model_requests())
        if len(responses) != sent:
            violation(COST_ACCOUNTING, f"{sent} requests answered but {len(responses)} responses reported")
        for number, turn in enumerate(responses, start=1):
            usage = turn.usage
            if usage == TokenUsage():
                violation(COST_ACCOUNTING, f"response {number} reports no usage; the wire billed {_usage_text(billed)}")
            if usage != billed:
                cumulative = number > 1 and usage.input_tokens > billed.input_tokens
                reasoning_again = usage.output_tokens == billed.output_tokens + billed.reasoning_tokens > 0
                hint = " (counted twice)" if usage == billed + billed else (
                    " (cumulative: it includes earlier responses)" if cumulative else (
                        " (reasoning tokens added to output: they are already part of it)" if reasoning_again
                        else ""))
                violation(COST_ACCOUNTING, f"response {number} reports {_usage_text(usage)}{hint}; the wire billed "
                          f"{_usage_text(billed)}")
            if usage.reasoning_tokens > usage.output_tokens:
                violation(COST_ACCOUNTING, "reasoning_tokens exceed output_tokens: reasoning is part of output")
        expected = quantize_usd(cost_of(model_spec.model, billed, prices).total_usd * len(responses))
        charged = quantize_usd(sum((c.total_usd for r in results for c in r.costs), Decimal(0)))
        if charged != expected:
            violation(COST_ACCOUNTING, f"charged ${charged} for {len(responses)} responses; the price table gives "
                      f"${expected} for the tokens the wire billed")

    # --- history is unchanged by failures; exact resume -------------------------------------

    @pytest.mark.parametrize("failure", ["500", "429", "reset", "408"])
    def test_failed_request_leaves_history_unchanged(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], failure: str,
    ) -> None:
        async def scenario() -> None:
            session = self.open(handle, make_request(), credentials)
            try:
                _, second = await self.two_turns(session, wire_server, frames)
                observation = self.observation(frames, 2, second)
                if failure == "reset":
                    wire_server.push_reset()
                else:
                    wire_server.push_error(int(failure), "injected")
                with pytest.raises(ProviderRequestError):
                    await self.one_turn(session, wire_server, observation)
                wire_server.push_tool_call(VALID_ACTIONS)
                third = await self.one_turn(session, wire_server, observation)
                assert third.action_input == VALID_ACTIONS
            finally:
                await session.aclose()

        run_async(scenario)
        failed, retried = wire_server.model_requests()[-2:]
        assert self.normalize_body(failed.body) == self.normalize_body(retried.body), (
            "the retried request differs from the failed one: a failed request changed the history"
        )

    def test_checkpoint_is_json_and_resume_is_exact(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef],
    ) -> None:
        async def scenario() -> None:
            original = self.open(handle, make_request(), credentials)
            try:
                _, second = await self.two_turns(original, wire_server, frames)
                state = original.checkpoint()
                text = json.dumps(state, allow_nan=False, sort_keys=True)
                restored_state = json.loads(text)
                assert restored_state == state, "checkpoint() must survive a JSON round trip unchanged"
                frozen = copy.deepcopy(state)
                observation = self.observation(frames, 2, second)
                reply = wire_server.tool_call_reply(VALID_ACTIONS, call_id="call_resume_check")
                wire_server.push(reply, reply)
                await self.one_turn(original, wire_server, observation)
                assert state == frozen, "checkpoint() must return a snapshot, not live state"
                resumed = self.open(handle, make_request(resume_state=restored_state), credentials)
                try:
                    assert json.dumps(resumed.checkpoint(), sort_keys=True) == text
                    await self.one_turn(resumed, wire_server, observation)
                    assert json.dumps(resumed.checkpoint(), sort_keys=True) == json.dumps(
                        original.checkpoint(), sort_keys=True
                    )
                finally:
                    await resumed.aclose()
            finally:
                await original.aclose()

        run_async(scenario)
        from_original, from_resumed = wire_server.model_requests()[-2:]
        assert self.normalize_body(from_original.body) == self.normalize_body(from_resumed.body), (
            "a session resumed from checkpoint() sent a different request than the original"
        )

    def test_frame_with_wrong_checksum_is_refused_before_sending(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], rollout_dir: Path,
    ) -> None:
        async def scenario() -> None:
            session = self.open(handle, make_request(), credentials)
            try:
                (rollout_dir / frames[0].path).write_bytes(b"\x89PNG tampered")
                wire_server.push_tool_call(VALID_ACTIONS)
                with pytest.raises(Exception) as caught:
                    await session.next_turn(self.observation(frames, 0))
                assert "sha256" in str(caught.value).lower() or "checksum" in str(caught.value).lower(), (
                    f"the error should say the checksum did not match: {caught.value}"
                )
            finally:
                await session.aclose()

        run_async(scenario)
        assert wire_server.model_requests() == []

    # --- secrets ------------------------------------------------------------------------------

    def test_credentials_never_leak(
        self, handle: PluginHandle, make_request: Callable[..., SessionRequest], credentials: Credentials,
        wire_server: WireServer, frames: list[ArtifactRef], tmp_path: Path, secret_values: list[str],
    ) -> None:
        texts: list[str] = []

        async def scenario() -> None:
            session = self.open(handle, make_request(), credentials)
            try:
                first, second = await self.two_turns(session, wire_server, frames)
                wire_server.push_error(401, "bad key")
                with pytest.raises(ProviderRequestError) as caught:
                    await session.next_turn(self.observation(frames, 2, second))
                texts.extend([str(caught.value), repr(caught.value)])
                texts.extend([json.dumps(session.checkpoint()), repr(session), str(session)])
                texts.extend([first.model_dump_json(), second.model_dump_json()])
            finally:
                await session.aclose()

        run_async(scenario)
        assert secret_values, "no credential values to look for"
        for secret in secret_values:
            for text in texts:
                assert secret not in text
            for path in tmp_path.rglob("*"):
                if path.is_file():
                    assert secret.encode() not in path.read_bytes(), f"credential found in {path}"

    # --- wire sanity (helps authors debug their fake) ----------------------------------------

    def test_wire_server_answers_model_routes(self, wire_server: WireServer) -> None:
        reply = wire_server.tool_call_reply(VALID_ACTIONS, call_id="call_probe")
        assert isinstance(reply, Reply) and reply.status == 200
        assert wire_server.model_routes, "the wire server declares no model routes"


class _NoFields:
    """Stand-in for a provider without ``options_model``: declares no fields."""

    model_fields: dict[str, Any] = {}


async def _no_sleep(seconds: float) -> None:
    return None


def _retry_effect(kind: ProviderErrorKind) -> str:
    return {
        ProviderErrorKind.RATE_LIMITED: "retried indefinitely, honouring retry-after",
        ProviderErrorKind.SERVER_ERROR: "retried indefinitely with capped backoff",
        ProviderErrorKind.TRANSIENT: "retried up to the consecutive-transient limit",
        ProviderErrorKind.REQUEST_TOO_LARGE: "retried once after shrinking",
        ProviderErrorKind.FATAL: "not retried: the rollout fails",
    }[kind]


def _usage_text(usage: TokenUsage) -> str:
    return (f"input={usage.input_tokens} cached={usage.cached_input_tokens} cache_write={usage.cache_write_tokens} "
            f"output={usage.output_tokens} reasoning={usage.reasoning_tokens}")

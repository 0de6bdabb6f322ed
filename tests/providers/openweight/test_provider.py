"""The openweight provider: admission, native (grammar) and function sessions against a local fake.

The fake is the shared Chat Completions wire server; every response body here is built from
the pinned OpenAI SDK's own types, so field names cannot drift from the real API.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function
from openai.types.completion_usage import PromptTokensDetails

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.models import ArtifactRef
from autocad_bench.providers.geometry import ScreenGeometry
from autocad_bench.providers.grammar import load_grammar
from autocad_bench.providers.models import (
    Credentials,
    DisplaySize,
    ModelSpec,
    ModelTurn,
    Observation,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.fake_broker import png_frame
from autocad_bench.testing.provider_conformance import PROVIDER_CONFORMANCE_SECRET
from autocad_bench.testing.wire import RecordedRequest, Reply, WireServer
from autocad_bench_openweight.provider import OpenWeightProvider
from autocad_bench_openweight.session import NATIVE_PHRASE, TOOL_PHRASE, GrammarSession
from tests.providers.fireworks.wire_chat import ChatCompletionsWire

LOCATION = "batch.json: $.rollouts[0]"
DESKTOP = DisplaySize(width=1920, height=1080)
MODEL = "ByteDance-Seed/UI-TARS-1.5-7B"
USAGE = CompletionUsage(prompt_tokens=1200, completion_tokens=40, total_tokens=1240,
                        prompt_tokens_details=PromptTokensDetails(cached_tokens=200))
BILLED = TokenUsage(input_tokens=1000, cached_input_tokens=200, output_tokens=40)


# --- response bodies from the SDK's types ---------------------------------------------------

def completion(message: ChatCompletionMessage, finish_reason: Any = "stop", n: int = 0) -> Reply:
    body = ChatCompletion(
        id=f"chatcmpl-{n}", object="chat.completion", created=1_700_000_000, model=MODEL,
        choices=[Choice(index=0, finish_reason=finish_reason, message=message)], usage=USAGE,
    )
    return Reply.json(body.model_dump(mode="json"))


def text_reply(text: str, finish_reason: Any = "stop", n: int = 0) -> Reply:
    return completion(ChatCompletionMessage(role="assistant", content=text), finish_reason, n)


def tool_reply(arguments: Any, call_id: str = "call_1") -> Reply:
    call = ChatCompletionMessageFunctionToolCall(
        id=call_id, type="function", function=Function(name="computer_action", arguments=json.dumps(arguments)))
    return completion(ChatCompletionMessage(role="assistant", content=None, tool_calls=[call]), "tool_calls")


# --- requests and observations --------------------------------------------------------------

def write_png(root: Path, relative: str, data: bytes) -> ArtifactRef:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(), width=DESKTOP.width,
                       height=DESKTOP.height)


def spec(wire: WireServer | None = None, tool_mode: str = "native", **options: Any) -> ModelSpec:
    base = {"base_url": (wire.url if wire else "http://127.0.0.1:8000") + "/v1"}
    if tool_mode == "native":
        base["grammar"] = "uitars"
    return ModelSpec(provider="openweight", model=MODEL, options={**base, **options}, tool_mode=tool_mode)


def session_request(model: ModelSpec, root: Path, resume_state: Any = None) -> SessionRequest:
    ref = write_png(root, "reference.png", png_frame(DESKTOP.width, DESKTOP.height, 99, 7))
    return SessionRequest(rollout_id="r-1", attempt_id="b.r-1.1", model=model, task_prompt="Draw a 100 mm line.",
                          reference=ref, rollout_dir=root, display=DESKTOP,
                          action_schema=computer_action_schema(), action_budget=500, resume_state=resume_state)


def frame(root: Path, index: int) -> ArtifactRef:
    return write_png(root, f"frames/{index:06d}.png", png_frame(DESKTOP.width, DESKTOP.height, index, index))


def observation(root: Path, index: int, previous: ModelTurn | None) -> Observation:
    return Observation(turn_index=index, frame=frame(root, index),
                       feedback="" if previous is None else f"Controller feedback for turn {index}.",
                       tool_use_id=None if previous is None else previous.tool_use_id, remaining_actions=500 - index)


def open_session(model: ModelSpec, root: Path, resume_state: Any = None,
                 credentials: dict[str, str] | None = None) -> ProviderSession:
    return OpenWeightProvider().open_session(session_request(model, root, resume_state),
                                             Credentials(credentials or {}))


def bodies(wire: WireServer) -> list[Any]:
    return [r.json() for r in wire.model_requests()]


@pytest.fixture
def wire() -> Iterator[ChatCompletionsWire]:
    with ChatCompletionsWire() as server:
        yield server


# --- admission ------------------------------------------------------------------------------

def problems(model: ModelSpec) -> dict[str, str]:
    return {p.location: p.message for p in OpenWeightProvider().validate_model_spec(model, LOCATION)}


def test_valid_specs_are_admitted() -> None:
    assert problems(spec()) == {}
    assert problems(spec(tool_mode="function")) == {}
    assert problems(spec(grammar="qwen3-computer-use", coordinates="normalized_1000",
                         usd_per_million_output_tokens=2.5, api_key_env="VLLM_KEY")) == {}


def test_unknown_grammar_lists_installed_names() -> None:
    found = problems(spec(grammar="nope"))
    message = found[f"{LOCATION}.provider_options.grammar"]
    assert "'nope'" in message and "uitars" in message and "qwen-computer-use" in message


def test_tool_mode_and_grammar_must_agree() -> None:
    native = problems(spec(grammar="function"))
    assert list(native) == [f"{LOCATION}.provider_options.grammar"]
    assert "text grammar" in native[f"{LOCATION}.provider_options.grammar"]
    function = problems(spec(tool_mode="function", grammar="uitars"))
    assert list(function) == [f"{LOCATION}.provider_options.grammar"]
    coordinates = problems(spec(tool_mode="function", coordinates="resized"))
    assert list(coordinates) == [f"{LOCATION}.provider_options.coordinates"]


@pytest.mark.parametrize("options", [
    {"base_url": "ftp://127.0.0.1/v1"}, {"base_url": "localhost:8000"}, {"base_url": "http:// x"}, {},
])
def test_bad_base_url_is_located(options: dict[str, Any]) -> None:
    model = ModelSpec(provider="openweight", model=MODEL, options=options)
    assert list(problems(model)) == [f"{LOCATION}.provider_options.base_url"]


def test_other_option_problems_are_located() -> None:
    assert list(problems(spec(speed="fast"))) == [f"{LOCATION}.provider_options.speed"]
    assert list(problems(spec(coordinates="sideways"))) == [f"{LOCATION}.provider_options.coordinates"]
    gpu = problems(spec(usd_per_gpu_hour=-1.0, gpus=0))
    assert list(gpu) == [f"{LOCATION}.provider_options.usd_per_gpu_hour", f"{LOCATION}.provider_options.gpus"]
    negative = problems(spec(usd_per_million_input_tokens=-1))
    assert list(negative) == [f"{LOCATION}.provider_options.usd_per_million_input_tokens"]


def test_the_declared_price_is_the_options_rates_and_free_by_default() -> None:
    provider = OpenWeightProvider()
    free = provider.declared_price(spec())
    assert free is not None and (free.input, free.cached_input, free.output) == (0, 0, 0)
    priced = provider.declared_price(spec(usd_per_million_input_tokens=0.2, usd_per_million_output_tokens=0.8))
    assert priced is not None and (str(priced.input), str(priced.cached_input), str(priced.output)) == (
        "0.2", "0.2", "0.8")


def test_a_gpu_hour_price_bills_the_server_time_of_each_response(wire: ChatCompletionsWire,
                                                                   tmp_path: Path) -> None:
    from decimal import Decimal

    from autocad_bench.costs.calculator import price_response
    from autocad_bench.costs.pricing import ResolvedPrice

    model = spec(wire, usd_per_gpu_hour=3.6, gpus=2)
    price = OpenWeightProvider().declared_price(model)
    assert price is not None and price.server_hour == Decimal("7.2") and price.input == 0
    wire.push(text_reply("Thought: x\nAction: click(start_box='(10,10)')", n=0))

    async def one() -> ModelTurn:
        session = open_session(model, tmp_path)
        try:
            return await session.next_turn(observation(tmp_path, 0, None))
        finally:
            await session.aclose()

    turn = asyncio.run(one())
    assert 0 < turn.usage.server_seconds < 60
    cost = price_response(ResolvedPrice(model=MODEL, price=price, priced_by_fallback=False,
                                        as_of=datetime.date(2026, 12, 1)), turn.usage)
    # 7.2 USD per hour is 0.002 USD per second of the request.
    assert cost.server_usd == Decimal(str(turn.usage.server_seconds)) * Decimal("0.002")
    assert cost.total_usd > 0 and cost.input_usd == 0 and cost.output_usd == 0
    unpriced = asyncio.run(_one_unpriced(wire, tmp_path / "u"))
    assert unpriced.usage.server_seconds == 0, "no GPU price, no server time recorded"


async def _one_unpriced(wire: ChatCompletionsWire, root: Path) -> ModelTurn:
    root.mkdir()
    wire.push(text_reply("Thought: x\nAction: click(start_box='(10,10)')", n=0))
    session = open_session(spec(wire), root)
    try:
        return await session.next_turn(observation(root, 0, None))
    finally:
        await session.aclose()


def test_credential_names_follow_api_key_env(tmp_path: Path) -> None:
    provider = OpenWeightProvider()
    assert provider.credential_names(spec()) == []
    assert provider.credential_names(spec(api_key_env="VLLM_KEY")) == ["VLLM_KEY"]
    with pytest.raises(ValueError, match="VLLM_KEY is not set"):
        open_session(spec(api_key_env="VLLM_KEY"), tmp_path)


# --- native sessions ------------------------------------------------------------------------

def test_native_uitars_session(wire: ChatCompletionsWire, tmp_path: Path) -> None:
    geometry = ScreenGeometry.smart_resize(DESKTOP)
    assert (geometry.shown.width, geometry.shown.height) == (1932, 1092)
    wire.push(
        text_reply("Thought: pick the LINE tool.\nAction: click(start_box='(966,546)')", n=0),
        text_reply("I am not sure what to do here.", n=1),
        text_reply("Thought: a very long thought that never ends", finish_reason="length", n=2),
        text_reply("Thought: the line is drawn.\nAction: finished(content='done')", n=3),
    )
    model = spec(wire, temperature=0.0, max_tokens=512)

    async def scenario() -> list[ModelTurn]:
        session = open_session(model, tmp_path)
        assert isinstance(session, GrammarSession) and session.geometry == geometry
        assert wire.model_requests() == []  # opening sends nothing
        turns: list[ModelTurn] = []
        previous: ModelTurn | None = None
        for index in range(4):
            previous = await session.next_turn(observation(tmp_path, index, previous))
            turns.append(previous)
        await session.aclose()
        return turns

    turns = asyncio.run(scenario())
    x, y = geometry.to_desktop(966, 546)
    assert (x, y) == (960, 540)
    assert turns[0].action_input == {"actions": [{"type": "click", "x": 960, "y": 540, "button": "left",
                                                   "count": 1}]}
    assert turns[0].malformed is None and turns[0].usage == BILLED and turns[0].response_id == "chatcmpl-0"

    assert turns[1].action_input is None and turns[1].malformed and "uitars" in turns[1].malformed
    assert turns[1].text == "I am not sure what to do here." and turns[1].usage == BILLED
    assert turns[2].action_input is None and turns[2].malformed
    assert "truncated at max_tokens (512)" in turns[2].malformed and turns[2].stop_reason == "length"
    assert turns[3].malformed is None
    assert turns[3].action_input == {"actions": [{"type": "done"}]}
    assert len({t.tool_use_id for t in turns}) == 4

    sent = bodies(wire)
    assert len(sent) == 4
    grammar = load_grammar("uitars")
    for body in sent:
        assert "tools" not in body and "tool_choice" not in body
        assert body["model"] == MODEL and body["max_tokens"] == 512 and body["temperature"] == 0.0
        assert body["messages"][0] == {"role": "system", "content": grammar.instructions(geometry)}
        assert all(m["role"] in ("system", "user", "assistant") for m in body["messages"])
    first_user = json.dumps(sent[0]["messages"][1])
    assert NATIVE_PHRASE in first_user and TOOL_PHRASE not in first_user
    # The malformed reply is replayed verbatim; feedback and the new screenshot follow as one user message.
    third = sent[2]["messages"]
    assert third[-2] == {"role": "assistant", "content": "I am not sure what to do here."}
    kinds = [part["type"] for part in third[-1]["content"]]
    assert third[-1]["role"] == "user" and kinds == ["text", "image_url"]
    assert "Controller feedback for turn 2." in third[-1]["content"][0]["text"]
    assert third[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    # Append-only: each request's messages extend the previous one's.
    for before, after in itertools.pairwise(sent):
        assert after["messages"][:len(before["messages"])] == before["messages"]


def test_native_checkpoint_resume_sends_the_same_request(wire: ChatCompletionsWire, tmp_path: Path) -> None:
    replies = ["Action: click(start_box='(100,100)')", "Action: type(content='LINE')",
               "Action: hotkey(key='enter')"]
    wire.push(*(text_reply(text, n=i) for i, text in enumerate(replies)))
    wire.push(text_reply(replies[2], n=9))
    model = spec(wire)

    async def scenario() -> tuple[Any, list[ModelTurn]]:
        session = open_session(model, tmp_path)
        first = await session.next_turn(observation(tmp_path, 0, None))
        second = await session.next_turn(observation(tmp_path, 1, first))
        state = json.loads(json.dumps(session.checkpoint(), sort_keys=True))
        third = await session.next_turn(observation(tmp_path, 2, second))
        await session.aclose()
        resumed = open_session(model, tmp_path, resume_state=state)
        again = await resumed.next_turn(observation(tmp_path, 2, second))
        await resumed.aclose()
        return state, [first, second, third, again]

    state, turns = asyncio.run(scenario())
    assert state["session_key"].startswith("acb-") and state["conversation"]["responses"] == 2
    assert turns[1].action_input == {"actions": [{"type": "type", "text": "LINE"}]}
    assert turns[2].action_input == turns[3].action_input
    requests: list[RecordedRequest] = wire.model_requests()
    assert len(requests) == 4
    assert requests[3].body == requests[2].body  # the resumed session replays the conversation byte for byte


def test_native_qwen3_normalized_geometry_is_identity(wire: ChatCompletionsWire, tmp_path: Path) -> None:
    call = {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}
    wire.push(text_reply(f"<tool_call>\n{json.dumps(call)}\n</tool_call>"))

    async def scenario() -> tuple[ProviderSession, ModelTurn]:
        session = open_session(spec(wire, grammar="qwen3-computer-use"), tmp_path)
        turn = await session.next_turn(observation(tmp_path, 0, None))
        await session.aclose()
        return session, turn

    session, turn = asyncio.run(scenario())
    assert isinstance(session, GrammarSession) and session.geometry.is_identity
    assert turn.malformed is None
    assert turn.action_input == {"actions": [{"type": "click", "x": 960, "y": 540, "button": "left", "count": 1}]}


# --- function mode ----------------------------------------------------------------------------

def test_function_mode_declares_the_tool(wire: ChatCompletionsWire, tmp_path: Path) -> None:
    actions = {"actions": [{"type": "click", "x": 10, "y": 12, "button": "left", "count": 1}]}
    wire.push(tool_reply(actions))

    async def scenario() -> ModelTurn:
        session = open_session(spec(wire, tool_mode="function", api_key_env="VLLM_KEY"), tmp_path,
                               credentials={"VLLM_KEY": "sk-local-123"})
        turn = await session.next_turn(observation(tmp_path, 0, None))
        await session.aclose()
        return turn

    turn = asyncio.run(scenario())
    assert turn.action_input == actions and turn.usage == BILLED
    request = wire.model_requests()[0]
    body = request.json()
    assert [t["function"]["name"] for t in body["tools"]] == ["computer_action"]
    assert body["tools"][0]["function"]["parameters"] == computer_action_schema()
    assert body["tool_choice"] == {"type": "function", "function": {"name": "computer_action"}}
    assert request.headers["authorization"] == "Bearer sk-local-123"


# --- the provider kit -----------------------------------------------------------------------

class TestOpenWeightConformance(ProviderConformance):
    """Tool mode ``function`` (the kit's rules assume the computer_action tool)."""

    @pytest.fixture
    def provider(self) -> OpenWeightProvider:
        return OpenWeightProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with ChatCompletionsWire() as server:
            yield server

    @pytest.fixture
    def credentials(self, provider: OpenWeightProvider) -> Credentials:
        return Credentials({"OPENWEIGHT_TEST_KEY": PROVIDER_CONFORMANCE_SECRET})

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="openweight", model=MODEL,
                         options={"base_url": wire_server.url + "/v1", "timeout_s": 20,
                                  "api_key_env": "OPENWEIGHT_TEST_KEY"})

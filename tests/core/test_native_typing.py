"""The one typing rule every native vocabulary shares."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocad_bench.actions.models import action_to_wire
from autocad_bench.actions.native import typed_actions


def wire(text: str) -> list[dict[str, object]]:
    return [action_to_wire(a) for a in typed_actions(text)]


def test_line_breaks_and_tabs_become_keys_and_crlf_is_one_enter() -> None:
    assert wire("LINE\r\n0,0\n\t10,0\r") == [
        {"type": "type", "text": "LINE"}, {"type": "key", "keys": ["enter"]},
        {"type": "type", "text": "0,0"}, {"type": "key", "keys": ["enter"]}, {"type": "key", "keys": ["tab"]},
        {"type": "type", "text": "10,0"}, {"type": "key", "keys": ["enter"]}]


@pytest.mark.parametrize(("text", "message"), [
    ("", "text must not be empty"),
    ("50°", "character U+00B0 at offset 2 cannot be typed"),
])
def test_what_cannot_be_typed_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        typed_actions(text)


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126) | st.sampled_from("\n\t\r"),
               min_size=1))
def test_printable_text_round_trips(text: str) -> None:
    typed = ""
    for action in wire(text):
        typed += str(action["text"]) if action["type"] == "type" else {"enter": "\n", "tab": "\t"}[
            action["keys"][0]]  # type: ignore[index]
    assert typed == text.replace("\r\n", "\n").replace("\r", "\n")

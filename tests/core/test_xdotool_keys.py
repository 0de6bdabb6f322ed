"""xdotool key combos as Anthropic's computer tool sends them, mapped onto broker key chords."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocad_bench.actions.keys import KEY_NAMES
from autocad_bench.actions.models import ACTION_ADAPTER
from autocad_bench.actions.xdotool import XDOTOOL_KEYS, parse_key_combo, parse_key_sequence


@pytest.mark.parametrize(
    ("combo", "chord"),
    [
        ("ctrl+s", ("ctrl", "s")),
        ("Return", ("enter",)),
        ("KP_Enter", ("enter",)),
        ("super", ("win",)),
        ("Super_L", ("winleft",)),
        ("Page_Down", ("pagedown",)),
        ("Page_Up", ("pageup",)),
        ("Prior", ("pageup",)),
        ("Next", ("pagedown",)),
        ("shift+Tab", ("shift", "tab")),
        ("F5", ("f5",)),
        ("F24", ("f24",)),
        ("BackSpace", ("backspace",)),
        ("Escape", ("esc",)),
        ("space", ("space",)),
        ("a", ("a",)),
        ("A", ("a",)),
        ("5", ("5",)),
        ("/", ("/",)),
        ("plus", ("+",)),
        ("minus", ("-",)),
        ("ctrl+plus", ("ctrl", "+")),
        ("ctrl++", ("ctrl", "+")),
        ("+", ("+",)),
        ("ctrl+shift+Escape", ("ctrl", "shift", "esc")),
        ("alt+Tab", ("alt", "tab")),
        ("alt+F4", ("alt", "f4")),
        ("Control_L+c", ("ctrlleft", "c")),
        ("KP_0", ("num0",)),
        ("KP_Add", ("add",)),
        ("Delete", ("delete",)),
        ("Up", ("up",)),
        ("Menu", ("apps",)),
        ("cmd+c", ("ctrl", "c")),
        ("CTRL+S", ("ctrl", "s")),
        ("enter", ("enter",)),
        ("pgdn", ("pgdn",)),
        ("  ctrl+z  ", ("ctrl", "z")),
    ],
)
def test_combo_maps_to_chord(combo: str, chord: tuple[str, ...]) -> None:
    assert parse_key_combo(combo) == chord
    # The chord is a valid key action as the broker parses it.
    ACTION_ADAPTER.validate_python({"type": "key", "keys": list(chord)})


@pytest.mark.parametrize(
    ("combo", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("ctrl+", "empty key name"),
        ("+ctrl", "empty key name"),
        ("ctrl++s", "empty key name"),
        ("Reurn", "did you mean 'return'"),
        ("XF86AudioPlay", "xdotool key names"),
        ("\u00e9", "unknown key"),
        ("ctrl+control", "pressed twice"),
        ("ctrl+a b", "whitespace"),
        ("spacebar", "did you mean 'space'"),
    ],
)
def test_bad_combo_raises_actionable_error(combo: str, fragment: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_key_combo(combo)
    assert fragment in str(caught.value)


def test_table_targets_are_broker_keys() -> None:
    assert set(XDOTOOL_KEYS.values()) <= KEY_NAMES
    assert all(name == name.lower() for name in XDOTOOL_KEYS)


def test_sequence_splits_on_whitespace() -> None:
    assert parse_key_sequence("ctrl+a BackSpace") == (("ctrl", "a"), ("backspace",))
    assert parse_key_sequence(" ") == (("space",),)
    with pytest.raises(ValueError, match="empty"):
        parse_key_sequence("\t\n")


@given(st.text(max_size=30))
def test_any_text_parses_or_raises_value_error(text: str) -> None:
    try:
        chord = parse_key_combo(text)
    except ValueError as error:
        assert str(error)
        return
    assert chord
    assert len(set(chord)) == len(chord)
    ACTION_ADAPTER.validate_python({"type": "key", "keys": list(chord)})

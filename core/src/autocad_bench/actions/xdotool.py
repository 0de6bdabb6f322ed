"""Translate xdotool-style key combos (``"ctrl+s"``, ``"Page_Down"``) into ``key`` chords.

Anthropic's native computer-use tool describes keys the way ``xdotool key`` does: X keysym
names such as ``Return``, ``BackSpace``, ``KP_Enter`` or ``Page_Down``, joined by ``+`` into
a combo (``"ctrl+shift+Escape"``), and several combos separated by spaces form a sequence
(``"ctrl+a BackSpace"``). The SDK's ``BetaComputerKeyInput`` docstring (anthropic 2.14.0)
states that names are case-insensitive, so every lookup here folds case.

The broker presses PyAutoGUI key names, restricted to :data:`KEY_NAMES`. This module maps
one onto the other through a single table, :data:`XDOTOOL_KEYS`, plus two fallbacks:

1. a lower-cased token that already is a broker key name (``"enter"``, ``"pagedown"``) is
   taken as it is;
2. a single printable character (``"a"``, ``"5"``, ``"/"``) is that character's key;
   letters are folded to lower case, because case-insensitive names make ``"A"`` and
   ``"a"`` the same key (type upper-case text with a ``type`` action instead).

Anything else raises :class:`ValueError` whose message says what was wrong and how to say
it instead, because the message is sent back to the model.
"""

from __future__ import annotations

import difflib

from autocad_bench.actions.keys import KEY_ALIASES, KEY_NAMES

_MODIFIERS: dict[str, str] = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "control_l": "ctrlleft",
    "control_r": "ctrlright",
    "shift": "shift",
    "shift_l": "shiftleft",
    "shift_r": "shiftright",
    "alt": "alt",
    "alt_l": "altleft",
    "alt_r": "altright",
    # The target desktop is Windows: X's Super (and Meta, which X servers usually bind to
    # the same physical key) is the Windows key.
    "super": "win",
    "super_l": "winleft",
    "super_r": "winright",
    "meta": "win",
    "meta_l": "winleft",
    "meta_r": "winright",
    "win": "win",
    # A model used to macOS means "copy" by cmd+c; on Windows that is ctrl+c (as KEY_ALIASES).
    "cmd": "ctrl",
    "command": "ctrl",
}

_NAVIGATION: dict[str, str] = {
    "return": "enter",
    "enter": "enter",
    "kp_enter": "enter",
    "tab": "tab",
    "escape": "esc",
    "esc": "esc",
    "backspace": "backspace",
    "delete": "delete",
    "insert": "insert",
    "home": "home",
    "end": "end",
    "page_up": "pageup",
    "prior": "pageup",
    "page_down": "pagedown",
    "next": "pagedown",
    "up": "up",
    "down": "down",
    "left": "left",
    "right": "right",
    "space": "space",
    "caps_lock": "capslock",
    "num_lock": "numlock",
    "scroll_lock": "scrolllock",
    "pause": "pause",
    "print": "printscreen",
    "menu": "apps",
    "help": "help",
    "clear": "clear",
    "select": "select",
    "execute": "execute",
}

# Numeric keypad keysyms. Where PyAutoGUI has no keypad-specific name (Enter, arrows),
# the main-block key does the same thing in every Windows application.
_KEYPAD: dict[str, str] = {
    **{f"kp_{digit}": f"num{digit}" for digit in range(10)},
    "kp_add": "add",
    "kp_subtract": "subtract",
    "kp_multiply": "multiply",
    "kp_divide": "divide",
    "kp_decimal": "decimal",
    "kp_separator": "separator",
    "kp_equal": "=",
    "kp_space": "space",
    "kp_tab": "tab",
    "kp_home": "home",
    "kp_end": "end",
    "kp_up": "up",
    "kp_down": "down",
    "kp_left": "left",
    "kp_right": "right",
    "kp_prior": "pageup",
    "kp_page_up": "pageup",
    "kp_next": "pagedown",
    "kp_page_down": "pagedown",
    "kp_insert": "insert",
    "kp_delete": "delete",
}

# X keysym names of printable ASCII characters (xproto keysymdef.h Latin-1 block).
_PUNCTUATION: dict[str, str] = {
    "exclam": "!",
    "quotedbl": '"',
    "numbersign": "#",
    "dollar": "$",
    "percent": "%",
    "ampersand": "&",
    "apostrophe": "'",
    "quoteright": "'",
    "parenleft": "(",
    "parenright": ")",
    "asterisk": "*",
    "plus": "+",
    "comma": ",",
    "minus": "-",
    "period": ".",
    "slash": "/",
    "colon": ":",
    "semicolon": ";",
    "less": "<",
    "equal": "=",
    "greater": ">",
    "question": "?",
    "at": "@",
    "bracketleft": "[",
    "backslash": "\\",
    "bracketright": "]",
    "asciicircum": "^",
    "underscore": "_",
    "grave": "`",
    "quoteleft": "`",
    "braceleft": "{",
    "bar": "|",
    "braceright": "}",
    "asciitilde": "~",
}

_FUNCTION_KEYS: dict[str, str] = {f"f{number}": f"f{number}" for number in range(1, 25)}

XDOTOOL_KEYS: dict[str, str] = {
    **_MODIFIERS,
    **_NAVIGATION,
    **_KEYPAD,
    **_PUNCTUATION,
    **_FUNCTION_KEYS,
}
"""Lower-cased xdotool/X keysym name to the broker key name it presses."""

MODIFIER_KEYS: frozenset[str] = frozenset(_MODIFIERS.values())
"""Broker key names that act as modifiers (useful to check a modifier-only combo)."""


def _check_table() -> None:
    # A typo in the table would surface as a broker-side rejection much later; fail at import.
    bad = sorted(name for name in XDOTOOL_KEYS.values() if name not in KEY_NAMES)
    if bad:  # pragma: no cover - guards edits to the tables above
        raise AssertionError(f"xdotool table maps to unknown key names: {bad}")


_check_table()


def key_name(token: str) -> str:
    """The broker key name for one xdotool key token such as ``"Return"`` or ``"a"``.

    Raises :class:`ValueError` with a model-facing hint when the token names no key the
    broker can press (for instance media keys, non-ASCII characters, or an empty token).
    """
    if not token:
        raise ValueError("empty key name (two '+' in a row, or a '+' at an end?)")
    folded = token.lower()
    mapped = XDOTOOL_KEYS.get(folded)
    if mapped is not None:
        return mapped
    if folded in KEY_NAMES:
        return folded
    if len(token) == 1 and " " < token <= "~":
        # A single printable character names its own key; KEY_NAMES holds all of them.
        return folded
    raise ValueError(_unknown(token))


def _unknown(token: str) -> str:
    message = f"unknown key {token!r}"
    folded = token.lower()
    if folded in KEY_ALIASES:
        # KEY_ALIASES holds PyAutoGUI spellings; reach back to an xdotool name if we have one.
        return f"{message}; did you mean {KEY_ALIASES[folded]!r}?"
    close = difflib.get_close_matches(folded, XDOTOOL_KEYS, n=3, cutoff=0.75)
    if close:
        return f"{message}; did you mean {' or '.join(repr(name) for name in close)}?"
    return (
        f"{message}; use xdotool key names such as 'Return', 'Escape', 'Tab', 'BackSpace', "
        "'Page_Down', 'F5', 'ctrl', 'shift', 'alt' or a single character, joined with '+'"
    )


def _split_combo(text: str) -> list[str]:
    # "+" is both the separator and a key. xdotool itself wants "plus", but models also
    # write "ctrl++" or a bare "+", so a trailing "+" right after a separator is the key.
    if text == "+":
        return ["+"]
    if text.endswith("++"):
        return [*text[:-2].split("+"), "+"]
    return text.split("+")


def parse_key_combo(text: str) -> tuple[str, ...]:
    """Parse one xdotool combo (``"ctrl+shift+s"``) into the chord of broker key names.

    The result is suitable for ``{"type": "key", "keys": [...]}``: every name is in
    :data:`KEY_NAMES` and none repeats. Surrounding whitespace is ignored. Raises
    :class:`ValueError` for an empty combo, an unknown key name, or a key named twice
    (``"ctrl+Control_L"`` is fine, ``"ctrl+control"`` is not); the message is meant for
    the model.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the key combo is empty; name a key such as 'Return' or 'ctrl+s'")
    if any(char.isspace() for char in stripped):
        raise ValueError(
            f"key combo {text!r} contains whitespace; join keys of one combo with '+' "
            "and press separate combos one after the other"
        )
    chord: list[str] = []
    for token in _split_combo(stripped):
        try:
            name = key_name(token)
        except ValueError as error:
            raise ValueError(f"in key combo {text!r}: {error}") from None
        if name in chord:
            raise ValueError(f"in key combo {text!r}: key {token!r} is pressed twice")
        chord.append(name)
    return tuple(chord)


def parse_key_sequence(text: str) -> tuple[tuple[str, ...], ...]:
    """Parse xdotool's space-separated sequence (``"ctrl+a BackSpace"``) into chords.

    Each whitespace-separated combo becomes one chord, pressed in order. A text that is
    exactly one space character means the space bar. Raises :class:`ValueError` as
    :func:`parse_key_combo` does, and for a text with no combo at all.
    """
    if text == " ":
        return (("space",),)
    combos = text.split()
    if not combos:
        raise ValueError("the key text is empty; name a key such as 'Return' or 'ctrl+s'")
    return tuple(parse_key_combo(combo) for combo in combos)

"""Key names a ``key`` action may press: a whitelist of PyAutoGUI key names.

The list is PyAutoGUI's ``KEY_NAMES`` minus three groups, so core never needs to import
PyAutoGUI and the broker never receives a key it should not press:

- raw whitespace/control characters (tab, newline, carriage return, space): use the named
  keys ``tab``, ``enter`` and ``space`` instead, so every key is visible in a trace;
- media, browser, application-launch and ``sleep`` keys, which act on the operating system
  rather than the CAD window (``sleep`` could suspend the VM);
- macOS-only names (``command``, ``option``...), which do nothing on the target desktops.
"""

from __future__ import annotations

_PRINTABLE_KEYS = tuple("!\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~")

_NAMED_KEYS = (
    "accept", "add", "alt", "altleft", "altright", "apps", "backspace", "capslock", "clear",
    "convert", "ctrl", "ctrlleft", "ctrlright", "decimal", "del", "delete", "divide", "down",
    "end", "enter", "esc", "escape", "execute",
    "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12",
    "f13", "f14", "f15", "f16", "f17", "f18", "f19", "f20", "f21", "f22", "f23", "f24",
    "final", "fn", "hanguel", "hangul", "hanja", "help", "home", "insert", "junja", "kana",
    "kanji", "left", "modechange", "multiply", "nonconvert",
    "num0", "num1", "num2", "num3", "num4", "num5", "num6", "num7", "num8", "num9",
    "numlock", "pagedown", "pageup", "pause", "pgdn", "pgup", "print", "printscreen",
    "prntscrn", "prtsc", "prtscr", "return", "right", "scrolllock", "select", "separator",
    "shift", "shiftleft", "shiftright", "space", "subtract", "tab", "up", "win", "winleft",
    "winright", "yen",
)  # fmt: skip

KEY_NAMES: frozenset[str] = frozenset(_PRINTABLE_KEYS + _NAMED_KEYS)
"""Every key name accepted in ``key`` actions (lowercase, PyAutoGUI spelling)."""

KEY_ALIASES: dict[str, str] = {
    "control": "ctrl",
    "ctl": "ctrl",
    "cmd": "ctrl",
    "command": "ctrl",
    "option": "alt",
    "windows": "win",
    "super": "win",
    "meta": "win",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "page_up": "pageup",
    "page_down": "pagedown",
    "pagedn": "pagedown",
    "spacebar": "space",
    "plus": "+",
    "minus": "-",
    "bksp": "backspace",
    "ins": "insert",
}
"""Common misspellings mapped to the accepted name; used only to word a rejection hint."""

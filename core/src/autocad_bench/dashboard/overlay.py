"""An action batch drawn over the frame it acted on, as an SVG layer in frame pixels.

Clicks are rings (numbered in batch order, doubled for double clicks), drags are paths with
an arrowhead, moves are dashed rings, scrolls are arrows, and typed text, key chords, waits
and ``done`` are labels placed at the pointer position where they happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

BUTTON_COLORS = {"left": "#f43f5e", "right": "#f59e0b", "middle": "#a855f7"}
LABEL_H = 34
CHAR_W = 14


def _t(value: object) -> str:
    return escape(str(value), quote=True)


def _xy(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    return None


def _num(action: dict[str, Any], name: str) -> int | None:
    value = action.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def overlay_svg(actions: Sequence[dict[str, Any]], width: int, height: int, *, rejected: bool = False) -> str:
    """The SVG overlay (viewBox = frame pixels) for one batch; empty batches give an empty layer."""
    out = [f'<svg class="overlay{" rejected" if rejected else ""}" viewBox="0 0 {width} {height}" '
           f'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg" aria-label="actions of this turn">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#22d3ee"/></marker></defs>']
    pointer = (width // 2, height - 80)
    labels: dict[tuple[int, int], list[tuple[str, int, str]]] = {}

    def label(kind: str, number: int, text: str, at: tuple[int, int]) -> None:
        labels.setdefault(at, []).append((kind, number, text if len(text) <= 60 else text[:59] + "…"))

    for number, action in enumerate(actions, start=1):
        kind = str(action.get("type", "?"))
        ax, ay = _num(action, "x"), _num(action, "y")
        here = (ax, ay) if ax is not None and ay is not None else None
        x, y = here or (0, 0)
        if kind == "click" and here:
            button = str(action.get("button", "left"))
            stroke = BUTTON_COLORS.get(button, "#f43f5e")
            count = _num(action, "count") or 1
            rings = "".join(f'<circle cx="{x}" cy="{y}" r="{18 + 9 * i}" fill="none" stroke="{stroke}" '
                            f'stroke-width="5"/>' for i in range(min(count, 3)))
            out.append(f'<g class="ov ov-click" data-index="{number}"><title>{number}. {_t(button)} click'
                       f'{" x" + str(count) if count > 1 else ""} at ({x}, {y})</title>{rings}'
                       f'<circle cx="{x}" cy="{y}" r="5" fill="{stroke}"/>'
                       f'<text x="{x + 20}" y="{y - 18}" class="ov-num">{number}</text></g>')
            pointer = here
        elif kind == "move" and here:
            out.append(f'<g class="ov ov-move" data-index="{number}"><title>{number}. move to ({x}, {y})</title>'
                       f'<circle cx="{x}" cy="{y}" r="12" fill="none" stroke="#22d3ee" stroke-width="3" '
                       f'stroke-dasharray="6 4"/><text x="{x + 14}" y="{y - 12}" class="ov-num">{number}</text></g>')
            pointer = here
        elif kind == "drag":
            points = [p for p in (_xy(v) for v in action.get("path", ()) or ()) if p is not None]
            if len(points) >= 2:
                d = " ".join(f"{px},{py}" for px, py in points)
                sx, sy = points[0]
                out.append(f'<g class="ov ov-drag" data-index="{number}"><title>{number}. '
                           f'{_t(action.get("button", "left"))} drag through {len(points)} points</title>'
                           f'<polyline points="{d}" fill="none" stroke="#22d3ee" stroke-width="4" '
                           f'marker-end="url(#arrow)"/><circle cx="{sx}" cy="{sy}" r="6" fill="#22d3ee"/>'
                           f'<text x="{sx + 10}" y="{sy - 10}" class="ov-num">{number}</text></g>')
                pointer = points[-1]
        elif kind == "scroll" and here:
            dx, dy = _num(action, "dx") or 0, _num(action, "dy") or 0
            ex, ey = x + max(-1, min(1, dx)) * 40, y - max(-1, min(1, dy)) * 40
            out.append(f'<g class="ov ov-scroll" data-index="{number}"><title>{number}. scroll dx={dx} dy={dy} '
                       f'at ({x}, {y})</title><line x1="{x}" y1="{y}" x2="{ex}" y2="{ey}" stroke="#22d3ee" '
                       f'stroke-width="4" marker-end="url(#arrow)"/><circle cx="{x}" cy="{y}" r="5" '
                       f'fill="#22d3ee"/></g>')
            label("scroll", number, f"scroll {dx:+d},{dy:+d}", here)
            pointer = here
        elif kind == "type":
            label("type", number, f'"{action.get("text", "")}"', pointer)
        elif kind == "key":
            keys = action.get("keys", ())
            label("key", number, "+".join(str(k) for k in keys) if isinstance(keys, list | tuple) else "?",
                  pointer)
        elif kind == "wait":
            label("wait", number, f"wait {action.get('seconds', '?')}s", pointer)
        elif kind == "done":
            label("done", number, "done", pointer)
        else:
            label("other", number, kind, here or pointer)
    for at, group in labels.items():
        out.extend(_label_group(at, group, width, height))
    out.append("</svg>")
    return "".join(out)


def _label_group(at: tuple[int, int], group: list[tuple[str, int, str]], width: int, height: int) -> list[str]:
    """Labels stacked below the point where they happened (above it near the bottom edge,
    left of it near the right edge), so the whole stack stays on the frame."""
    step = LABEL_H + 4
    total = step * len(group)
    top = at[1] + 24 if at[1] + 24 + total <= height else at[1] - 24 - total
    top = max(2, min(top, height - total))
    out = []
    for i, (kind, number, text) in enumerate(group):
        box_w = 16 + CHAR_W * (len(text) + len(str(number)) + 2)
        x = at[0] + 18 if at[0] + 18 + box_w <= width else at[0] - 18 - box_w
        x = max(2, min(x, width - box_w - 2))
        y = top + i * step
        out.append(f'<g class="ov ov-{kind}" data-index="{number}"><rect x="{x}" y="{y}" width="{box_w}" '
                   f'height="{LABEL_H}" rx="6" class="ov-box"/><text x="{x + 8}" y="{y + LABEL_H - 9}" '
                   f'class="ov-text">{number}. {_t(text)}</text></g>')
    return out


def describe(action: dict[str, Any]) -> str:
    """One short line for an action (the turn tables and the report)."""
    kind = str(action.get("type", "?"))
    if kind == "click":
        count = action.get("count", 1)
        return f"{action.get('button', 'left')} click{' x' + str(count) if count != 1 else ''} " \
               f"({action.get('x')}, {action.get('y')})"
    if kind == "move":
        return f"move ({action.get('x')}, {action.get('y')})"
    if kind == "drag":
        path = action.get("path") or []
        return f"drag {len(path)} points"
    if kind == "scroll":
        return f"scroll {action.get('dx')},{action.get('dy')} at ({action.get('x')}, {action.get('y')})"
    if kind == "type":
        return f"type {action.get('text', '')!r}"
    if kind == "key":
        keys = action.get("keys") or []
        return "key " + "+".join(str(k) for k in keys)
    if kind == "wait":
        return f"wait {action.get('seconds')}s"
    return kind

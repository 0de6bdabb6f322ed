"""The Jinja2 environment shared by the dashboard server and the static report."""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup

from autocad_bench.dashboard.charts import interval_bar
from autocad_bench.dashboard.overlay import describe

DASH = "\u2013"


def static_text(name: str) -> str:
    """A file shipped in ``autocad_bench/dashboard/static`` (CSS and the small script)."""
    return resources.files("autocad_bench.dashboard").joinpath("static", name).read_text(encoding="utf-8")


def usd(value: Any, digits: int = 4) -> str:
    """Template filter: a dollar amount with ``digits`` decimals; a dash for anything not a number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return DASH
    return f"${value:,.{digits}f}"


def score(value: Any) -> str:
    """Template filter: a score with three decimals; a dash for a non-number or NaN."""
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return DASH
    return f"{value:.3f}"


def pct(value: Any) -> str:
    """Template filter: a fraction as a whole percentage; a dash for a non-number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return DASH
    return f"{value:.0%}"


def duration(value: Any) -> str:
    """Template filter: seconds as ``4.2s``, ``3m 07s`` or ``1h 05m``; a dash for a non-number or
    a negative value.
    """
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        return DASH
    seconds = int(value)
    if seconds < 60:
        return f"{value:.1f}s" if value < 10 else f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def when(value: Any) -> str:
    """Template filter: a datetime as UTC ``YYYY-MM-DD HH:MM:SSZ``; a dash for anything else."""
    if not isinstance(value, datetime):
        return DASH
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def ago(value: Any) -> str:
    """Template filter: the time since a datetime (``3m 07s ago``); a dash for anything else."""
    if not isinstance(value, datetime):
        return DASH
    return duration((datetime.now(UTC) - value).total_seconds()) + " ago"


def yesno(value: Any) -> str:
    """Template filter: ``pass``/``fail`` for a truthy/falsy value; a dash for ``None``."""
    return DASH if value is None else ("pass" if value else "fail")


def count(value: Any) -> str:
    """Template filter: an integer with thousands separators; a dash for a non-integer or bool."""
    if not isinstance(value, int) or isinstance(value, bool):
        return DASH
    return f"{value:,}"


def ci_bar(estimate: Any, percent: bool = False, label: str = "") -> Markup:
    """The interval bar of a metrics :class:`~autocad_bench.metrics.Estimate` (inline SVG)."""
    value = estimate.value
    return Markup(interval_bar(value, estimate.low, estimate.high, wide=bool(estimate.wide) and value is not None,
                               percent=percent, label=label))


def url(path: str, **params: Any) -> str:
    """``path?query`` with the parameters that are not None (values are URL-encoded)."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{path}?{query}" if query else path


@functools.cache
def environment() -> jinja2.Environment:
    """The shared Jinja2 environment (built once): package templates, autoescaping, strict
    undefined variables, the filters above and the shared globals.
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("autocad_bench.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(usd=usd, score=score, pct=pct, duration=duration, when=when, ago=ago, yesno=yesno,
                       describe=describe, count=count)
    env.globals.update(url=url, ci_bar=ci_bar, css=Markup(static_text("dashboard.css")),
                       states=("queued", "starting", "running", "evaluating", "done", "failed"))
    return env


def render(template: str, **context: Any) -> str:
    """Render the package template ``template`` with ``context``; Jinja2 raises on a missing
    template or an undefined variable.
    """
    return environment().get_template(template).render(**context)

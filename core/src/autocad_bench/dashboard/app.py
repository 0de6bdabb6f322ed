"""The read-only dashboard server (aiohttp + server-side Jinja2 templates).

Routes (every one takes its batch as ``b``, the batch directory's path relative to the runs
root, and its rollout as ``r``; both are resolved and refused when outside the root):

    /                       registry of every batch under the root, live state counts
    /leaderboard            every model over every batch under the root, with 95% intervals
    /batch?b=&page=&state=  one batch: assignments, comparison charts, pagination
    /rollout?b=&r=&step=    one rollout: frame timeline with action overlays, turns, evaluation
    /file?b=&r=&p=          a PNG inside a rollout directory (frames, reference, evaluation)
    /fragment/...           the live parts of those pages, re-fetched by the page script
    /events?b=&r=           server-sent events: a signature that changes when the page would
    /api/registry, /api/batch?b=   the same data as JSON
    /static/dashboard.js    the page script shipped in the package (no CDN, no build step)

Nothing here reads the environment or writes a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from autocad_bench.dashboard.charts import batch_charts
from autocad_bench.dashboard.leaderboard_page import MetricsCache, batch_metrics, leaderboard_context, root_leaderboard
from autocad_bench.dashboard.overlay import overlay_svg
from autocad_bench.dashboard.reader import STATES, BatchInfo, NotFound, PathRefused, RolloutDetail, RunsRoot
from autocad_bench.dashboard.templating import render, static_text, url

PAGE_SIZE = 100
ROOT_KEY = web.AppKey("runs_root", RunsRoot)
CONFIG_KEY = web.AppKey("dashboard_config", dict)
CLOSING_KEY = web.AppKey("closing", asyncio.Event)
METRICS_KEY = web.AppKey("metrics_cache", MetricsCache)
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
                                "script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# --- helpers ----------------------------------------------------------------------------------


def _root(request: web.Request) -> RunsRoot:
    return request.app[ROOT_KEY]


def _param(request: web.Request, name: str, default: str | None = None) -> str:
    value = request.query.get(name, default)
    if value is None:
        raise web.HTTPBadRequest(text=f"missing query parameter {name!r}")
    return value


def _int_param(request: web.Request, name: str, default: int) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        return default


async def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(fn, *args, **kwargs)


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store"})


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn the reader's refusals into HTTP errors: :class:`PathRefused` becomes 403 and
    :class:`NotFound` 404; anything else propagates unchanged.
    """
    try:
        return await handler(request)
    except PathRefused:
        raise web.HTTPForbidden(text="refused: the path is outside the runs root or not served") from None
    except NotFound as error:
        raise web.HTTPNotFound(text=f"not found: {error}") from None


def _host_is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name.startswith("[") and "]" in name:
        name = name[1:name.index("]")]
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@web.middleware
async def host_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """On a loopback bind only loopback Host headers are answered (no DNS rebinding)."""
    if request.app[CONFIG_KEY].get("loopback_only") and not _host_is_loopback(request.host or ""):
        raise web.HTTPForbidden(text="refused: unexpected Host header for a loopback-only dashboard")
    return await handler(request)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


# --- page contexts ----------------------------------------------------------------------------


def registry_context(root: RunsRoot) -> dict[str, Any]:
    """The registry page's template context: every batch under the root with live state counts."""
    batches = root.registry()
    return {"batches": batches, "root": str(root.root),
            "sig": root.signature(b.path for b in batches),
            "events_url": "/events", "fragment_url": "/fragment/registry"}


def batch_context(root: RunsRoot, key: str, page: int, state: str | None, page_size: int,
                  metrics: MetricsCache | None = None) -> dict[str, Any]:
    """One batch's template context: the ``page`` of rollouts (clamped to the pages there are)
    in ``state`` (``None`` for all), per-model metrics and charts. Raises :class:`NotFound`
    or :class:`PathRefused` for an unknown or outside ``key``.
    """
    batch = root.batch(key)
    models = batch_metrics(batch.path, load=root.cache.json, cache=metrics)
    rows = [r for r in batch.rollouts if state is None or r.state == state]
    pages = max(1, math.ceil(len(rows) / page_size))
    page = max(1, min(page, pages))
    return {
        "batch": batch, "rows": rows[(page - 1) * page_size: page * page_size], "filtered": len(rows),
        "page": page, "pages": pages, "state": state, "models": models,
        "charts": batch_charts(batch.rollouts, models.rows), "sig": root.signature([batch.path]),
        "events_url": url("/events", b=batch.key), "fragment_url": url("/fragment/batch", b=batch.key),
    }


def leaderboard_page_context(root: RunsRoot, metrics: MetricsCache | None = None) -> dict[str, Any]:
    """The leaderboard over every batch under the root (built on a worker thread: it bootstraps)."""
    board = root_leaderboard(root, cache=metrics)
    return {**leaderboard_context(board, batch_links=True), "root": str(root.root),
            "sig": root.signature(root.batch_dirs()), "events_url": "/events",
            "fragment_url": "/fragment/leaderboard"}


def step_context(detail: RolloutDetail, step: int) -> dict[str, Any]:
    """The frame at ``step`` (clamped to the steps there are) and its action overlay SVG;
    ``current`` is ``None`` when the rollout has no steps yet.
    """
    steps = detail.steps
    index = max(0, min(step, len(steps) - 1)) if steps else 0
    current = steps[index] if steps else None
    overlay = ""
    if current is not None and current.frame:
        overlay = overlay_svg(current.actions, current.width, current.height, rejected=current.valid is False)
    return {"steps": len(steps), "step": index, "current": current, "overlay": overlay}


def rollout_context(root: RunsRoot, key: str, rollout_id: str, step: int | None) -> dict[str, Any]:
    """One rollout's template context, positioned at ``step`` (the last step when ``None`` or
    negative). Raises :class:`NotFound` or :class:`PathRefused` like the reader.
    """
    detail = root.rollout(key, rollout_id)
    batch = detail.batch
    start = (len(detail.steps) - 1 if step is None or step < 0 else step) if detail.steps else 0
    return {
        "d": detail, "batch": batch, "row": detail.row, **step_context(detail, start),
        "sig": root.signature([batch.path], rollout=rollout_id),
        "events_url": url("/events", b=batch.key, r=rollout_id),
        "fragment_url": url("/fragment/rollout", b=batch.key, r=rollout_id),
        "file": lambda p: url("/file", b=batch.key, r=rollout_id, p=p),
    }


# --- handlers ---------------------------------------------------------------------------------


async def registry_page(request: web.Request) -> web.Response:
    """``GET /``: the registry page."""
    context = await _in_thread(registry_context, _root(request))
    return _html(await _in_thread(render, "registry.html", **context))


async def registry_fragment(request: web.Request) -> web.Response:
    """``GET /fragment/registry``: the live part of the registry page."""
    context = await _in_thread(registry_context, _root(request))
    return _html(await _in_thread(render, "_registry_live.html", **context))


def _batch_args(request: web.Request) -> tuple[str, int, str | None, int, MetricsCache]:
    state = request.query.get("state")
    return (_param(request, "b"), _int_param(request, "page", 1), state if state in STATES else None,
            request.app[CONFIG_KEY]["page_size"], request.app[METRICS_KEY])


async def batch_page(request: web.Request) -> web.Response:
    """``GET /batch``: one batch's page; 400 without ``b``."""
    context = await _in_thread(batch_context, _root(request), *_batch_args(request))
    return _html(await _in_thread(render, "batch.html", **context))


async def batch_fragment(request: web.Request) -> web.Response:
    """``GET /fragment/batch``: the live part of a batch page; 400 without ``b``."""
    context = await _in_thread(batch_context, _root(request), *_batch_args(request))
    return _html(await _in_thread(render, "_batch_live.html", **context))


async def leaderboard_page(request: web.Request) -> web.Response:
    """``GET /leaderboard``: every model over every batch under the root."""
    context = await _in_thread(leaderboard_page_context, _root(request), request.app[METRICS_KEY])
    return _html(await _in_thread(render, "leaderboard.html", **context))


async def leaderboard_fragment(request: web.Request) -> web.Response:
    """``GET /fragment/leaderboard``: the live part of the leaderboard page."""
    context = await _in_thread(leaderboard_page_context, _root(request), request.app[METRICS_KEY])
    return _html(await _in_thread(render, "_leaderboard_body.html", **context))


def _step_param(request: web.Request) -> int | None:
    raw = request.query.get("step")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


async def rollout_page(request: web.Request) -> web.Response:
    """``GET /rollout``: one rollout's page at ``step``; 400 without ``b`` or ``r``."""
    context = await _in_thread(rollout_context, _root(request), _param(request, "b"), _param(request, "r"),
                               _step_param(request))
    return _html(await _in_thread(render, "rollout.html", **context))


async def rollout_fragment(request: web.Request) -> web.Response:
    """``GET /fragment/rollout``: the live part of a rollout page at its last step."""
    context = await _in_thread(rollout_context, _root(request), _param(request, "b"), _param(request, "r"), None)
    return _html(await _in_thread(render, "_rollout_live.html", **context))


async def step_fragment(request: web.Request) -> web.Response:
    """``GET /fragment/step``: one step's frame and overlay, fetched as the timeline moves."""
    context = await _in_thread(rollout_context, _root(request), _param(request, "b"), _param(request, "r"),
                               _step_param(request))
    return _html(await _in_thread(render, "_step.html", **context))


async def file_handler(request: web.Request) -> web.StreamResponse:
    """``GET /file``: a PNG inside a rollout directory; 403/404 (via :func:`errors_middleware`)
    when the path is refused or missing.
    """
    path = await _in_thread(_root(request).rollout_file, _param(request, "b"), _param(request, "r"),
                            _param(request, "p"))
    return web.FileResponse(path, headers={"Content-Type": "image/png", "Cache-Control": "no-cache"})


async def static_handler(request: web.Request) -> web.Response:
    """``GET /static/{name}``: an asset shipped in the package; 404 for any other name."""
    name = request.match_info["name"]
    assets: dict[str, tuple[str, str]] = request.app[CONFIG_KEY]["assets"]
    if name not in assets:
        raise web.HTTPNotFound()
    text, content_type = assets[name]
    return web.Response(text=text, content_type=content_type, headers={"Cache-Control": "no-cache"})


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return None  # absolute paths stay on the server
    raise TypeError(type(value).__name__)


def _batch_json(batch: BatchInfo) -> dict[str, Any]:
    data = asdict(batch)
    data.pop("path", None)
    data["rollouts"] = [{**asdict(r), "cost_usd": r.cost_usd} for r in batch.rollouts]
    return data


async def api_registry(request: web.Request) -> web.Response:
    """``GET /api/registry``: the registry as JSON (absolute paths left out)."""
    batches = await _in_thread(_root(request).registry)
    body = json.dumps({"batches": [_batch_json(b) for b in batches]}, default=_json_default)
    return web.Response(text=body, content_type="application/json")


async def api_batch(request: web.Request) -> web.Response:
    """``GET /api/batch``: one batch with its rollouts as JSON; 400 without ``b``."""
    batch = await _in_thread(_root(request).batch, _param(request, "b"))
    return web.Response(text=json.dumps(_batch_json(batch), default=_json_default), content_type="application/json")


async def events_handler(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``change`` with the page signature, sent when it changes."""
    root = _root(request)
    key = request.query.get("b")
    rollout = request.query.get("r")
    if key is None:
        def signature() -> str:
            return root.signature(root.batch_dirs())
    else:
        batch = await _in_thread(root.batch_dir, key)
        if rollout is not None:
            await _in_thread(root.require_rollout, batch, rollout)

        def signature() -> str:
            return root.signature([batch], rollout=rollout)

    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    closing = request.app[CLOSING_KEY]
    interval: float = request.app[CONFIG_KEY]["poll_s"]
    last: str | None = None
    quiet = 0.0
    prefix = "retry: 2000\n"
    try:
        while not closing.is_set():
            current = await _in_thread(signature)
            if current != last:
                await response.write(f"{prefix}event: change\ndata: {current}\n\n".encode())
                prefix = ""
                last, quiet = current, 0.0
            elif quiet >= 15:
                await response.write(b": keep-alive\n\n")
                quiet = 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), timeout=interval)
            quiet += interval
    except (ConnectionResetError, ConnectionError):
        pass
    return response


async def _on_shutdown(app: web.Application) -> None:
    app[CLOSING_KEY].set()


def create_app(root: Path, *, poll_s: float = 1.0, page_size: int = PAGE_SIZE,
               loopback_only: bool = True) -> web.Application:
    """The dashboard application over ``root`` (read-only)."""
    app = web.Application(middlewares=[host_middleware, errors_middleware])
    app[ROOT_KEY] = RunsRoot(root)
    app[CONFIG_KEY] = {"poll_s": poll_s, "page_size": page_size, "loopback_only": loopback_only,
                       "assets": {"dashboard.js": (static_text("dashboard.js"), "text/javascript")}}
    app[CLOSING_KEY] = asyncio.Event()
    app[METRICS_KEY] = MetricsCache()
    app.on_response_prepare.append(_security_headers)
    app.on_shutdown.append(_on_shutdown)
    app.router.add_get("/", registry_page)
    app.router.add_get("/batch", batch_page)
    app.router.add_get("/leaderboard", leaderboard_page)
    app.router.add_get("/rollout", rollout_page)
    app.router.add_get("/file", file_handler)
    app.router.add_get("/fragment/registry", registry_fragment)
    app.router.add_get("/fragment/batch", batch_fragment)
    app.router.add_get("/fragment/leaderboard", leaderboard_fragment)
    app.router.add_get("/fragment/rollout", rollout_fragment)
    app.router.add_get("/fragment/step", step_fragment)
    app.router.add_get("/events", events_handler)
    app.router.add_get("/api/registry", api_registry)
    app.router.add_get("/api/batch", api_batch)
    app.router.add_get("/static/{name}", static_handler)
    return app


def is_loopback_bind(host: str) -> bool:
    """Whether ``host`` (a name or address, optionally with a port) is a loopback bind;
    the CLI warns otherwise and the app then answers any Host header.
    """
    return _host_is_loopback(host)


def serve(root: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run the dashboard until interrupted."""
    app = create_app(root, loopback_only=is_loopback_bind(host))
    web.run_app(app, host=host, port=port, shutdown_timeout=2.0, print=None,
                handle_signals=True, access_log=None)

"""Where retry events go on the operator's terminal.

stamina's default hook logs a bare ``stamina.retry_scheduled`` message (the details travel in
``extra``), which reaches stderr through Python's last-resort handler as one unexplained line.
:func:`install_retry_reporting` replaces that hook (keeping any structlog or Prometheus hook
an operator installed) with one that logs a sentence naming what is retried, why, which
attempt it is and how long the wait is, on the ``autocad_bench.retry`` logger; and it gives
the controller's process a stderr handler that looks up ``sys.stderr`` when it writes, so
the lines land above rich's live progress display instead of through it.

Each record also carries the details as attributes (``retry_what``, ``retry_reason``,
``retry_attempt``, ``retry_wait_s``, ``retry_waited_s``), which the live progress display
(:mod:`autocad_bench.progress`) turns into its ``retrying: ...`` status line.

Called once by the controller CLIs (``autocad-bench-batch``, ``autocad-bench-resume``);
library users keep whatever logging and stamina hooks they configured.
"""

from __future__ import annotations

import logging
import sys

import stamina.instrumentation as instrumentation

from autocad_bench.providers.models import ProviderRequestError

LOGGER = "autocad_bench.retry"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MODEL_REQUEST = "autocad_bench.model_request."
"""Prefix of the names :class:`~autocad_bench.retry.caller.ModelCaller` reports model retries under."""


def describe(details: instrumentation.RetryDetails) -> str:
    """One line: what is retried, after which error, which attempt, how long the wait."""
    cause = details.caused_by
    reason = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
    return (f"retrying {details.name} (attempt {details.retry_num + 1}) in {details.wait_for:.1f}s "
            f"after {reason}; waited {details.waited_so_far:.1f}s so far")


def log_retry(details: instrumentation.RetryDetails) -> None:
    """A stamina on-retry hook that logs :func:`describe` at WARNING, with the details as record attributes."""
    cause = details.caused_by
    what = details.name
    if what.startswith(MODEL_REQUEST):
        what = f"model request ({what.removeprefix(MODEL_REQUEST)})"
    if isinstance(cause, ProviderRequestError) and str(cause):
        reason = str(cause)  # already names the provider and what failed
    else:
        reason = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
    logging.getLogger(LOGGER).warning("%s", describe(details), extra={
        "retry_what": what,
        "retry_reason": reason,
        "retry_attempt": details.retry_num + 1,
        "retry_wait_s": details.wait_for,
        "retry_waited_s": details.waited_so_far,
    })


class CurrentStderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (rich's live display swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # logging must never take the controller down
            self.handleError(record)


def install_retry_reporting() -> None:
    """Route stamina's retry events through :func:`log_retry` and give the process one
    stderr handler for warnings (unless logging is configured already)."""
    hooks = [hook for hook in instrumentation.get_on_retry_hooks() if not _is_stamina_logging(hook)]
    instrumentation.set_on_retry_hooks([*hooks, log_retry])
    root = logging.getLogger()
    if not root.handlers:
        handler = CurrentStderrHandler(level=logging.WARNING)
        handler.setFormatter(logging.Formatter(FORMAT, "%H:%M:%S"))
        root.addHandler(handler)


def _is_stamina_logging(hook: object) -> bool:
    # stamina's stdlib-logging hook is a closure made by stamina.instrumentation._logging.
    return getattr(hook, "__module__", "").startswith("stamina.instrumentation._logging") or hook is log_retry

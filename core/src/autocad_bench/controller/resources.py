"""Process resources a controller needs for the concurrency it was asked for."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

FILES_PER_SHARED_ROLLOUT = 16
"""Open descriptors one shared-mode rollout may hold at once, generously: its three trace
logs, the broker connection and its retry, provider connections, the rollout log and the
backend's own (pipes of a local desktop's processes, a tunnel)."""

FILES_FOR_THE_CONTROLLER = 256
"""Descriptors for the controller itself (state files, the registry, the publisher)."""


def raise_open_file_limit(wanted: int) -> int | None:
    """Raise the soft open-file limit to ``wanted`` (capped by the hard limit).

    Called before a shared-mode batch starts, because every rollout then lives in this one
    process and the common default soft limit of 1,024 would run out before a few hundred
    rollouts do. Never lowers the limit. Returns the soft limit in force afterwards, or
    ``None`` where the platform has no such limit (Windows); logs a warning when the hard
    limit stops short of ``wanted``. Does not raise.
    """
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as error:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, error)
        return soft
    if target < wanted:
        log.warning(
            "open-file limit is %d (the hard limit); this batch may need about %d: raise it with ulimit -Hn",
            target, wanted,
        )
    return target

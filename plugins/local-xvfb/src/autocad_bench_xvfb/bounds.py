"""Every wait of the local-xvfb backend, in one place.

Configurable bounds are fields of :class:`~autocad_bench_xvfb.settings.LocalXvfbSettings`
(each with an upper limit); the fixed ones are below. ``docs/local-xvfb.md`` has the table.

==========================================  ===============================================
boundary                                    bound
==========================================  ===============================================
Xvfb reports its display number             ``xvfb_timeout_s`` (10 s, max 60)
broker writes its ready file                ``launch_timeout_s`` (30 s, max 300); an early
                                            broker exit fails at once
authenticated ``/health``                   ``handoff_timeout_s`` (10 s, max 120); each
                                            request at most :data:`HEALTH_REQUEST_TIMEOUT_S`
fresh sandbox launches per rollout          ``launch_attempts`` (2, max 3), full teardown
                                            between them, all before any model call
broker SIGTERM to SIGKILL                   ``broker_shutdown_s`` + :data:`BROKER_EXIT_MARGIN_S`
stray application SIGTERM to SIGKILL        :data:`APP_TERM_TIMEOUT_S`
Xvfb SIGTERM to SIGKILL                     :data:`XVFB_STOP_TIMEOUT_S`
after any SIGKILL                           :data:`KILL_TIMEOUT_S` (Xvfb: :data:`XVFB_STOP_TIMEOUT_S`)
everything of the rollout gone              ``settle_s`` (3 s, max 30)
wrapper's child after SIGTERM               :data:`CHILD_STOP_TIMEOUT_S`
``worker_status`` probe of a broker         :data:`HEALTH_PROBE_TIMEOUT_S` (authenticated
                                            ``/health`` with the stored token)
``recover`` waiting for a live wrapper      none: polled every :data:`ADOPT_POLL_S` until the
                                            wrapper exits; the controller may stop ``recover``
==========================================  ===============================================
"""

from __future__ import annotations

HEALTH_REQUEST_TIMEOUT_S = 5.0
HEALTH_RETRY_PAUSE_S = 0.1
"""Pause between ``/health`` attempts that failed in transport (the listener is already up)."""
BROKER_EXIT_MARGIN_S = 2.0
"""The broker gets its own shutdown bound (``--shutdown-timeout-s``) plus this to exit."""
APP_TERM_TIMEOUT_S = 5.0
"""A stray application process (LibreCAD needs 1.3 to 1.8 s to exit on SIGTERM)."""
XVFB_STOP_TIMEOUT_S = 5.0
KILL_TIMEOUT_S = 3.0
"""How long the kernel gets to remove a process after SIGKILL."""
CHILD_STOP_TIMEOUT_S = 10.0
"""The subprocess-mode child after the wrapper was signalled, before SIGKILL."""
HEALTH_PROBE_TIMEOUT_S = 2.0
ADOPT_POLL_S = 0.5
"""How often ``wrapper recover`` checks whether the wrapper it adopted has exited."""
READY_POLL_S = 0.02
SETTLE_POLL_S = 0.05

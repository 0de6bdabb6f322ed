"""Every wait of the ``ray`` backend that is not a setting, in one place.

The configurable bounds are fields of :class:`~autocad_bench_ray.settings.RaySettings` (each
with an upper limit); the desktop's own bounds (Xvfb, broker ready file, ``/health``,
teardown) are local-xvfb's, because each actor runs local-xvfb's sandbox on its node.
``docs/ray.md`` has the whole table.
"""

from __future__ import annotations

ACTOR_CALL_MARGIN_S = 30.0
"""Added to the desktop's own launch bound for the controller's wait on ``launch``."""
TEARDOWN_CALL_S = 60.0
"""The controller's wait for the actor's ``teardown`` (local-xvfb's teardown takes at most ~30 s)."""
STATUS_CALL_S = 10.0
"""``status``/``handoff`` calls of recovery and of the readiness probes' collection."""
SENTINEL_POLL_S = 0.5
"""How often a node's sentinel checks its actor process, the worker record and the heartbeat."""
KILL_SETTLE_S = 5.0
"""After ``ray.kill`` of a desktop actor: wait this long for Ray to report it dead."""
SENTINEL_EXIT_S = 5.0
"""After a normal teardown the actor waits this long for its sentinel to notice and exit."""

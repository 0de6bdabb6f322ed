"""One live controller per batch: an exclusive lock on the batch output directory itself.

The controller that runs a batch (``autocad-bench-batch``, ``run_batch``) or continues it
(``autocad-bench-resume --execute``) holds an ``flock`` on the batch directory for as long as
it works on it. The kernel drops the lock when the process ends, however it ends (``kill -9``
included), so the lock says exactly whether a controller of the batch is alive on this
machine. The directory itself is locked, not a file in it, so the batch's layout is
unchanged; the descriptor is not inherited by the rollouts' subprocesses (Python opens it
close-on-exec), so a wrapper that outlives its controller does not keep the batch held.

Commands that change a batch's record or tear down its desktops refuse a held batch:
beside its live controller, resume would close live rollouts as lost, release desktops
still in use and start queued rollouts a second time; reap would tear down desktops under
running rollouts.

The lock is advisory and local: on a file system shared by several machines (NFS) a
controller on another machine may not be seen. Not available on Windows (no ``fcntl``),
where the controller does not run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from autocad_bench.errors import Problem, UserError

HELD_HINT = ("another controller is still running this batch (it holds the batch directory); stop it "
             "(Ctrl-C or SIGTERM) or wait for it to finish, then run this again")


@contextlib.contextmanager
def hold_batch(batch_dir: Path) -> Iterator[None]:
    """Hold ``batch_dir`` for the block: no other controller or reap can work on it meanwhile.

    Raises :class:`UserError` (naming the directory) when another process holds it, and
    ``OSError`` when the directory cannot be opened. Released when the block ends.
    """
    fd = os.open(batch_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError([Problem(str(batch_dir), HELD_HINT)]) from None
        yield
    finally:
        os.close(fd)  # closing the only descriptor of the lock releases it

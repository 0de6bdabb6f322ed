"""Run ``autocad-bench-batch`` in this process with an event-loop lag probe (and a profiler).

    python benchmarks/_controller_probe.py LAG_JSON [--profile PSTATS] [--phases PHASES_JSON] -- BATCH_ARGS...

The lag probe is one extra asyncio loop on its own thread that asks to wake every 10 ms and
records how late each wake-up is: the delay any rollout's loop in this process sees from the
GIL and the controller's other threads. ``--profile`` gives every thread of the controller
its own ``cProfile`` profiler clocked by thread CPU time (idle waits cost nothing), merged
into one pstats file at exit. ``--phases`` times the phases of every rollout by thread CPU
time (see ``_phases.py``) and writes label -> [seconds, calls] at exit.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

TICK_S = 0.010


def lag_probe(samples: list[float], stop: threading.Event) -> None:
    async def probe() -> None:
        while not stop.is_set():
            start = time.monotonic()
            await asyncio.sleep(TICK_S)
            samples.append(max(0.0, time.monotonic() - start - TICK_S))

    asyncio.run(probe())


def main() -> None:
    split = sys.argv.index("--")
    own, batch_args = sys.argv[1:split], sys.argv[split + 1:]
    lag_path = Path(own[0])
    profile_path = Path(own[own.index("--profile") + 1]) if "--profile" in own else None
    phases_path = Path(own[own.index("--phases") + 1]) if "--phases" in own else None
    phases = None
    if phases_path is not None:
        from _phases import PhaseClock, install

        phases = PhaseClock()
        install(phases)
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_thread_profile(*_: Any) -> None:
        # Called once on each new thread's first profiled event: swap in a real profiler.
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()

    if profile_path is not None:
        threading.setprofile(start_thread_profile)
        start_thread_profile()
    samples: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=lag_probe, args=(samples, stop), name="lag-probe", daemon=True)
    probe.start()
    sys.argv = ["autocad-bench-batch", *batch_args]
    code = 0
    try:
        from autocad_bench.cli.batch import main as batch_main

        batch_main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        stop.set()
        probe.join(timeout=5)
        lag_path.write_text(json.dumps(samples))
        if phases is not None and phases_path is not None:
            phases_path.write_text(json.dumps(phases.totals()))
        if profile_path is not None:
            import pstats

            threading.setprofile(None)  # type: ignore[arg-type]
            with lock:
                for profile in profiles:
                    profile.disable()
                stats = pstats.Stats(profiles[0])
                for profile in profiles[1:]:
                    try:
                        stats.add(profile)
                    except TypeError:  # a thread whose profiler never saw an event
                        continue
            stats.dump_stats(str(profile_path))
    sys.exit(code)


if __name__ == "__main__":
    main()

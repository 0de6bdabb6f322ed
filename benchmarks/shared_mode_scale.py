"""Shared mode at scale: N concurrent rollouts in one controller process.

Every rollout uses the scripted provider with a simulated model latency (default 1 s per
turn) against its own fake broker (all brokers live in one separate process on loopback,
serving realistic 1920x1080 frames, so their CPU is not the controller's). The controller
runs through ``_controller_probe.py``: ``autocad-bench-batch`` plus an event-loop lag probe.

Measured per run:

* controller CPU per turn: the controller process's user+system CPU over every turn it ran;
* peak RSS of the controller process;
* added turn latency: each turn's time (from the pilots' ``elapsed_s`` in
  ``model_turn_summaries.jsonl``) less the simulated model latency, p50 and p99 over all turns;
* event-loop lag: how late a 10 ms timer on one more loop in the controller wakes, p99 and max;
* wall time against the ideal (turns x latency).

    uv run python benchmarks/shared_mode_scale.py [ROLLOUTS] [TURNS] [LATENCY_S]
    uv run python benchmarks/shared_mode_scale.py --table [TURNS] [LATENCY_S]   # N = 10, 100, 1000
    uv run python benchmarks/shared_mode_scale.py --profile OUT.txt ROLLOUTS TURNS LATENCY_S
    uv run python benchmarks/shared_mode_scale.py --compare-loops [ROLLOUTS] [TURNS] [LATENCY_S]
    uv run python benchmarks/shared_mode_scale.py --decompose [ROLLOUTS] [TURNS_A] [TURNS_B] [LATENCY_S]
    uv run python benchmarks/shared_mode_scale.py --phases [ROLLOUTS] [TURNS] [LATENCY_S]

``--decompose`` fits the controller's CPU to fixed + idle + per rollout + per turn from four batches
(see :func:`decompose`). ``--phases`` times the phases of a rollout inside the controller by
thread CPU time (see ``_phases.py``; the run's own figures then carry its small cost).
``SHARED_SCALE_WRAP`` runs the controller under a tool, e.g. ``SHARED_SCALE_WRAP="perf record
-g -o perf.data"`` or ``"strace -c -f -o calls.txt"``, and ``SHARED_SCALE_SETTLE_S`` sets the
pause between runs (see :data:`SETTLE_S`). ``TMPDIR`` chooses the file system the batch
writes to (``TMPDIR=/dev/shm`` takes the disk out).

``--profile`` runs the controller under per-thread ``cProfile`` (thread CPU time) and writes
the top functions by own time and by cumulative time to OUT.txt, and the raw profile to
OUT.pstats (to compare two runs function by function; the numbers of a profiled
run are inflated by the profiler; only the table of an unprofiled run counts).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import HERE, REPO, broker_process, table

GOAL = {"rollouts": 1000, "cpu_ms_per_turn": 4.0, "wall_ratio": 1.1, "p99_ms": 50.0, "rss_mib": 2048.0}
TABLE_SIZES = (10, 100, 1000)
MODELS = 10
"""Models the rollouts are spread over, each running N / MODELS trials: a batch compares a few
models on many tasks and trials, and its summary (one row and one interval per model) costs
what such a batch pays. Sizes that do not split into at most 100 trials a model give every
rollout a model of its own (a summary row each, which costs more at the end)."""


def models_and_trials(rollouts: int) -> tuple[int, int]:
    if rollouts % MODELS == 0 and rollouts // MODELS <= 100:
        return MODELS, rollouts // MODELS
    return rollouts, 1


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def added_latencies(out: Path, latency: float) -> list[float]:
    """Each turn's wall time less the model latency, from every rollout's turn summaries."""
    added: list[float] = []
    for summaries in (out / "rollouts").glob("*/model_turn_summaries.jsonl"):
        previous = 0.0
        for line in summaries.read_text().splitlines():
            try:
                elapsed = float(json.loads(line)["elapsed_s"])
            except (ValueError, KeyError):
                continue
            added.append(max(0.0, elapsed - previous - latency))
            previous = elapsed
    return added


SETTLE_S = float(os.environ.get("SHARED_SCALE_SETTLE_S", "35"))
"""Pause before each run after the first of one invocation. Removing a finished run's tree
frees tens of thousands of inodes at once, and some file systems (ext4 without a journal, as
on the machine of docs/performance.md) scan recently freed inodes on every file they create
for about 30 s afterwards (``vm.dirty_expire_centisecs``): without the pause the next run's
file creation pays for the previous run's cleanup."""
_runs = 0


def run(rollouts: int, turns: int, latency: float, *, profile: Path | None = None,
        loops: int | None = None, concurrency: int | None = None, phases: bool = False) -> dict[str, Any]:
    global _runs
    if _runs:
        time.sleep(SETTLE_S)
    _runs += 1
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with broker_process(rollouts, 1920, 1080, tmp, realistic=True) as info:
            script = tmp / "script.jsonl"
            batch = {"actions": [{"type": "click", "x": 900, "y": 500, "button": "left", "count": 1},
                                 {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]}
            script.write_text("".join(json.dumps(batch) + "\n" for _ in range(turns - 1))
                              + json.dumps({"actions": [{"type": "done"}]}) + "\n")
            models, trials = models_and_trials(rollouts)
            config = {
                "name": "shared-scale", "trials": trials, "expected_rollouts": rollouts,
                "max_concurrency": concurrency or rollouts,
                "execution_mode": "shared", "tasks_dir": str(REPO / "examples" / "tasks"),
                "infrastructure": {"backend": "example-pool", "broker_version": "windows-autocad-2019-v11",
                                   # All the brokers live in one process on the controller's own
                                   # cores: in a start wave of 1,000 rollouts a broker's answer to
                                   # the pool's stale-session check can take longer than the pool's
                                   # 5 s default, and the rollout would fail admission for a reason
                                   # that says nothing about the controller being measured.
                                   "settings": {"workers": info["urls"], "token_env": "BENCH_POOL_TOKEN",
                                                "lease_dir": str(tmp / "leases"), "health_timeout_s": 60}},
                "evaluation": {"enabled": False},
                "rollouts": [{"rollout_id": f"r{i:04d}", "task_id": "line-and-circle", "provider": "scripted",
                              "model": f"replay-{i}", "provider_options": {"script": str(script),
                                                                          "latency_s": latency}}
                             for i in range(models)],
            }
            config_path = tmp / "config.json"
            config_path.write_text(json.dumps(config))
            env = {**os.environ, "BENCH_POOL_TOKEN": info["token"], "AUTOCAD_BENCH_PROGRESS": "plain"}
            if loops is not None:
                env["AUTOCAD_BENCH_PILOT_LOOPS"] = str(loops)
            out = tmp / "out"
            lag_path = tmp / "lag.json"
            pstats_path = tmp / "controller.pstats"
            phases_path = tmp / "phases.json"
            probe = [sys.executable, str(HERE / "_controller_probe.py"), str(lag_path),
                     *(["--profile", str(pstats_path)] if profile else []),
                     *(["--phases", str(phases_path)] if phases else []), "--",
                     "--config", str(config_path), "--execute", "--output-dir", str(out)]
            # Output to files, never to a pipe nobody reads while waiting (a full pipe blocks the batch).
            with open(tmp / "stdout.txt", "wb") as stdout, open(tmp / "stderr.txt", "wb") as stderr:
                start = time.monotonic()
                # SHARED_SCALE_WRAP="strace -c -f -o /tmp/s.txt" (say) runs the controller under a tracer.
                wrap = os.environ.get("SHARED_SCALE_WRAP", "").split()
                process = subprocess.Popen([*wrap, *probe], env=env, stdout=stdout, stderr=stderr)
                _, status, usage = os.wait4(process.pid, 0)
                wall = time.monotonic() - start
            lines = (tmp / "stdout.txt").read_text().strip().splitlines()
            try:
                summary = json.loads(lines[-1]) if lines else {}
            except ValueError:
                summary = {}
            if not summary:
                sys.stderr.write((tmp / "stderr.txt").read_text()[-4000:])
            lag = json.loads(lag_path.read_text()) if lag_path.exists() else []
            phase_totals = json.loads(phases_path.read_text()) if phases_path.exists() else {}
            added = added_latencies(out, latency) if out.exists() else []
            if profile is not None and pstats_path.exists():
                write_profile(pstats_path, profile, f"{rollouts} x {turns} turns at {latency} s")
            if summary.get("counts", {}).get("done", 0) != rollouts:
                report_unfinished(out, summary, [tmp / "stdout.txt", tmp / "stderr.txt"])
    counts = summary.get("counts", {})
    cpu = usage.ru_utime + usage.ru_stime
    total_turns = rollouts * turns
    return {
        "rollouts": rollouts, "turns": turns, "latency": latency, "loops": loops,
        "exit": os.waitstatus_to_exitcode(status), "done": counts.get("done", 0),
        "cpu_s": cpu, "cpu_ms_per_turn": 1000 * cpu / total_turns,
        "user_ms_per_turn": 1000 * usage.ru_utime / total_turns, "sys_ms_per_turn": 1000 * usage.ru_stime / total_turns,
        "context_switches": usage.ru_nvcsw + usage.ru_nivcsw, "rss_mib": usage.ru_maxrss / 1024,
        "p50_ms": 1000 * percentile(added, 0.50), "p99_ms": 1000 * percentile(added, 0.99),
        "lag_p99_ms": 1000 * percentile(lag, 0.99), "lag_max_ms": 1000 * max(lag, default=float("nan")),
        "wall_s": wall, "ideal_s": turns * latency, "phases": phase_totals,
    }


def report_unfinished(out: Path, summary: dict[str, Any], logs: list[Path]) -> None:
    """Say on stderr what became of every rollout that did not end ``done`` (the output
    directory is temporary: without this a short count would be all that is left of it)."""
    sys.stderr.write(f"not every rollout finished: counts {summary.get('counts')}\n")
    try:
        state = json.loads((out / "batch-state.json").read_text())
    except (OSError, ValueError) as error:
        sys.stderr.write(f"  batch-state.json unreadable: {error}\n")
        return
    for entry in state.get("rollouts", []):
        if entry.get("state") == "done":
            continue
        rollout = out / "rollouts" / entry["rollout_id"]
        result: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            result = json.loads((rollout / "result.json").read_text())
        brief = {k: entry.get(k) for k in ("rollout_id", "state", "failure_class", "stop_reason", "exit_code", "turns")}
        found = {k: result.get(k) for k in ("status", "failure_class", "error", "stop_reason")}
        sys.stderr.write(f"  {json.dumps(brief, default=str)} result: {json.dumps(found, default=str)}\n")
        for log in logs:
            with contextlib.suppress(OSError):
                lines = log.read_text(errors="replace").splitlines()
                for at, line in enumerate(lines):
                    if entry["rollout_id"] not in line:
                        continue
                    # an ERROR line is followed by its traceback: show it up to the next log line
                    shown = [line]
                    if "ERROR" in line:
                        shown += itertools.takewhile(lambda follow: not follow[:2].isdigit(), lines[at + 1:at + 60])
                    sys.stderr.writelines(f"    {log.name}: {text[:400]}\n" for text in shown)


def write_profile(pstats_path: Path, target: Path, title: str) -> None:
    buffer = io.StringIO()
    stats = pstats.Stats(str(pstats_path), stream=buffer)
    stats.strip_dirs()
    buffer.write(f"# controller profile, {title} (per-thread cProfile, thread CPU time)\n")
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)
    target.write_text(buffer.getvalue())
    # The raw profile too, for comparing two runs function by function (pstats.Stats(path)).
    target.with_suffix(".pstats").write_bytes(pstats_path.read_bytes())


def row(result: dict[str, Any]) -> list[Any]:
    return [result["rollouts"], f"{result['done']}/{result['rollouts']}", f"{result['cpu_ms_per_turn']:.2f}",
            f"{result['user_ms_per_turn']:.2f} / {result['sys_ms_per_turn']:.2f}",
            f"{result['rss_mib']:.0f}", f"{result['p50_ms']:.0f} / {result['p99_ms']:.0f}",
            f"{result['lag_p99_ms']:.0f} / {result['lag_max_ms']:.0f}",
            f"{result['wall_s']:.1f} / {result['ideal_s']:.1f} = {result['wall_s'] / result['ideal_s']:.2f}x"]


HEADER = ["rollouts", "done", "CPU/turn (ms)", "user / sys (ms)", "peak RSS (MiB)", "added latency p50/p99 (ms)",
          "loop lag p99/max (ms)", "wall / ideal (s)"]


def goal_row() -> list[Any]:
    return [f"goal: {GOAL['rollouts']}", "all", f"<= {GOAL['cpu_ms_per_turn']:.0f}", "-", f"< {GOAL['rss_mib']:.0f}",
            f"- / < {GOAL['p99_ms']:.0f}", "-", f"<= {GOAL['wall_ratio']}x"]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def print_table(results: list[dict[str, Any]], turns: int, latency: float) -> None:
    title = (f"shared mode: N concurrent rollouts x {turns} turns, {latency} s model latency, "
             f"1920x1080 frames ({machine()})")
    print(table(title, HEADER, [row(r) for r in results] + [goal_row()]))


def split_cpu(base: dict[str, Any], slow: dict[str, Any], a: dict[str, Any], b: dict[str, Any],
              rollouts: int, turns_a: int, turns_b: int) -> tuple[float, float, float, float]:
    """(fixed s, idle CPU s per wall s, s per rollout, s per turn) from the four runs of
    :func:`decompose` (each a dict with ``cpu_s`` and ``wall_s``): the solution of
    cpu = fixed + idle x wall + rollouts x per_rollout + rollouts x turns x per_turn."""
    idle = max(0.0, (slow["cpu_s"] - base["cpu_s"]) / max(1e-9, slow["wall_s"] - base["wall_s"]))

    def busy(result: dict[str, Any]) -> float:
        return float(result["cpu_s"]) - idle * float(result["wall_s"])

    per_turn = (busy(b) - busy(a)) / (rollouts * (turns_b - turns_a))
    per_rollout = (busy(a) - busy(base)) / (rollouts - 1) - turns_a * per_turn
    fixed = busy(base) - per_rollout - turns_a * per_turn
    return fixed, idle, per_rollout, per_turn


def decompose(rollouts: int, turns_a: int, turns_b: int, latency: float) -> None:
    """Split the controller's CPU into a fixed part, a part per rollout and a part per turn.

    Four batches, each with all its rollouts at once: 1 rollout x ``turns_a`` at ``latency``
    and at five times it (the difference is what an idle controller spends per second of
    wall time: its monitor, progress and the lag probe), then ``rollouts`` x ``turns_a`` and
    ``rollouts`` x ``turns_b``. With the idle cost taken off each run's CPU, the three others
    give the fixed part (start-up, admission, summary), the part per rollout (its start and
    end) and the part per turn; the last column says what they add up to at the goal's size.
    """
    base = run(1, turns_a, latency)
    slow = run(1, turns_a, 5 * latency)
    a = run(rollouts, turns_a, latency)
    b = run(rollouts, turns_b, latency)
    fixed, idle, per_rollout, per_turn = split_cpu(base, slow, a, b, rollouts, turns_a, turns_b)
    at_goal = fixed / (GOAL["rollouts"] * 5) + per_rollout / 5 + per_turn
    row_ = [f"{fixed:.2f}", f"{1000 * idle:.1f}", f"{1000 * per_rollout:.1f}", f"{1000 * per_turn:.2f}",
            f"{1000 * at_goal:.2f}", f"{a['done']}/{rollouts}, {b['done']}/{rollouts}"]
    print(table(f"controller CPU split: 1 and {rollouts} rollouts x {turns_a} and {turns_b} turns, {latency} s model "
                f"latency, written to {tempfile.gettempdir()} ({machine()})",
                ["fixed (s)", "idle (ms/s)", "per rollout (ms)", "per turn (ms)",
                 f"sum per turn at {GOAL['rollouts']} x 5 (ms)", "done"], [row_]))


def phase_rows(result: dict[str, Any]) -> list[list[Any]]:
    """The ``--phases`` table: each phase's thread CPU per rollout, calls per rollout, per call,
    and its share of the controller's CPU (inclusive: a phase contains the phases it calls)."""
    rollouts = result["rollouts"]
    rows = [["controller process (all threads, whole run)", f"{1000 * result['cpu_s'] / rollouts:.2f}", "-", "-",
             "100%"]]
    ordered = sorted(result["phases"].items(), key=lambda item: -item[1][0])
    for label, (seconds, calls) in ordered:
        rows.append([label, f"{1000 * seconds / rollouts:.2f}", f"{calls / rollouts:.2f}",
                     f"{1000 * seconds / calls:.3f}" if calls else "-",
                     f"{100 * seconds / result['cpu_s']:.0f}%" if result["cpu_s"] else "-"])
    return rows


def main(argv: list[str]) -> None:
    profile: Path | None = None
    if "--profile" in argv:
        at = argv.index("--profile")
        profile = Path(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    if argv and argv[0] == "--compare-loops":
        # The same batch with the pilots on their lifecycle threads' own loops (0) and on 1, 2
        # and 4 shared loops, interleaved in one run so that the machine's load hits them alike.
        rollouts = int(argv[1]) if len(argv) > 1 else 200
        turns = int(argv[2]) if len(argv) > 2 else 5
        latency = float(argv[3]) if len(argv) > 3 else 2.0
        counts = (0, 1, 2, 4)
        results = [run(rollouts, turns, latency, loops=count) for count in counts]
        base = results[0]["cpu_ms_per_turn"]
        rows = [[r["loops"] or "own loop per rollout", *row(r)[2:], f"{r['cpu_ms_per_turn'] / base:.2f}x"]
                for r in results]
        print(table(f"shared mode, pilot loops: {rollouts} rollouts x {turns} turns, {latency} s model latency "
                    f"({machine()})", ["pilot loops", *HEADER[2:], "CPU vs own loops"], rows))
        return
    if argv and argv[0] == "--decompose":
        decompose(int(argv[1]) if len(argv) > 1 else 100, int(argv[2]) if len(argv) > 2 else 2,
                  int(argv[3]) if len(argv) > 3 else 6, float(argv[4]) if len(argv) > 4 else 1.0)
        return
    if argv and argv[0] == "--phases":
        rollouts = int(argv[1]) if len(argv) > 1 else 200
        turns = int(argv[2]) if len(argv) > 2 else 5
        latency = float(argv[3]) if len(argv) > 3 else 2.0
        result = run(rollouts, turns, latency, phases=True)
        print_table([result], turns, latency)
        print(table(f"thread CPU per phase: {rollouts} rollouts x {turns} turns, {latency} s model latency, written "
                    f"to {tempfile.gettempdir()} (inclusive; {result['done']}/{rollouts} done)",
                    ["phase", "ms per rollout", "calls per rollout", "ms per call", "of controller CPU"],
                    phase_rows(result)))
        return
    if argv and argv[0] == "--table":
        turns = int(argv[1]) if len(argv) > 1 else 5
        latency = float(argv[2]) if len(argv) > 2 else 2.0
        results = [run(n, turns, latency) for n in TABLE_SIZES]
        print_table(results, turns, latency)
        return
    rollouts = int(argv[0]) if argv else 200
    turns = int(argv[1]) if len(argv) > 1 else 5
    latency = float(argv[2]) if len(argv) > 2 else 1.0
    result = run(rollouts, turns, latency, profile=profile)
    print_table([result], turns, latency)
    if profile is not None:
        print(f"profile written to {profile}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Dashboard page times on a large synthetic runs root.

Generates a root with one batch of ROLLOUTS rollouts of TURNS turns each (400/500 finished
with scores and evaluation files, some running, failed and queued; every turn with its
model-turn record, summary, four input receipts and a frame) plus 20 small batches, serves
it with the real dashboard application on loopback, and prints the median and p95 response
time of each page over REPEAT requests (the first, cold request is reported separately).
Target: registry and batch view <= 200 ms.

    uv run python benchmarks/dashboard_pages.py [ROLLOUTS] [TURNS] [REPEAT]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import REFERENCE, table
from aiohttp import ClientSession, web

from autocad_bench.dashboard.app import create_app

NOW = "2026-11-30T06:00:00+00:00"
MODELS = [("openai", "gpt-5.5"), ("anthropic", "claude-opus-5"), ("fireworks", "kimi-k2p6"), ("bedrock", "nova-3")]


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def generate(root: Path, rollouts: int, turns: int) -> Path:
    """The synthetic root; returns the big batch's directory."""
    frame_source = root / "frame.png"
    frame_source.write_bytes(REFERENCE.read_bytes())
    tasks = root / "tasks"
    for tier in ("primitives", "annotations", "assemblies"):
        (tasks / f"task-{tier}").mkdir(parents=True)
        _write(tasks / f"task-{tier}" / "task.json", json.dumps({"task_id": f"task-{tier}", "tier": tier}))
    config = root / "config.json"
    _write(config, json.dumps({"tasks_dir": "tasks"}))
    batch = root / "runs" / "big"
    (batch / "rollouts").mkdir(parents=True)
    entries = []
    for i in range(rollouts):
        provider, model = MODELS[i % len(MODELS)]
        tier = ("primitives", "annotations", "assemblies")[i % 3]
        state = "done" if i < rollouts * 0.8 else "running" if i < rollouts * 0.9 else \
            "failed" if i < rollouts * 0.94 else "queued"
        score = round((i * 37 % 100) / 100, 3)
        entry: dict[str, Any] = {"rollout_id": f"r{i:04d}", "task_id": f"task-{tier}", "provider": provider,
                                 "model": model, "attempt_id": f"big.r{i:04d}.1", "infrastructure_backend": "aws",
                                 "state": state, "started_at": NOW}
        if state in ("done", "failed"):
            entry.update(finished_at=NOW, turns=turns, actions=4 * turns, token_cost_usd=round(0.01 * turns, 4),
                         infrastructure_cost_usd=0.3, score=score if state == "done" else None,
                         passed=score >= 0.75 if state == "done" else None,
                         failure_class="transport_exhausted" if state == "failed" else None)
        entries.append(entry)
        if state != "queued":
            _rollout(batch / "rollouts" / entry["rollout_id"], frame_source, turns, state, score)
    _write(batch / "batch-state.json", json.dumps({
        "version": 1, "batch_id": "big-batch", "name": "big", "config_path": str(config), "created_at": NOW,
        "updated_at": NOW, "status": "running", "execution_mode": "shared", "max_concurrency": 50,
        "admitted_wave": 50, "infrastructure_backend": "aws", "infrastructure": {}, "evaluation": {"enabled": True},
        "budgets": {"max_actions": 5000}, "counts": {}, "rollouts": entries, "disabled_rollouts": []}))
    for j in range(20):
        small = root / "runs" / "older" / f"batch-{j:02d}"
        (small / "rollouts").mkdir(parents=True)
        _write(small / "batch-state.json", json.dumps({
            "batch_id": f"older-{j}", "name": f"older {j}", "status": "finished", "created_at": NOW,
            "updated_at": NOW, "evaluation": {"enabled": False},
            "rollouts": [{"rollout_id": f"s{k}", "task_id": "t", "provider": "p", "model": "m", "state": "done"}
                         for k in range(10)]}))
    return batch


def _rollout(directory: Path, shared_frame: Path, turns: int, state: str, score: float) -> None:
    (directory / "frames").mkdir(parents=True)
    frame_source = directory / "reference.png"  # one copy per rollout (file systems cap hard links)
    frame_source.write_bytes(shared_frame.read_bytes())
    for sequence in range(turns + 1):
        os.link(frame_source, directory / "frames" / f"{sequence:06d}.png")
    model_turns, summaries, receipts, frame_events = [], [], [], []
    for t in range(turns):
        actions = [{"type": "click", "x": 100 + t % 1700, "y": 200 + t % 800, "button": "left", "count": 1},
                   {"type": "type", "text": f"line {t},0"}, {"type": "key", "keys": ["enter"]},
                   {"type": "drag", "path": [[10, 10], [200, 300]], "button": "left"}]
        model_turns.append(json.dumps({
            "turn_index": t, "attempt": 1, "tool_use_id": f"tu-{t}", "response_id": f"resp-{t}",
            "action_input": {"actions": actions}, "malformed": None, "text": "I will draw the next segment.",
            "stop_reason": "tool_use", "usage": {"input_tokens": 5200, "cached_input_tokens": 4800,
                                                 "output_tokens": 180, "reasoning_tokens": 60},
            "cost_usd": 0.01, "observation": {"frame": {"path": f"frames/{t:06d}.png", "sha256": "0" * 64,
                                                         "width": 1920, "height": 1080}, "feedback": "ok",
                                              "remaining_actions": 5000 - 4 * t},
            "validation": {"valid": True, "problems": []}, "retries": [], "at": NOW}))
        summaries.append(json.dumps({"turn_index": t, "tool_use_id": f"tu-{t}", "valid": True, "actions": 4,
                                     "next_index": 4 * t + 4, "cost_usd": 0.01 * (t + 1), "elapsed_s": 3.0 * t}))
        receipts += [json.dumps({"request_id": f"req-{t}", "index": 4 * t + k, "type": a["type"], "ok": True,
                                 "error": None, "injected_at": NOW, "replayed": False, "turn_index": t})
                     for k, a in enumerate(actions)]
        frame_events.append({"request_id": f"req-{t}", "sequence": t + 1, "first_index": 4 * t,
                             "next_index": 4 * t + 4})
    _write(directory / "model_turns.jsonl", "\n".join(model_turns) + "\n")
    _write(directory / "model_turn_summaries.jsonl", "\n".join(summaries) + "\n")
    _write(directory / "input_receipts.jsonl", "\n".join(receipts) + "\n")
    _write(directory / "frame_events.json", json.dumps({"frame_events": frame_events}))
    _write(directory / "events.json", json.dumps({"events": [
        {"seq": k, "kind": "actions", "at": NOW, "detail": {"request_id": f"req-{k}"}} for k in range(turns)]}))
    _write(directory / "run-state.json", json.dumps({
        "phase": "finished" if state != "running" else "running", "turns": turns, "actions": 4 * turns,
        "cost_usd": 0.01 * turns, "elapsed_s": 3.0 * turns, "counters": {"responses": turns}}))
    if state == "done":
        evaluation = directory / "evaluation"
        (evaluation / "vision-judge").mkdir(parents=True)
        _write(evaluation / "status.json", json.dumps({"state": "done", "history": []}))
        _write(evaluation / "score.json", json.dumps({"score": score, "passed": score >= 0.75, "components": {}}))
        _write(evaluation / "vision-judge" / "score.json", json.dumps({"score": score, "passed": score >= 0.5}))
        for name in ("render.png", "gold-render.png", "diff.png"):
            os.link(frame_source, evaluation / name)


async def measure(root: Path, repeat: int) -> list[list[Any]]:
    app = create_app(root / "runs")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    pages = [
        ("registry", "/"),
        ("batch view, page 1", "/batch?b=big"),
        ("batch view, page 4", "/batch?b=big&page=4"),
        ("batch view, state=running", "/batch?b=big&state=running"),
        ("batch live fragment", "/fragment/batch?b=big"),
        ("rollout view (300 turns)", "/rollout?b=big&r=r0001"),
        ("rollout step fragment", "/fragment/step?b=big&r=r0001&step=150"),
        ("api/batch (JSON)", "/api/batch?b=big"),
    ]
    rows = []
    try:
        async with ClientSession() as session:
            for label, path in pages:
                times = []
                size = 0
                for _ in range(repeat + 1):
                    start = time.perf_counter()
                    async with session.get(base + path) as response:
                        body = await response.read()
                        assert response.status == 200, (path, response.status)
                    times.append((time.perf_counter() - start) * 1000)
                    size = len(body)
                cold, warm = times[0], sorted(times[1:])
                p95 = warm[min(len(warm) - 1, round(0.95 * (len(warm) - 1)))]
                rows.append([label, f"{cold:.1f}", f"{statistics.median(warm):.1f}", f"{p95:.1f}",
                             f"{size / 1024:.0f}"])
    finally:
        await runner.cleanup()
    return rows


def main(rollouts: int, turns: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="dashboard-bench-") as tmp_name:
        root = Path(tmp_name)
        start = time.monotonic()
        generate(root, rollouts, turns)
        generated = time.monotonic() - start
        files = sum(len(f) for _, _, f in os.walk(root))
        rows = asyncio.run(measure(root, repeat))
    print(f"synthetic root: {rollouts} rollouts x {turns} turns, 20 more batches, {files:,} files, "
          f"generated in {generated:.1f}s; {repeat} warm requests per page")
    print(table("dashboard page times (ms)", ["page", "cold", "median", "p95", "KiB"], rows))


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:4]]
    main(*(args + [500, 300, 20][len(args):]))

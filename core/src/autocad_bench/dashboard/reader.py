"""Reading a runs root for the dashboard: batches, rollouts and traces, read-only and tolerant.

Everything here reads the output tree the controller and pilots write (see docs/harness.md)
and nothing else: no environment, no configuration values except a batch's ``tasks_dir``
(to find each task's tier). Files may be missing, half-evaluated or appear mid-run; JSONL
files may end in a torn line. A file that cannot be read counts as absent, never as an error.

Every path that comes from a request goes through :meth:`RunsRoot.batch_dir`,
:meth:`RunsRoot.rollout_dir` or :meth:`RunsRoot.rollout_file`, which resolve it (following
symlinks) and refuse anything that is not inside the root.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autocad_bench.harness.layout import BatchPaths, RolloutPaths
from autocad_bench.models import IDENTIFIER_RE
from autocad_bench.storage.fields import as_bool, as_dict, as_float, as_int, as_list, as_str, as_time

STATES: tuple[str, ...] = ("queued", "starting", "running", "evaluating", "done", "failed")
ACTIVE_STATES = frozenset({"starting", "running", "evaluating"})
FRAME_NAME = re.compile(r"^(\d{6,})\.png$")
# Directories that never hold a batch: skipped while discovering batches under the root.
_PRUNE = frozenset({"rollouts", "frames", "logs", "evaluation", "node_modules", "__pycache__"})
MAX_DEPTH = 6


class PathRefused(Exception):
    """A requested path is outside the runs root or not a name the dashboard serves."""


class NotFound(Exception):
    """A requested batch, rollout or file does not exist (yet)."""


# --- cached file reads ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JsonLines:
    """The records of a JSONL file and how many unparseable lines were skipped."""

    records: tuple[Any, ...]
    skipped: int = 0


_MISSING = object()


class FileCache:
    """Parsed files keyed by path and (mtime, size, inode): an unchanged file is parsed once.

    Thread-safe (pages are built on worker threads); bounded LRU.
    """

    def __init__(self, max_entries: int = 50_000) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], tuple[tuple[int, int, int], Any]] = OrderedDict()
        self._max = max_entries

    @staticmethod
    def stat_key(path: Path) -> tuple[int, int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _get(self, kind: str, path: Path, load: Any) -> Any:
        key = self.stat_key(path)
        if key is None:
            return _MISSING
        slot = (kind, str(path))
        with self._lock:
            hit = self._entries.get(slot)
            if hit is not None and hit[0] == key:
                self._entries.move_to_end(slot)
                return hit[1]
        try:
            value = load(path.read_bytes())
        except OSError:
            return _MISSING
        with self._lock:
            self._entries[slot] = (key, value)
            self._entries.move_to_end(slot)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value

    def json(self, path: Path) -> Any:
        """The parsed JSON document, or None when the file is missing or not (yet) valid JSON."""
        value = self._get("json", path, _parse_json)
        return None if value is _MISSING else value

    def jsonl(self, path: Path) -> JsonLines:
        """Every parseable record; torn or corrupt lines are skipped and counted."""
        value = self._get("jsonl", path, _parse_jsonl)
        return JsonLines(()) if value is _MISSING else value


def _parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _parse_jsonl(data: bytes) -> JsonLines:
    records: list[Any] = []
    skipped = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            skipped += 1  # a torn last line while the pilot is appending, or a corrupt one
    return JsonLines(tuple(records), skipped)


# --- small typed accessors --------------------------------------------------------------------


_dict, _list, _str, _int, _float, _bool = as_dict, as_list, as_str, as_int, as_float, as_bool
parse_time = as_time


# --- aggregation ------------------------------------------------------------------------------


def effective_state(controller_state: str, run_state: Mapping[str, Any] | None, *, has_result: bool,
                    evaluation_enabled: bool) -> str:
    """The state the dashboard shows for one assignment.

    ``queued`` assignments come from batch-state.json before their directories exist. A
    sandbox the controller launched (``starting``) is shown as ``starting`` until its pilot
    has written a run state past handoff, never as handed off before that; a pilot that has
    finished while evaluation is enabled is ``evaluating`` even before the controller's
    monitor has noticed. Final states are the controller's.
    """
    if controller_state not in ("starting", "running"):
        return controller_state if controller_state in STATES else "queued"
    if has_result and evaluation_enabled:
        return "evaluating"
    if run_state is None or run_state.get("phase") in (None, "starting"):
        return "starting"
    return "running"


@dataclass(frozen=True, slots=True)
class RolloutRow:
    """One assignment of a batch, as the batch view and report list it."""

    rollout_id: str
    task_id: str
    provider: str
    model: str
    state: str
    controller_state: str
    has_dir: bool
    phase: str | None = None
    turns: int | None = None
    actions: int | None = None
    elapsed_s: float | None = None
    token_cost_usd: float | None = None
    infrastructure_cost_usd: float | None = None
    score: float | None = None
    passed: bool | None = None
    judge_score: float | None = None
    judge_passed: bool | None = None
    evaluation_state: str | None = None
    failure_class: str | None = None
    stop_reason: str | None = None
    tier: str = "unknown"

    @property
    def model_label(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def cost_usd(self) -> float | None:
        if self.token_cost_usd is None and self.infrastructure_cost_usd is None:
            return None
        return (self.token_cost_usd or 0.0) + (self.infrastructure_cost_usd or 0.0)


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """One batch: its header from batch-state.json and (optionally) every assignment."""

    key: str
    path: Path
    batch_id: str
    name: str | None
    status: str
    created_at: datetime | None
    updated_at: datetime | None
    finished_at: datetime | None
    backend: str
    execution_mode: str
    max_concurrency: int | None
    evaluation_enabled: bool
    counts: dict[str, int]
    total: int
    rollouts: tuple[RolloutRow, ...] = ()
    error: str | None = None

    @property
    def title(self) -> str:
        return self.name or self.batch_id or self.key


@dataclass(frozen=True, slots=True)
class Step:
    """One position of the frame timeline: a frame and the action batch that acted on it."""

    index: int
    kind: str  # "turn", or "frame" for a frame no turn acted on (the latest one)
    frame: str | None
    width: int
    height: int
    turn_index: int | None = None
    actions: tuple[dict[str, Any], ...] = ()
    valid: bool | None = None
    problems: tuple[str, ...] = ()
    text: str = ""
    cost_usd: float = 0.0
    responses: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    receipts: tuple[dict[str, Any], ...] = ()
    result_frame: str | None = None
    at: str | None = None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A rollout's evaluation directory: status, deterministic score, judge verdict (separate)."""

    state: str | None
    history: tuple[dict[str, Any], ...]
    error: str | None
    score: dict[str, Any] | None
    components: tuple[tuple[str, dict[str, Any]], ...]
    judge: dict[str, Any] | None
    images: dict[str, str]


@dataclass(frozen=True, slots=True)
class RolloutDetail:
    """Everything the rollout view shows."""

    batch: BatchInfo
    row: RolloutRow
    run_state: dict[str, Any] | None
    budgets: dict[str, Any]
    result: dict[str, Any] | None
    steps: tuple[Step, ...]
    summaries: tuple[dict[str, Any], ...]
    receipts: int
    events: tuple[dict[str, Any], ...]
    frame_events: tuple[dict[str, Any], ...]
    evaluation: Evaluation | None
    reference: str | None
    skipped_lines: dict[str, int]


class RunsRoot:
    """Read-only access to every batch under one directory."""

    def __init__(self, root: Path, cache: FileCache | None = None) -> None:
        self.root = Path(root).resolve()
        self.cache = cache or FileCache()
        self._index_lock = threading.Lock()
        self._indexed: tuple[dict[str, Any], dict[str, dict[str, Any]]] | None = None

    # --- path safety ------------------------------------------------------------------------

    def _inside(self, path: Path, base: Path | None = None) -> Path:
        base = base or self.root
        resolved = path.resolve()
        if not resolved.is_relative_to(base):
            raise PathRefused(f"{path} is outside {base}")
        return resolved

    def batch_dir(self, key: str) -> Path:
        """The batch directory named by ``key`` (its path relative to the root)."""
        if not isinstance(key, str) or "\x00" in key or key.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", key):
            raise PathRefused("a batch is named by its path relative to the runs root")
        parts = [p for p in key.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise PathRefused("'..' is not allowed in a batch path")
        path = self._inside(self.root.joinpath(*parts))
        if not BatchPaths(path).state.is_file():
            raise NotFound(f"no batch at {key!r}")
        self._inside(BatchPaths(path).state)
        return path

    def rollout_dir(self, batch: Path, rollout_id: str) -> Path:
        if not isinstance(rollout_id, str) or not IDENTIFIER_RE.fullmatch(rollout_id):
            raise PathRefused("not a rollout id")
        return self._inside(BatchPaths(batch).rollout(rollout_id).root, batch)

    def require_rollout(self, batch: Path, rollout_id: str) -> Path:
        """The directory of a rollout listed in the batch's state (it may not exist yet)."""
        directory = self.rollout_dir(batch, rollout_id)
        self._entry(batch, rollout_id)
        return directory

    def rollout_file(self, key: str, rollout_id: str, relative: str) -> Path:
        """A PNG inside a rollout directory (frames, reference, evaluation images)."""
        batch = self.batch_dir(key)
        self._entry(batch, rollout_id)
        rollout = self.rollout_dir(batch, rollout_id)
        if not isinstance(relative, str) or "\x00" in relative or relative.startswith(("/", "\\")):
            raise PathRefused("a file is named relative to its rollout directory")
        parts = [p for p in relative.replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts or ".." in parts or not parts[-1].lower().endswith(".png"):
            raise PathRefused("only PNG images inside the rollout directory are served")
        path = self._inside(rollout.joinpath(*parts), rollout)
        if not path.is_file():
            raise NotFound(relative)
        return path

    def key_of(self, batch: Path) -> str:
        relative = batch.resolve().relative_to(self.root)
        return relative.as_posix() if relative.parts else "."

    # --- discovery --------------------------------------------------------------------------

    def batch_dirs(self) -> list[Path]:
        """Every directory under the root (the root included) holding a batch-state.json."""
        found: list[Path] = []
        stack: list[tuple[Path, int]] = [(self.root, 0)]
        while stack:
            directory, depth = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            if any(e.name == BatchPaths(directory).state.name and e.is_file(follow_symlinks=False) for e in entries):
                found.append(directory)
                continue  # a batch does not contain batches
            if depth >= MAX_DEPTH:
                continue
            for entry in entries:
                if (entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                        and entry.name not in _PRUNE):
                    stack.append((Path(entry.path), depth + 1))
        return sorted(found, key=lambda p: p.as_posix())

    # --- batches ----------------------------------------------------------------------------

    def _state_doc(self, batch: Path) -> dict[str, Any] | None:
        value = self.cache.json(BatchPaths(batch).state)
        return value if isinstance(value, dict) else None

    def _entry(self, batch: Path, rollout_id: str) -> dict[str, Any]:
        doc = self._state_doc(batch) or {}
        for entry in _list(doc.get("rollouts")):
            if isinstance(entry, dict) and entry.get("rollout_id") == rollout_id:
                return entry
        raise NotFound(f"rollout {rollout_id!r} is not in this batch")

    def registry(self) -> list[BatchInfo]:
        """Every batch with live state counts (no per-rollout rows)."""
        return [self.read_batch(path, rows=False) for path in self.batch_dirs()]

    def batch(self, key: str) -> BatchInfo:
        return self.read_batch(self.batch_dir(key), rows=True)

    def read_batch(self, batch: Path, *, rows: bool) -> BatchInfo:
        doc = self._state_doc(batch)
        key = self.key_of(batch)
        if doc is None:
            return BatchInfo(key=key, path=batch, batch_id=key, name=None, status="unreadable", created_at=None,
                             updated_at=None, finished_at=None, backend="", execution_mode="",
                             max_concurrency=None, evaluation_enabled=False,
                             counts={s: 0 for s in STATES}, total=0,
                             error="batch-state.json is not readable JSON (yet)")
        evaluation_enabled = bool(_dict(doc.get("evaluation")).get("enabled"))
        entries = [e for e in _list(doc.get("rollouts")) if isinstance(e, dict)]
        tiers = self._tiers(batch, doc) if rows else {}
        built: list[RolloutRow] = []
        counts = {s: 0 for s in STATES}
        for entry in entries:
            row = self._row(batch, entry, evaluation_enabled, tiers, full=rows)
            counts[row.state] = counts.get(row.state, 0) + 1
            if rows:
                built.append(row)
        return BatchInfo(
            key=key, path=batch, batch_id=_str(doc.get("batch_id")) or key, name=_str(doc.get("name")),
            status=_str(doc.get("status")) or "unknown", created_at=parse_time(doc.get("created_at")),
            updated_at=parse_time(doc.get("updated_at")), finished_at=parse_time(doc.get("finished_at")),
            backend=_str(doc.get("infrastructure_backend")) or "",
            execution_mode=_str(doc.get("execution_mode")) or "",
            max_concurrency=_int(doc.get("max_concurrency")), evaluation_enabled=evaluation_enabled,
            counts=counts, total=len(entries), rollouts=tuple(built),
        )

    def state_entries(self, batch: Path) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
        """batch-state.json's document and its rollout entries by id (parsed and indexed once
        per version of the file; ``(None, {})`` while it is unreadable)."""
        doc = self._state_doc(batch)
        if doc is None:
            return None, {}
        with self._index_lock:
            if self._indexed is not None and self._indexed[0] is doc:
                return doc, self._indexed[1]
        index = {str(e.get("rollout_id")): e for e in _list(doc.get("rollouts")) if isinstance(e, dict)}
        with self._index_lock:
            self._indexed = (doc, index)
        return doc, index

    def rollout_row(self, batch: Path, entry: dict[str, Any], *, evaluation_enabled: bool) -> RolloutRow:
        """One assignment's row, as :meth:`read_batch` builds it, from its batch-state entry
        (reads only that rollout's files; the tier is not looked up)."""
        return self._row(batch, entry, evaluation_enabled, {}, full=True)

    def _row(self, batch: Path, entry: dict[str, Any], evaluation_enabled: bool, tiers: Mapping[str, str],
             *, full: bool) -> RolloutRow:
        rollout_id = _str(entry.get("rollout_id")) or "?"
        controller_state = _str(entry.get("state")) or "queued"
        task_id = _str(entry.get("task_id")) or ""
        provider, model = _str(entry.get("provider")) or "", _str(entry.get("model")) or ""
        tier = tiers.get(task_id, "unknown")
        paths = BatchPaths(batch).rollout(rollout_id) if IDENTIFIER_RE.fullmatch(rollout_id) else None
        directory = paths.root if paths is not None else None
        run_state: dict[str, Any] | None = None
        has_result = False
        if paths is not None and controller_state in ("starting", "running"):
            run_state = _dict(self.cache.json(paths.run_state)) or None
            has_result = paths.result.is_file()
        state = effective_state(controller_state, run_state, has_result=has_result,
                                evaluation_enabled=evaluation_enabled)
        has_dir = full and directory is not None and directory.is_dir()
        rs: dict[str, Any] = {}
        status: dict[str, Any] = {}
        score_doc: dict[str, Any] = {}
        judge: dict[str, Any] = {}
        if has_dir and paths is not None:
            rs = run_state if run_state is not None else _dict(self.cache.json(paths.run_state))
            status = _dict(self.cache.json(paths.evaluation_status))
            score_doc = _dict(self.cache.json(paths.evaluation_score))
            judge = _dict(self.cache.json(paths.judge_score))
        score = _float(entry.get("score"))
        passed = _bool(entry.get("passed"))
        if score is None and score_doc:
            score, passed = _float(score_doc.get("score")), _bool(score_doc.get("passed"))
        token_cost = _float(entry.get("token_cost_usd"))
        if token_cost is None:
            token_cost = _float(rs.get("cost_usd"))
        elapsed = _float(rs.get("elapsed_s"))
        if elapsed is None:
            started, ended = parse_time(entry.get("started_at")), parse_time(entry.get("finished_at"))
            if started is not None and ended is not None:
                elapsed = (ended - started).total_seconds()
            elif started is not None and state in ACTIVE_STATES:
                elapsed = (datetime.now(UTC) - started).total_seconds()
        turns = _int(entry.get("turns"))
        actions = _int(entry.get("actions"))
        return RolloutRow(
            rollout_id=rollout_id, task_id=task_id, provider=provider, model=model, state=state,
            controller_state=controller_state, has_dir=has_dir, tier=tier, phase=_str(rs.get("phase")),
            turns=turns if turns is not None else _int(rs.get("turns")),
            actions=actions if actions is not None else _int(rs.get("actions")),
            elapsed_s=elapsed, token_cost_usd=token_cost,
            infrastructure_cost_usd=_float(entry.get("infrastructure_cost_usd")),
            score=score, passed=passed,
            judge_score=_float(judge.get("score")), judge_passed=_bool(judge.get("passed")),
            evaluation_state=_str(status.get("state")),
            failure_class=_str(entry.get("failure_class")),
            stop_reason=_str(entry.get("stop_reason")) or _str(rs.get("stop_reason")),
        )

    def _tiers(self, batch: Path, doc: Mapping[str, Any]) -> dict[str, str]:
        """task id -> tier from each task.json under the batch configuration's tasks_dir."""
        tasks_dir = self._tasks_dir(batch, _str(doc.get("config_path")))
        tiers: dict[str, str] = {}
        for entry in _list(doc.get("rollouts")):
            task_id = _str(_dict(entry).get("task_id"))
            if task_id is None or task_id in tiers:
                continue
            tier = "unknown"
            if tasks_dir is not None and IDENTIFIER_RE.fullmatch(task_id):
                tier = _str(_dict(self.cache.json(tasks_dir / task_id / "task.json")).get("tier")) or "unknown"
            tiers[task_id] = tier[:64]
        return tiers

    def _tasks_dir(self, batch: Path, config_path: str | None) -> Path | None:
        if not config_path:
            return None
        path = Path(config_path)
        candidates = [path] if path.is_absolute() else [batch.parent / path, Path.cwd() / path]
        for candidate in candidates:
            config = self.cache.json(candidate)
            if isinstance(config, dict):
                tasks_dir = _str(config.get("tasks_dir"))
                if tasks_dir:
                    return candidate.parent / tasks_dir
                return _packaged_tasks_dir(_str(config.get("task_suite")))
        return None

    # --- live signatures --------------------------------------------------------------------

    def signature(self, batches: Iterable[Path], *, rollout: str | None = None) -> str:
        """Changes whenever anything a page shows may have changed (cheap: stats only)."""
        parts: list[Any] = []
        for batch in batches:
            parts.append((str(batch), FileCache.stat_key(BatchPaths(batch).state)))
            doc = self._state_doc(batch) or {}
            for entry in _list(doc.get("rollouts")):
                rollout_id = _str(_dict(entry).get("rollout_id")) or ""
                if not IDENTIFIER_RE.fullmatch(rollout_id):
                    continue
                if rollout is not None and rollout_id != rollout:
                    continue
                if rollout is None and _dict(entry).get("state") not in ACTIVE_STATES:
                    continue
                paths = BatchPaths(batch).rollout(rollout_id)
                watched = [paths.run_state, paths.result, paths.evaluation_status]
                if rollout is not None:
                    watched += [paths.model_turns, paths.input_receipts, paths.turn_summaries, paths.events,
                                paths.frame_events, paths.frames, paths.evaluation, paths.evaluation_score,
                                paths.judge_score, paths.reference]
                parts.append((rollout_id, [FileCache.stat_key(p) for p in watched]))
        return hashlib.sha1(repr(parts).encode(), usedforsecurity=False).hexdigest()[:16]

    # --- one rollout ------------------------------------------------------------------------

    def rollout(self, key: str, rollout_id: str) -> RolloutDetail:
        batch_path = self.batch_dir(key)
        entry = self._entry(batch_path, rollout_id)
        directory = self.rollout_dir(batch_path, rollout_id)
        doc = self._state_doc(batch_path) or {}
        batch = self.read_batch(batch_path, rows=False)
        tiers = self._tiers(batch_path, {"config_path": doc.get("config_path"), "rollouts": [entry]})
        row = self._row(batch_path, entry, batch.evaluation_enabled, tiers, full=True)
        if not directory.is_dir():
            return RolloutDetail(batch=batch, row=row, run_state=None, budgets=_dict(doc.get("budgets")),
                                 result=None, steps=(), summaries=(), receipts=0, events=(), frame_events=(),
                                 evaluation=None, reference=None, skipped_lines={})
        paths = RolloutPaths(directory)
        run_state = _dict(self.cache.json(paths.run_state)) or None
        assignment = _dict(self.cache.json(paths.assignment))
        budgets = _dict(assignment.get("budgets")) or _dict(doc.get("budgets"))
        turns = self.cache.jsonl(paths.model_turns)
        summaries = self.cache.jsonl(paths.turn_summaries)
        receipts = self.cache.jsonl(paths.input_receipts)
        frame_events = tuple(e for e in _list(_dict(self.cache.json(paths.frame_events))
                                              .get("frame_events")) if isinstance(e, dict))
        events = tuple(e for e in _list(_dict(self.cache.json(paths.events)).get("events"))
                       if isinstance(e, dict))
        steps = build_steps(directory, turns.records, receipts.records, frame_events)
        return RolloutDetail(
            batch=batch, row=row, run_state=run_state, budgets=budgets,
            result=_dict(self.cache.json(paths.result)) or None,
            steps=steps, summaries=tuple(s for s in summaries.records if isinstance(s, dict)),
            receipts=len(receipts.records), events=events, frame_events=frame_events,
            evaluation=self._evaluation(directory),
            reference=paths.relative(paths.reference) if paths.reference.is_file() else None,
            skipped_lines={paths.relative(path): n for path, n in ((paths.model_turns, turns.skipped),
                                                                   (paths.turn_summaries, summaries.skipped),
                                                                   (paths.input_receipts, receipts.skipped)) if n},
        )

    def _evaluation(self, directory: Path) -> Evaluation | None:
        paths = RolloutPaths(directory)
        if not paths.evaluation.is_dir():
            return None
        status = _dict(self.cache.json(paths.evaluation_status))
        score = _dict(self.cache.json(paths.evaluation_score)) or None
        judge = _dict(self.cache.json(paths.judge_score)) or None
        components = tuple(sorted((str(k), _dict(v)) for k, v in _dict((score or {}).get("components")).items()))
        images = {name: paths.relative(paths.evaluation / f"{name}.png") for name in ("gold-render", "render", "diff")
                  if (paths.evaluation / f"{name}.png").is_file()}
        return Evaluation(
            state=_str(status.get("state")), history=tuple(h for h in _list(status.get("history"))
                                                           if isinstance(h, dict)),
            error=_str(status.get("error")), score=score, components=components, judge=judge, images=images)


def _frame_size(frame: Mapping[str, Any]) -> tuple[int, int]:
    return (_int(frame.get("width")) or 1920, _int(frame.get("height")) or 1080)


def list_frames(directory: Path) -> list[str]:
    """``frames/NNNNNN.png`` names present, in sequence order."""
    try:
        names = [e.name for e in os.scandir(directory / "frames") if FRAME_NAME.match(e.name)]
    except OSError:
        return []
    return [f"frames/{n}" for n in sorted(names, key=lambda n: int(n[:-4]))]


def build_steps(directory: Path, turns: Iterable[Any], receipts: Iterable[Any],
                frame_events: Iterable[Mapping[str, Any]]) -> tuple[Step, ...]:
    """The frame timeline: each model turn over the frame it acted on, then the latest frame.

    A turn's records (billed retries and the final validated response) are grouped by
    ``turn_index``; the batch drawn is the final response's. The frame after a batch is the
    next turn's observation, or the frame the broker captured for that batch's request.
    """
    grouped: dict[int, list[dict[str, Any]]] = {}
    for record in turns:
        if isinstance(record, dict) and isinstance(record.get("turn_index"), int):
            grouped.setdefault(record["turn_index"], []).append(record)
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for receipt in receipts:
        if isinstance(receipt, dict) and isinstance(receipt.get("turn_index"), int):
            by_turn.setdefault(receipt["turn_index"], []).append(receipt)
    frame_by_request = {str(e.get("request_id")): e for e in frame_events if e.get("request_id")}
    steps: list[Step] = []
    for turn_index in sorted(grouped):
        records = grouped[turn_index]
        final = next((r for r in reversed(records) if r.get("validation") is not None), records[-1])
        observation = _dict(final.get("observation"))
        frame_doc = _dict(observation.get("frame"))
        frame = _str(frame_doc.get("path"))
        width, height = _frame_size(frame_doc)
        validation = _dict(final.get("validation"))
        actions = tuple(a for a in _list(_dict(final.get("action_input")).get("actions")) if isinstance(a, dict))
        usage: dict[str, int] = {}
        for record in records:
            for name, value in _dict(record.get("usage")).items():
                if _int(value) is not None:
                    usage[name] = usage.get(name, 0) + value
        turn_receipts = tuple(by_turn.get(turn_index, ()))
        result_frame = None
        if turn_receipts:
            event = frame_by_request.get(str(turn_receipts[0].get("request_id")))
            if event is not None and _int(event.get("sequence")) is not None:
                result_frame = f"frames/{int(event['sequence']):06d}.png"
        steps.append(Step(
            index=len(steps), kind="turn", frame=frame if frame and _safe_relative(frame) else None,
            width=width, height=height, turn_index=turn_index,
            actions=actions,
            valid=_bool(validation.get("valid")) if validation else None,
            problems=tuple(str(p) for p in _list(validation.get("problems"))),
            text=_str(final.get("text")) or "",
            cost_usd=sum(_float(r.get("cost_usd")) or 0.0 for r in records), responses=len(records),
            usage=usage, receipts=turn_receipts, result_frame=result_frame, at=_str(final.get("at")),
        ))
    for i in range(len(steps) - 1):
        nxt = steps[i + 1].frame
        if steps[i].result_frame is None and nxt is not None and steps[i].valid is not False:
            steps[i] = replace(steps[i], result_frame=nxt)
    frames = list_frames(directory)
    shown = {s.frame for s in steps}
    if frames and frames[-1] not in shown:
        last = steps[-1] if steps else None
        steps.append(Step(index=len(steps), kind="frame", frame=frames[-1],
                          width=last.width if last else 1920, height=last.height if last else 1080))
    return tuple(steps)


def _safe_relative(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return not path.startswith("/") and ".." not in parts and path.lower().endswith(".png")


def _packaged_tasks_dir(task_suite: str | None) -> Path | None:
    """The task directory a suite *name* implies (its installed task pack), as the controller
    resolved it; ``None`` for a path, an unknown name or no suite."""
    from autocad_bench.config.packs import find_suite, is_suite_name
    from autocad_bench.errors import ConfigError

    if not task_suite or not is_suite_name(task_suite):
        return None
    try:
        return find_suite(task_suite, "task_suite")[0].tasks_dir
    except ConfigError:
        return None

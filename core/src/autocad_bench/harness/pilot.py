"""The pilot: the child harness that runs one rollout's model loop against one desktop.

Sequence: lease and reset the desktop (handoff, frame 0), then repeat: ask the model for a
turn (core retry accounting and budget), validate the whole batch, write it down as
*pending*, send it to the broker under its stable request id, store the receipts and the
post-batch frame, clear *pending*. The loop ends on ``done``, a budget stop, or a failure;
then the drawing is checkpointed through the broker, evidence is fetched, the session is
released and ``result.json`` is written once.

Exactly-once across crashes: a batch is recorded in the resume checkpoint before it is
sent (:mod:`autocad_bench.harness.checkpoints`: the file plus its journal). A pilot
started again on the same directory re-sends the pending batch with the same request id
(the broker answers from its replay cache, or executes it if it never arrived) and never
asks the model to redo a turn whose actions may have run.

Durable writes per turn: one, the pending checkpoint of the next batch (a journal line and
an ``fdatasync``). The state *after* a batch that does not end the loop is not written on its
own: the next pending checkpoint carries it (and so does any other checkpoint the pilot
writes first). A pilot killed in between resumes from the previous pending checkpoint and
re-sends that batch, which the broker answers from its replay cache for the session's
lifetime: the same outcome, one durable write fewer per turn. Frames arrive with the
broker's answer and are stored atomically without fsync: the broker keeps every frame, so
a resumed pilot fetches again any recorded frame whose bytes a host crash lost or tore.

Each frame comes with the pointer position the broker read from the desktop when it captured
it (``FrameInfo.pointer``, ``None`` from brokers that do not report it). The checkpoint keeps
it beside the frame and every observation carries it (``Observation.pointer``), so a resumed
pilot shows the model the same pointer with the same frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autocad_bench.actions import (
    ACTION_ADAPTER,
    Action,
    BatchRejection,
    action_request_id,
    computer_action_schema,
    validate_batch,
)
from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.errors import BrokerConflict, BrokerError, BrokerHTTPError, BrokerTransportExhausted
from autocad_bench.broker.protocol import ActionsResponse
from autocad_bench.costs import (
    BudgetTracker,
    InvalidTurnLimitExceeded,
    PricingContract,
    load_pricing,
    price_for,
    price_response,
)
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.feedback import executed_feedback, rejected_feedback
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import (
    FailureClass,
    PendingBatch,
    ResumeCheckpoint,
    RolloutResult,
    RunState,
)
from autocad_bench.harness.trace import TraceWriter, utcnow
from autocad_bench.interrupt import StopRequest, pilot_stop_on_signals
from autocad_bench.plugins import PluginHost
from autocad_bench.providers.models import Credentials, ModelTurn, Observation, SessionRequest
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry.caller import (
    BudgetStopped,
    ModelCaller,
    ModelCallError,
    ModelStopped,
    TransientRetriesExhausted,
    TurnResult,
    malformed_feedback,
    native_malformed_feedback,
)

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
RUN_STATE_INTERVAL_S = 1.0
"""Least time between two run-state.json rewrites within one phase."""
STOP_MODEL_GRACE_S = 5.0
"""After a stop request, how long a model call already in flight may still take: long
enough for a normal answer (so its spend is recorded), short enough that the whole stop
(this, the drawing save, the release and the teardown) stays within the 30 s promise."""


class _Failure(Exception):
    def __init__(self, failure: FailureClass, detail: str) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail


class Pilot:
    """One run of the pilot over one rollout directory (first attempt or a resume)."""

    def __init__(
        self,
        rollout_dir: Path,
        environ: Mapping[str, str],
        *,
        host: PluginHost | None = None,
        broker: BrokerClient | None = None,
        stop: StopRequest | None = None,
    ) -> None:
        self.paths = RolloutPaths(rollout_dir)
        self.stop = stop
        self.assignment = PilotAssignment.model_validate_json(self.paths.assignment.read_bytes())
        self.trace = TraceWriter(self.paths)
        self.environ = environ
        self.host = host or PluginHost(environ=environ)
        self.broker = broker or BrokerClient.from_environ(environ)
        a = self.assignment
        loaded = self.trace.load_checkpoint()
        self.cp = loaded or ResumeCheckpoint(rollout_id=a.rollout_id, attempt_id=a.attempt_id)
        self._frames_to_check = loaded is not None and loaded.frame is not None
        """Resumed with frames on record: check them once against the broker's digests."""
        self.prices: PricingContract = load_pricing(
            environ, pinned=a.pricing
        )
        self.budget = BudgetTracker(a.budgets, state=self.cp.budget)
        self.handoff_seconds: float | None = None
        self.caller = ModelCaller(
            counters=self.cp.counters,
            budget=self.budget,
            # Rates are looked up once: an unlisted model's fallback scans every listed price.
            pricer=functools.partial(price_response, price_for(a.model.model, self.prices)),
            on_response=self._on_response,
            feedback=native_malformed_feedback if a.model.tool_mode == "native" else malformed_feedback,
        )
        self.started = utcnow()
        self._monotonic_start = time.monotonic()
        self.session: ProviderSession | None = None
        self._phase = ""
        self._state_written = 0.0
        self._pending_costs: list[Any] = []
        self._unsaved = False
        """``self.cp`` holds a post-batch state not yet written (see the module docstring)."""

    # --- entry --------------------------------------------------------------------------

    async def run(self) -> int:
        """Run (or continue) the rollout; return the pilot's exit code."""
        # Per-turn requests reuse one keep-alive connection (retries never do); the pool is
        # closed when the run ends, however it ends.
        try:
            async with self.broker.keep_alive():
                return await self._run()
        finally:
            self.trace.close()

    async def _run(self) -> int:
        if self.paths.result.exists():
            existing = RolloutResult.model_validate_json(self.paths.result.read_bytes())
            return existing.exit_code
        if self._stopping() and not self.paths.checkpoint.exists():
            # Stopped before the desktop was handed over: nothing happened that a fresh
            # start would not redo; no result, so resume starts this rollout afresh.
            log.warning("stop requested (%s) before the handoff; rollout %s not started",
                        self._stop_name(), self.assignment.rollout_id)
            return EXIT_FAILED
        self._state("starting")
        failure: _Failure | None = None
        if self.cp.failure is not None:
            failure = _Failure(self.cp.failure, self.cp.failure_detail)
        try:
            if failure is None and not self.cp.done:
                handoff_started = time.monotonic()
                await self._handoff()
                self.handoff_seconds = round(time.monotonic() - handoff_started, 3)
                # The wall-clock budget is the model's time: it starts once the desktop is
                # handed over (lease, reset and frame 0 are the infrastructure's, reported apart).
                self.budget.start_clock()
                self._state("running")
                await self._loop()
        except _Failure as error:
            failure = error
        except BrokerTransportExhausted as error:
            failure = _Failure(FailureClass.TRANSPORT_EXHAUSTED, str(error))
        except BrokerHTTPError as error:
            failure = _Failure(FailureClass.ACTION_REJECTED, f"broker refused: {error}")
        finally:
            if self.session is not None:
                await self.session.aclose()
        if failure is not None:
            self.cp = self.cp.model_copy(update={"failure": failure.failure, "failure_detail": failure.detail})
            self._write_checkpoint(compact=True)
        elif self._unsaved or self.trace.checkpoint_journalled:
            # Leaving the loop: resume-checkpoint.json itself gets the newest state.
            self._write_checkpoint(compact=True)
        return await self._finish(failure)

    # --- handoff ------------------------------------------------------------------------

    async def _handoff(self) -> None:
        a = self.assignment
        self.trace.save_reference(Path(a.reference_png))
        try:
            lease = await self.broker.lease(a.task_id, a.attempt_id)
            if self.cp.session_id is not None and lease.session_id != self.cp.session_id:
                raise _Failure(FailureClass.TRANSPORT_EXHAUSTED,
                               f"the desktop lost session {self.cp.session_id} (now {lease.session_id}); "
                               "the rollout cannot continue exactly")
            if self.cp.frame is not None:
                await self._restore_frames()
            else:
                reset = await self.broker.reset(lease.session_id)
                png = await self.broker.frame(reset.frame.sequence, expected_sha256=reset.frame.sha256)
                frame = self.trace.save_frame(reset.frame.sequence, png, reset.frame.sha256,
                                              reset.frame.width, reset.frame.height)
                self.cp = self.cp.model_copy(update={
                    "session_id": lease.session_id, "next_index": reset.next_index, "frame": frame,
                    "frame_sequence": reset.frame.sequence, "pointer": reset.frame.pointer,
                })
                self._write_checkpoint()
        except (BrokerError, OSError) as error:
            if self.cp.turn_index == 0 and self.cp.pending is None and self.budget.turns == 0:
                raise _Failure(FailureClass.ADMISSION_FAILED, f"desktop handoff failed: {error}") from error
            raise

    async def _restore_frames(self) -> None:
        """On resume, fetch again every recorded frame that a host crash lost or tore.

        Frames are stored without fsync (see :meth:`TraceWriter.save_frame`); the broker
        keeps all frames of the session, so each one whose bytes no longer match is
        re-fetched under its recorded SHA-256, and the model sees exactly what it saw.
        """
        self._frames_to_check = False
        last = self.cp.frame_sequence
        recorded = await self.broker.frame_events()
        for event in recorded.frame_events:
            if event.sequence <= last and not self.trace.frame_intact(event.sequence, event.sha256):
                log.warning("frame %d is missing or torn; fetching it again from the broker", event.sequence)
                png = await self.broker.frame(event.sequence, expected_sha256=event.sha256)
                self.trace.save_frame(event.sequence, png, event.sha256, event.width, event.height)

    # --- the loop -----------------------------------------------------------------------

    async def _loop(self) -> None:
        a = self.assignment
        provider = self.host.provider(a.model.provider)
        assert self.cp.frame is not None
        request = SessionRequest(
            rollout_id=a.rollout_id,
            attempt_id=a.attempt_id,
            trial=a.trial,
            model=a.model,
            task_prompt=a.task_prompt,
            reference=self.trace.save_reference(Path(a.reference_png)),
            rollout_dir=self.paths.root,
            display=a.display,
            action_schema=computer_action_schema(),
            action_budget=a.budgets.max_actions,
            resume_state=self.cp.provider_state,
        )
        self.session = provider.call("open_session", request=request,
                                     credentials=Credentials.from_environ(a.credential_names, self.environ))
        if self.cp.pending is not None:
            await self._execute(self.cp.pending)
        while not self.cp.done:
            if self._stopping():
                raise self._interrupted("before turn")
            observation = Observation(
                turn_index=self.cp.turn_index,
                frame=self.cp.frame,
                feedback=self.cp.feedback,
                tool_use_id=self.cp.tool_use_id,
                remaining_actions=self.budget.remaining_actions,
                post_action_visual_stable=self.cp.post_action_visual_stable,
                pointer=self.cp.pointer,
            )
            try:
                result = await self._request_turn(observation)
            except BudgetStopped as stop:
                self._flush_costs()
                self._save(done=True, stop_reason=str(stop.reason))
                return
            except TransientRetriesExhausted as error:
                self._flush_costs()
                raise _Failure(FailureClass.TRANSPORT_EXHAUSTED, f"model provider unreachable: {error}") from error
            except ModelStopped as error:
                self._flush_costs()
                stopped = (FailureClass.MODEL_REFUSED if error.stop_reason == "refusal"
                           else FailureClass.SAFETY_CHECK_STOPPED)
                raise _Failure(stopped, str(error)) from error
            except ModelCallError as error:
                self._flush_costs()
                raise _Failure(FailureClass.MODEL_CONTRACT_ERROR, str(error)) from error
            if self._stopping():
                # The answer came back after the stop: it is billed and traced, not executed.
                self._flush_costs()
                raise self._interrupted("after the model answered turn")
            await self._handle_turn(result)

    # --- stopping -----------------------------------------------------------------------

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _stop_name(self) -> str:
        return (self.stop.signal_name if self.stop is not None else "") or "a stop request"

    def _interrupted(self, where: str) -> _Failure:
        return _Failure(FailureClass.INTERRUPTED,
                        f"stopped by {self._stop_name()} {where} {self.cp.turn_index}; "
                        "autocad-bench-resume runs it again from the start, keeping this spend")

    async def _request_turn(self, observation: Observation) -> TurnResult:
        """Ask for a turn; after a stop request give a call in flight a short grace, then cancel it."""
        assert self.session is not None
        call = asyncio.ensure_future(self.caller.request_turn(self.session, observation))
        if self.stop is None:
            return await call
        stopped = asyncio.ensure_future(self.stop.wait_async())
        try:
            await asyncio.wait({call, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not call.done():
            await asyncio.wait({call}, timeout=STOP_MODEL_GRACE_S)
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await call
            self._flush_costs()
            raise _Failure(FailureClass.INTERRUPTED,
                           f"stopped by {self._stop_name()} while the model answered turn {self.cp.turn_index}; "
                           f"the call did not return within {STOP_MODEL_GRACE_S:g} s and was cancelled, so any "
                           "tokens the provider billed for it are not counted")
        return call.result()

    async def _handle_turn(self, result: TurnResult) -> None:
        turn = result.turn
        # Malformed responses answered inside the caller advance the turn index.
        index = result.observation.turn_index
        validated = validate_batch(
            turn.action_input,
            self.assignment.display,
            self.budget.remaining_actions,
            native=self.assignment.model.tool_mode == "native",
        )
        self._record_turn(index, result, validated)
        provider_state = self.session.checkpoint() if self.session else None
        if isinstance(validated, BatchRejection):
            try:
                self.budget.record_invalid_turn()
            except InvalidTurnLimitExceeded as error:
                self._save(provider_state=provider_state, turn_index=index + 1, tool_use_id=turn.tool_use_id)
                raise _Failure(FailureClass.ACTION_REJECTED, str(error)) from error
            snapshot = self.budget.snapshot()
            feedback = rejected_feedback(
                "; ".join(validated.messages()), snapshot.consecutive_invalid_turns,
                self.budget.budget.max_consecutive_invalid_turns, self.budget.remaining_actions,
            )
            self._save(provider_state=provider_state, turn_index=index + 1, tool_use_id=turn.tool_use_id,
                       feedback=feedback, post_action_visual_stable=None)
            self._summary(index, turn, valid=False, actions=0)
            return
        self.budget.record_valid_turn()
        offset = self.cp.next_index
        pending = PendingBatch(
            tool_use_id=turn.tool_use_id,
            request_id=action_request_id(self.assignment.attempt_id, turn.tool_use_id, offset),
            expected_index=offset,
            actions=validated.to_wire(),
            turn_index=index,
        )
        # Written (durably) before sending: a crash from here on resends this exact request.
        # Run state is rewritten once per turn, after the batch.
        self._save(provider_state=provider_state, pending=pending, run_state=False)
        await self._execute(pending, validated.actions)

    async def _execute(self, pending: PendingBatch, actions: Sequence[Action] | None = None) -> None:
        """Send ``pending`` (its validated ``actions`` if at hand, else re-read from the wire form)."""
        assert self.cp.session_id is not None
        if actions is None:
            actions = [ACTION_ADAPTER.validate_python(item) for item in pending.actions]
        try:
            # One round trip: the broker sends the post-batch frame with the receipts.
            response, png = await self.broker.actions_with_frame(
                self.cp.session_id, pending.request_id, pending.expected_index, actions)
        except BrokerConflict as error:
            raise _Failure(FailureClass.ACTION_REJECTED,
                           f"broker conflict for batch {pending.request_id[:12]}: {error}") from error
        frame = self.trace.save_frame(response.frame.sequence, png, response.frame.sha256,
                                      response.frame.width, response.frame.height)
        self.trace.receipts(pending.request_id, [
            {**r.model_dump(mode="json"), "replayed": response.replayed, "turn_index": pending.turn_index}
            for r in response.receipts
        ])
        # Counted together with clearing ``pending`` in one checkpoint write, so a resumed
        # pilot counts a batch exactly once whether or not the crash came before this point.
        stop = self.budget.record_actions(response.next_index - response.first_index)
        done = any(item.get("type") == "done" for item in pending.actions[-1:])
        failed = [r for r in response.receipts if not r.ok]
        feedback = executed_feedback(response, self.budget.remaining_actions)
        finished = done or stop is not None or self.cp.done
        # When the loop goes on, this state reaches the disk with the next checkpoint
        # (normally the next batch's pending one): a pilot killed before that resends this
        # batch, the broker replays it, and it is counted once, as above.
        self._save(
            pending=None, next_index=response.next_index, frame=frame, frame_sequence=response.frame.sequence,
            pointer=response.frame.pointer,
            feedback=feedback, tool_use_id=pending.tool_use_id, turn_index=pending.turn_index + 1,
            post_action_visual_stable=response.post_action_visual_stable,
            done=finished,
            stop_reason=("done" if done else (str(stop) if stop else self.cp.stop_reason)),
            durable=finished or bool(failed),
        )
        self._summary_executed(pending, response)
        if failed:
            raise _Failure(FailureClass.ACTION_REJECTED,
                           f"the desktop refused input at action {failed[0].index}: {failed[0].error}")

    # --- finishing ----------------------------------------------------------------------

    async def _finish(self, failure: _Failure | None) -> int:
        self._state("checkpointing")
        drawing = self.cp.drawing
        cleanup: list[str] = []
        if self.cp.session_id is not None:
            # Each finishing step is recorded, so a pilot restarted after a crash here
            # neither saves twice nor touches a session it already released.
            if drawing is None and not self.cp.released:
                try:
                    saved = await self.broker.checkpoint(self.cp.session_id, f"checkpoint-{self.cp.session_id}")
                    data = await self.broker.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)
                    suffix = Path(saved.artifact.name).suffix or ".dwg"
                    drawing = self.trace.save_drawing(suffix, data, saved.artifact.sha256)
                    self._save(drawing=drawing)
                except BrokerError as error:
                    if failure is None:
                        failure = _Failure(FailureClass.ARTIFACT_UNAVAILABLE, f"drawing checkpoint failed: {error}")
            if self._frames_to_check and not self.cp.released:
                # Resumed after the loop had ended: the trace's frames still get checked.
                try:
                    await self._restore_frames()
                except BrokerError as error:
                    cleanup.append(f"frames: {error}")
            for name, fetch in (("events", self.broker.events), ("frame_events", self.broker.frame_events)):
                try:
                    value = await fetch()
                    path = self.paths.events if name == "events" else self.paths.frame_events
                    self.trace.json(path, value)
                except BrokerError as error:
                    cleanup.append(f"{name}: {error}")
            if not self.cp.released:
                try:
                    await self.broker.release(self.cp.session_id)
                    self._save(released=True)
                except BrokerError as error:
                    cleanup.append(f"release: {error}")
        for path, key in ((self.paths.events, "events"), (self.paths.frame_events, "frame_events")):
            if not path.exists():
                self.trace.json(path, {key: []})
        if failure is None and cleanup:
            failure = _Failure(FailureClass.CLEANUP_ERROR, "; ".join(cleanup))
        code = EXIT_OK if failure is None else EXIT_FAILED
        self._write_result(failure, drawing, code)
        self._state("finished")
        return code

    def _write_result(self, failure: _Failure | None, drawing: Any, code: int) -> None:
        a = self.assignment
        snapshot = self.budget.snapshot()
        ledger = snapshot.ledger
        self.trace.result(RolloutResult(
            rollout_id=a.rollout_id,
            attempt_id=a.attempt_id,
            task_id=a.task_id,
            task_provenance=dict(a.task_provenance),
            provider=a.model.provider,
            model=a.model.model,
            tool_mode=a.model.tool_mode,
            infrastructure_backend=a.infrastructure_backend,
            status="completed" if failure is None else "failed",
            failure_class=failure.failure if failure else None,
            failure_detail=failure.detail if failure else "",
            stop_reason=self.cp.stop_reason,
            turns=snapshot.turns,
            actions=snapshot.actions,
            invalid_turns=snapshot.lifetime_invalid_turns,
            model_responses=self.caller.counters.responses,
            usage=ledger.usage.model_dump(mode="json"),
            token_cost_usd=float(ledger.total_usd),
            wall_seconds=round(snapshot.elapsed_s, 3),
            handoff_seconds=self.handoff_seconds,
            drawing=drawing,
            attempts=snapshot.attempts,
            started_at=self.started,
            finished_at=utcnow(),
            exit_code=code,
        ))

    # --- records ------------------------------------------------------------------------

    def _on_response(self, turn: ModelTurn, cost: Any) -> None:
        self._pending_costs.append((turn, cost))

    def _flush_costs(self) -> None:
        for turn, cost in self._pending_costs:
            self.trace.model_turn({
                "turn_index": self.cp.turn_index, "attempt": self.budget.snapshot().attempts,
                "tool_use_id": turn.tool_use_id, "response_id": turn.response_id,
                "action_input": turn.action_input, "malformed": turn.malformed,
                "usage": turn.usage.model_dump(), "cost_usd": float(cost.total_usd) if cost else 0.0,
                "validation": None, "at": utcnow().isoformat(),
            })
        self._pending_costs.clear()

    def _record_turn(self, index: int, result: TurnResult, validated: Any) -> None:
        final = result.turn
        for turn, cost in self._pending_costs:
            is_final = turn is final
            self.trace.model_turn({
                "turn_index": index, "attempt": self.budget.snapshot().attempts,
                "tool_use_id": turn.tool_use_id, "response_id": turn.response_id,
                "action_input": turn.action_input, "malformed": turn.malformed,
                "text": turn.text, "stop_reason": turn.stop_reason,
                "usage": turn.usage.model_dump(), "cost_usd": float(cost.total_usd) if cost else 0.0,
                "observation": {"frame": result.observation.frame.model_dump(),
                                "feedback": result.observation.feedback,
                                "remaining_actions": result.observation.remaining_actions,
                                "pointer": (list(result.observation.pointer)
                                            if result.observation.pointer is not None else None)},
                "validation": (
                    None if not is_final else
                    {"valid": not isinstance(validated, BatchRejection),
                     "problems": validated.messages() if isinstance(validated, BatchRejection) else []}
                ),
                "retries": [r.model_dump(mode="json") for r in result.retries] if is_final else [],
                "at": utcnow().isoformat(),
            })
        self._pending_costs.clear()

    def _summary(self, index: int, turn: ModelTurn, *, valid: bool, actions: int) -> None:
        snapshot = self.budget.snapshot()
        self.trace.turn_summary({
            "turn_index": index, "tool_use_id": turn.tool_use_id, "valid": valid, "actions": actions,
            "next_index": self.cp.next_index, "cost_usd": float(snapshot.ledger.total_usd),
            "elapsed_s": round(snapshot.elapsed_s, 3), "post_action_visual_stable": None,
        })

    def _summary_executed(self, pending: PendingBatch, response: ActionsResponse) -> None:
        snapshot = self.budget.snapshot()
        self.trace.turn_summary({
            "turn_index": pending.turn_index, "tool_use_id": pending.tool_use_id, "valid": True,
            "actions": response.next_index - response.first_index, "next_index": response.next_index,
            "cost_usd": float(snapshot.ledger.total_usd), "elapsed_s": round(snapshot.elapsed_s, 3),
            "post_action_visual_stable": response.post_action_visual_stable, "replayed": response.replayed,
        })

    def _save(self, *, durable: bool = True, run_state: bool = True, **update: Any) -> None:
        """Update the checkpoint; write it now (``durable``) or with the next checkpoint."""
        update["budget"] = self.budget.snapshot()
        update["counters"] = self.caller.counters
        self.cp = self.cp.model_copy(update=update)
        if durable:
            self._write_checkpoint()
        else:
            self._unsaved = True
        if run_state:
            self._state(self._phase)

    def _write_checkpoint(self, *, compact: bool | None = None) -> None:
        """Make ``self.cp`` durable: journalled inside the model loop, else a full rewrite."""
        if compact is None:
            compact = self._phase != "running"
        self.cp = self.trace.checkpoint(self.cp, compact=compact)
        self._unsaved = False

    def _state(self, phase: str) -> None:
        """Rewrite run-state.json: at once on a phase change, else at most every second.

        It is a progress display for the controller, dashboard and operators; nothing
        resumes from it, so a turn need not pay for rewriting it.
        """
        now = time.monotonic()
        if phase == self._phase and now - self._state_written < RUN_STATE_INTERVAL_S:
            return
        self._phase = phase
        self._state_written = now
        snapshot = self.budget.snapshot()
        self.trace.run_state(RunState(
            rollout_id=self.assignment.rollout_id, attempt_id=self.assignment.attempt_id,
            phase=phase,
            pid=os.getpid(), attempts=snapshot.attempts, session_id=self.cp.session_id,
            turns=snapshot.turns, actions=snapshot.actions, next_index=self.cp.next_index,
            invalid_streak=snapshot.consecutive_invalid_turns, invalid_total=snapshot.lifetime_invalid_turns,
            cost_usd=float(snapshot.ledger.total_usd), elapsed_s=round(snapshot.elapsed_s, 3),
            counters=self.caller.counters, stop_reason=self.cp.stop_reason, updated_at=utcnow(),
        ))


async def run_pilot(rollout_dir: Path, environ: Mapping[str, str], *, host: PluginHost | None = None,
                    stop: StopRequest | None = None) -> int:
    """Run or resume the rollout in ``rollout_dir``; return the exit code (0 completed, 1 failed).

    With ``stop``, the pilot stops at the next turn boundary once it is set (see
    :mod:`autocad_bench.interrupt`) and records the rollout as ``interrupted``.
    """
    return await Pilot(rollout_dir, environ, host=host, stop=stop).run()


def main_sync(rollout_dir: Path) -> int:
    """The pilot as its own process: SIGINT/SIGTERM ask it to stop at a turn boundary."""
    with pilot_stop_on_signals(StopRequest()) as stop:
        return asyncio.run(run_pilot(rollout_dir, dict(os.environ), stop=stop))

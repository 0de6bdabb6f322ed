"""What the retry layer tells the model, the trace and the operator, word for word.

The counting itself is pinned in ``test_retry_accounting.py``; these tests pin the texts and
records built from it: the feedback a malformed response gets, the messages of the errors that
end a turn, a retry event's bounds, and the log record each retry leaves.
"""

from __future__ import annotations

import logging

import pytest
import stamina.instrumentation as instrumentation
from pydantic import ValidationError

from autocad_bench.providers.models import ModelTurn, ProviderErrorKind, ProviderRequestError, TokenUsage
from autocad_bench.retry import MalformedResponsesExhausted, ModelStopped, RetryEvent, RetryPolicy
from autocad_bench.retry.caller import malformed_feedback, native_malformed_feedback
from autocad_bench.retry.reporting import LOGGER, log_retry
from tests.core.test_retry_accounting import ScriptedSession, bad, caller, first_observation, ok


def silent(stop_reason: str | None = None, text: str = "") -> ModelTurn:
    """A response with no call and no stated problem."""
    return ModelTurn(tool_use_id="s", action_input=None, stop_reason=stop_reason, text=text,
                     usage=TokenUsage(input_tokens=1, output_tokens=1))


def test_feedback_to_a_response_without_a_call_says_so() -> None:
    feedback = malformed_feedback(first_observation(), silent()).feedback
    assert feedback == ("No action was executed: the response did not call computer_action. "
                        "Reply with exactly one computer_action call whose arguments follow its schema.")
    native = native_malformed_feedback(first_observation(), silent()).feedback
    assert native is not None and native.startswith("No action was executed: the response contained no action. ")


async def test_a_stop_without_a_stated_problem_quotes_the_models_text_or_says_no_detail() -> None:
    for turn, detail in ((silent("refusal", "I cannot help with that"), "I cannot help with that"),
                         (silent("refusal"), "no detail")):
        model, _ = caller()
        with pytest.raises(ModelStopped) as caught:
            await model.request_turn(ScriptedSession([turn]), first_observation())
        assert str(caught.value) == f"the model stopped the rollout (refusal): {detail}"


async def test_exhausted_malformed_responses_name_the_last_one() -> None:
    model, _ = caller(RetryPolicy(jitter=0, max_consecutive_malformed=2))
    with pytest.raises(MalformedResponsesExhausted) as caught:
        await model.request_turn(ScriptedSession([bad(0), bad(1, missing=True)]), first_observation())
    assert str(caught.value) == ("2 consecutive responses without a valid computer_action call (limit 2); "
                                 "last: no call")


async def test_a_retry_events_message_is_cut_at_500_characters() -> None:
    long = ProviderRequestError(ProviderErrorKind.SERVER_ERROR, "x" * 600, status=503)
    model, _ = caller()
    result = await model.request_turn(ScriptedSession([long, ok()]), first_observation())
    (event,) = result.retries
    assert event.message == "x" * 500


def test_a_retry_event_counts_from_one_and_never_waits_backwards() -> None:
    base = {"kind": ProviderErrorKind.TRANSIENT, "streak": 1, "lifetime": 1, "delay_s": 0.0, "slept_s": 0.0}
    event = RetryEvent(**base)
    assert (event.streak, event.lifetime, event.shrunk) == (1, 1, False)
    for field, value in (("streak", 0), ("lifetime", 0), ("delay_s", -0.5), ("slept_s", -0.5)):
        with pytest.raises(ValidationError):
            RetryEvent(**{**base, field: value})


async def test_only_a_shrink_retry_is_marked_shrunk() -> None:
    too_large = ProviderRequestError(ProviderErrorKind.REQUEST_TOO_LARGE, "HTTP 413", status=413)
    busy = ProviderRequestError(ProviderErrorKind.SERVER_ERROR, "HTTP 503", status=503)
    model, _ = caller()
    result = await model.request_turn(ScriptedSession([too_large, busy, ok()]), first_observation())
    assert [(e.kind, e.shrunk) for e in result.retries] == [(ProviderErrorKind.REQUEST_TOO_LARGE, True),
                                                            (ProviderErrorKind.SERVER_ERROR, False)]


def test_what_was_billed_cannot_be_changed_afterwards() -> None:
    import dataclasses

    from autocad_bench.retry import RetryCounters
    from autocad_bench.retry.caller import Billed

    billed = Billed(usage=TokenUsage(), responses=(), costs=(), retries=(), counters=RetryCounters())
    with pytest.raises(dataclasses.FrozenInstanceError):
        billed.usage = TokenUsage(input_tokens=1)  # type: ignore[misc]


def test_other_retries_are_named_as_stamina_names_them(caplog: pytest.LogCaptureFixture) -> None:
    details = instrumentation.RetryDetails(name="autocad_bench.broker.post", args=(), kwargs={}, retry_num=1,
                                           wait_for=0.5, waited_so_far=0.0, caused_by=ConnectionResetError())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log_retry(details)
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.__dict__["retry_what"] == "autocad_bench.broker.post"
    assert record.__dict__["retry_attempt"] == 2


def test_a_broken_stderr_never_takes_the_controller_down(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocad_bench.retry.reporting import CurrentStderrHandler

    class Broken:
        def write(self, text: str) -> int:
            raise OSError("stderr is gone")

        def flush(self) -> None:
            raise OSError("stderr is gone")

    monkeypatch.setattr(logging, "raiseExceptions", False)  # as in production: handleError stays quiet
    monkeypatch.setattr("sys.stderr", Broken())
    record = logging.LogRecord(LOGGER, logging.WARNING, __file__, 1, "retrying", None, None)
    CurrentStderrHandler().emit(record)  # must not raise


def _details(cause: Exception, retry_num: int = 2) -> instrumentation.RetryDetails:
    return instrumentation.RetryDetails(name="autocad_bench.model_request.acme/m1", args=(), kwargs={},
                                        retry_num=retry_num, wait_for=1.5, waited_so_far=3.25, caused_by=cause)


@pytest.mark.parametrize(("cause", "reason"), [
    (ProviderRequestError(ProviderErrorKind.SERVER_ERROR, "acme: HTTP 503 from /v1/chat"),
     "acme: HTTP 503 from /v1/chat"),
    (TimeoutError("read timed out"), "TimeoutError: read timed out"),
    (TimeoutError(), "TimeoutError"),
])
def test_a_retry_leaves_one_record_with_what_why_which_attempt_and_how_long(
        caplog: pytest.LogCaptureFixture, cause: Exception, reason: str) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log_retry(_details(cause))
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.__dict__["retry_what"] == "model request (acme/m1)"
    assert record.__dict__["retry_reason"] == reason
    assert record.__dict__["retry_attempt"] == 3
    assert (record.__dict__["retry_wait_s"], record.__dict__["retry_waited_s"]) == (1.5, 3.25)
    described = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
    assert record.getMessage() == (f"retrying autocad_bench.model_request.acme/m1 (attempt 3) in 1.5s after "
                                   f"{described}; waited 3.2s so far")

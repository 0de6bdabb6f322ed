"""The vision judge: an OpenAI model compares the gold render with the candidate render.

Its verdict is a SEPARATE score (``vision-judge/score.json``) and is never merged into the
deterministic score. One :class:`VisionJudge` call sends one Responses API request through the
official SDK (``max_retries=0``: no hidden SDK retries) with a strict, forced function tool
``judge_verdict`` (score 0..1, pass, rationale) and both images as PNG data URLs.

Retries follow the shared model-request contract of :mod:`autocad_bench.retry`: failures are
classified into :class:`~autocad_bench.providers.models.ProviderErrorKind`; 429 and 5xx are
retried with the policy's capped exponential backoff (a longer 429 ``retry-after`` is
honoured), 408/409/connection/timeout failures at most ``max_consecutive_transient`` times in
a row, responses without a valid verdict at most ``max_consecutive_malformed`` times in a
row, anything else fails at once. Because an evaluation must end, the total time spent
waiting is additionally bounded by ``JudgeSettings.max_total_wait_s``.

Files written into ``<evaluation>/vision-judge/`` (atomically, rewritten as attempts happen):

* ``request.json``: the request body WITHOUT api key or headers; images replaced by
  ``{"sha256", "path", "bytes"}`` references;
* ``responses.json``: every attempt, with the raw response body or the classified error;
* ``score.json``: the verdict (only when one was obtained).

The api key is passed in by the caller (from the environment), never written anywhere;
every written text is scrubbed of it as defence in depth.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import json
import math
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field

from autocad_bench.errors import missing_extra_message
from autocad_bench.models import StrictModel
from autocad_bench.providers.models import ProviderErrorKind
from autocad_bench.retry import RetryCounters, RetryPolicy, retry_delay
from autocad_bench.storage import atomic_write_bytes

JUDGE_TOOL_NAME = "judge_verdict"
JUDGE_DIR = "vision-judge"
DEFAULT_INSTRUCTIONS = (
    "You grade CAD drawings. The first image is the gold (correct) drawing, the second the "
    "candidate produced by an agent, both rendered the same way into the same view. Judge "
    "whether the candidate reproduces the gold's geometry: shapes, sizes, proportions, "
    "positions relative to each other, holes, text and dimensions. Ignore rendering "
    "artefacts and line weights. Call judge_verdict exactly once."
)
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "similarity of the candidate to the gold, 0 (nothing right) to 1 (equivalent)",
        },
        "pass": {"type": "boolean", "description": "true when the candidate accomplishes the drawing task"},
        "rationale": {"type": "string", "description": "one short paragraph explaining the grade"},
    },
    "required": ["score", "pass", "rationale"],
    "additionalProperties": False,
}
_MESSAGE_LIMIT = 500
_REDACTED = "[redacted]"


class JudgeError(Exception):
    """The judge could not produce a verdict (fatal error, exhausted retries, wait budget)."""


class JudgeSettings(StrictModel):
    """Which model judges, where, and how long it may take."""

    model: str = Field(default="gpt-5.1", min_length=1)
    base_url: str | None = None
    instructions: str = DEFAULT_INSTRUCTIONS
    timeout_s: float = Field(default=120.0, gt=0)
    max_output_tokens: int = Field(default=8192, ge=64)
    """Generous, so that a reasoning model does not run out before it calls the tool."""
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    """Sent as ``reasoning={"effort": ...}`` only when set (non-reasoning models reject it)."""
    image_detail: Literal["auto", "low", "high"] = "high"
    policy: RetryPolicy = Field(default_factory=RetryPolicy)
    max_total_wait_s: float = Field(default=1800.0, gt=0)
    """Upper bound on the summed backoff of one judgement (the evaluation must finish)."""


class JudgeVerdict(StrictModel):
    """The validated arguments of a ``judge_verdict`` call."""

    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    rationale: str


class JudgeScore(StrictModel):
    """``vision-judge/score.json``: the judge's verdict, separate from the deterministic score."""

    kind: Literal["vision-judge"] = "vision-judge"
    model: str
    score: float
    passed: bool
    rationale: str
    response_id: str | None = None
    attempts: int
    usage: dict[str, int] = Field(default_factory=dict)
    counters: RetryCounters
    gold_image_sha256: str
    candidate_image_sha256: str


class JudgeRunner(Protocol):
    """What :func:`autocad_bench_evaluator.evaluate.evaluate` needs from a judge."""

    def run(
        self, out_dir: Path, *, gold_png: bytes, candidate_png: bytes, task_prompt: str | None = None
    ) -> JudgeScore:
        """Judge two renders, writing the judge files under ``out_dir/vision-judge``;
        raises :class:`JudgeError` on failure."""
        ...


Sleep = Callable[[float], None]


class _Classified(Exception):
    def __init__(self, kind: ProviderErrorKind, message: str, status: int | None, retry_after_s: float | None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s


def _openai() -> Any:
    """The ``openai`` module, or :class:`JudgeError` saying which extra brings it."""
    try:
        import openai
    except ImportError:
        raise JudgeError(missing_extra_message("the vision judge's SDK (openai)", "judge")) from None
    return openai


def classify_openai_error(error: Exception) -> tuple[ProviderErrorKind, int | None, float | None]:
    """(kind, HTTP status, retry-after seconds) of an exception raised by the openai SDK."""
    import openai

    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        retry_after = _retry_after(error.response.headers)
        if status == 429:
            return ProviderErrorKind.RATE_LIMITED, status, retry_after
        if status >= 500:
            return ProviderErrorKind.SERVER_ERROR, status, retry_after
        if status in (408, 409):
            return ProviderErrorKind.TRANSIENT, status, retry_after
        if status == 413:
            return ProviderErrorKind.REQUEST_TOO_LARGE, status, None
        return ProviderErrorKind.FATAL, status, None
    if isinstance(error, openai.APIConnectionError):  # includes APITimeoutError
        return ProviderErrorKind.TRANSIENT, None, None
    return ProviderErrorKind.FATAL, None, None


def _retry_after(headers: Any) -> float | None:
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms) / 1000.0
            return value if math.isfinite(value) else None
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


class VisionJudge:
    """Runs the vision judge against the OpenAI Responses API (or a compatible ``base_url``).

    ``api_key`` comes from the caller's environment; ``sleep`` and ``rng`` (backoff jitter)
    are injectable for tests. One instance may judge several evaluations sequentially.
    """

    def __init__(
        self,
        settings: JudgeSettings,
        api_key: str,
        *,
        sleep: Sleep = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not api_key:
            raise JudgeError("the vision judge needs an API key (OPENAI_API_KEY is empty)")
        self.settings = settings
        self._api_key = api_key
        self._sleep = sleep
        self._rng = rng or random.Random()

    # request -----------------------------------------------------------------------------

    def build_body(self, gold_png: bytes, candidate_png: bytes, task_prompt: str | None) -> dict[str, Any]:
        """The ``responses.create`` keyword arguments (images inlined as data URLs)."""
        s = self.settings
        text = "Image 1: gold drawing. Image 2: candidate drawing."
        if task_prompt:
            text = f"The drawing task was:\n{task_prompt.strip()}\n\n{text}"
        body: dict[str, Any] = {
            "model": s.model,
            "instructions": s.instructions,
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": text},
                        {"type": "input_image", "image_url": _data_url(gold_png), "detail": s.image_detail},
                        {"type": "input_image", "image_url": _data_url(candidate_png), "detail": s.image_detail},
                    ],
                }
            ],
            "tools": [
                {
                    "type": "function",
                    "name": JUDGE_TOOL_NAME,
                    "description": "Record the grade of the candidate drawing.",
                    "parameters": VERDICT_SCHEMA,
                    "strict": True,
                }
            ],
            "tool_choice": {"type": "function", "name": JUDGE_TOOL_NAME},
            "parallel_tool_calls": False,
            "max_output_tokens": s.max_output_tokens,
            "store": False,
        }
        if s.reasoning_effort is not None:
            body["reasoning"] = {"effort": s.reasoning_effort}
        return body

    def _client(self) -> Any:
        openai = _openai()
        return openai.OpenAI(
            api_key=self._api_key,
            base_url=self.settings.base_url,
            max_retries=0,
            timeout=self.settings.timeout_s,
        )

    # files -------------------------------------------------------------------------------

    def _write(self, path: Path, value: Any) -> None:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
        atomic_write_bytes(path, self._scrub(text).encode("utf-8"), durable=False)

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, _REDACTED) if self._api_key else text

    # run ---------------------------------------------------------------------------------

    def run(
        self, out_dir: Path, *, gold_png: bytes, candidate_png: bytes, task_prompt: str | None = None
    ) -> JudgeScore:
        """Judge ``candidate_png`` against ``gold_png``; see the module docstring.

        ``out_dir`` is the evaluation directory; files go to ``out_dir/vision-judge``.
        Raises :class:`JudgeError` when no verdict can be obtained (``responses.json``
        then records every attempt), or at once when the judge's SDK is not installed.
        """
        openai = _openai()

        directory = Path(out_dir) / JUDGE_DIR
        directory.mkdir(parents=True, exist_ok=True)
        body = self.build_body(gold_png, candidate_png, task_prompt)
        gold_sha = hashlib.sha256(gold_png).hexdigest()
        cand_sha = hashlib.sha256(candidate_png).hexdigest()
        record = json.loads(json.dumps(body))
        images = record["input"][0]["content"]
        images[1]["image_url"] = {"sha256": gold_sha, "path": "gold-render.png", "bytes": len(gold_png)}
        images[2]["image_url"] = {"sha256": cand_sha, "path": "render.png", "bytes": len(candidate_png)}
        self._write(
            directory / "request.json",
            {"endpoint": "POST /responses", "base_url": self.settings.base_url, "body": record},
        )
        policy = self.settings.policy
        counters = RetryCounters()
        attempts: list[dict[str, Any]] = []
        waited = 0.0
        client = self._client()
        try:
            while True:
                attempt: dict[str, Any] = {"attempt": len(attempts) + 1}
                attempts.append(attempt)
                try:
                    response = client.responses.create(**body)
                except openai.OpenAIError as error:
                    kind, status, retry_after = classify_openai_error(error)
                    counters = counters.after_error(kind)
                    streak = counters.for_kind(kind).consecutive
                    attempt.update(
                        {
                            "outcome": "error",
                            "kind": kind.value,
                            "status": status,
                            "message": str(error)[:_MESSAGE_LIMIT],
                            "retry_after_s": retry_after,
                        }
                    )
                    if kind is ProviderErrorKind.TRANSIENT and streak >= policy.max_consecutive_transient:
                        raise JudgeError(
                            f"vision judge: {streak} consecutive transient failures "
                            f"(limit {policy.max_consecutive_transient}); last: {self._scrub(str(error))[:200]}"
                        ) from None
                    if kind not in (
                        ProviderErrorKind.RATE_LIMITED,
                        ProviderErrorKind.SERVER_ERROR,
                        ProviderErrorKind.TRANSIENT,
                    ):
                        raise JudgeError(
                            f"vision judge request failed ({kind.value}, HTTP {status}): "
                            f"{self._scrub(str(error))[:200]}"
                        ) from None
                    delay = retry_delay(policy, kind, streak, retry_after, self._rng)
                    if waited + delay > self.settings.max_total_wait_s:
                        raise JudgeError(
                            f"vision judge: retry wait budget of {self.settings.max_total_wait_s:g} s "
                            f"exhausted ({kind.value}, HTTP {status})"
                        ) from None
                    attempt["delay_s"] = round(delay, 3)
                    self._write(directory / "responses.json", {"attempts": attempts})
                    self._sleep(delay)
                    waited += delay
                    counters = counters.after_backoff(delay)
                    continue
                raw = response.model_dump(mode="json", exclude_none=True)
                verdict, problem = _parse_verdict(response)
                counters = counters.after_response(well_formed=verdict is not None)
                attempt.update({"outcome": "response", "status": 200, "response": raw})
                if verdict is None:
                    attempt["malformed"] = problem
                    streak = counters.malformed.consecutive
                    if streak >= policy.max_consecutive_malformed:
                        raise JudgeError(
                            f"vision judge: {streak} consecutive responses without a valid "
                            f"{JUDGE_TOOL_NAME} call; last: {problem}"
                        ) from None
                    self._write(directory / "responses.json", {"attempts": attempts})
                    continue
                self._write(directory / "responses.json", {"attempts": attempts})
                score = JudgeScore(
                    model=self.settings.model,
                    score=round(verdict.score, 6),
                    passed=verdict.passed,
                    rationale=verdict.rationale,
                    response_id=getattr(response, "id", None),
                    attempts=len(attempts),
                    usage=_usage(response),
                    counters=counters,
                    gold_image_sha256=gold_sha,
                    candidate_image_sha256=cand_sha,
                )
                self._write(directory / "score.json", score.model_dump(mode="json"))
                return score
        except JudgeError:
            self._write(directory / "responses.json", {"attempts": attempts})
            raise
        finally:
            client.close()


class MissingCredentialJudge:
    """A configured judge whose credential is absent: every run fails, so the evaluation is
    marked failed instead of silently skipping the judge."""

    def __init__(self, env_name: str) -> None:
        self.env_name = env_name

    def run(
        self, out_dir: Path, *, gold_png: bytes, candidate_png: bytes, task_prompt: str | None = None
    ) -> JudgeScore:
        """Always raises :class:`JudgeError` naming the missing variable."""
        del out_dir, gold_png, candidate_png, task_prompt
        raise JudgeError(f"vision judge configured but {self.env_name} is not set")


def judge_from_environment(
    model: str,
    environ: Mapping[str, str],
    *,
    base_url: str | None = None,
    env_name: str = "OPENAI_API_KEY",
) -> JudgeRunner:
    """The judge for ``model`` with its key read from ``environ[env_name]`` (never argv).

    Returns a :class:`MissingCredentialJudge` when the variable is unset or empty.
    """
    key = environ.get(env_name, "")
    if not key:
        return MissingCredentialJudge(env_name)
    return VisionJudge(JudgeSettings(model=model, base_url=base_url), key)


def _parse_verdict(response: Any) -> tuple[JudgeVerdict | None, str]:
    calls = [
        item for item in (getattr(response, "output", None) or []) if getattr(item, "type", None) == "function_call"
    ]
    if not calls:
        return None, f"the response did not call {JUDGE_TOOL_NAME}"
    call = calls[0]
    if getattr(call, "name", None) != JUDGE_TOOL_NAME:
        return None, f"the response called {getattr(call, 'name', None)!r}, not {JUDGE_TOOL_NAME}"
    try:
        args = json.loads(getattr(call, "arguments", "") or "")
    except json.JSONDecodeError as error:
        return None, f"{JUDGE_TOOL_NAME} arguments are not JSON: {error.msg}"
    if not isinstance(args, dict) or set(args) != {"score", "pass", "rationale"}:
        return None, f"{JUDGE_TOOL_NAME} arguments must have exactly score, pass, rationale"
    score, passed, rationale = args["score"], args["pass"], args["rationale"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= float(score) <= 1.0:
        return None, f"{JUDGE_TOOL_NAME}.score must be a number in [0, 1]"
    if not isinstance(passed, bool) or not isinstance(rationale, str):
        return None, f"{JUDGE_TOOL_NAME}.pass must be a boolean and rationale a string"
    return JudgeVerdict(score=float(score), passed=passed, rationale=rationale), ""


def _usage(response: Any) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    out: dict[str, int] = {}
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        value = getattr(usage, name, None)
        if isinstance(value, int):
            out[name] = value
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
    if isinstance(cached, int):
        out["cached_input_tokens"] = cached
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", None)
    if isinstance(reasoning, int):
        out["reasoning_tokens"] = reasoning
    return out

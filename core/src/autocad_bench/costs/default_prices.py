"""The shipped default price table (plain data; validated by ``pricing.default_pricing``).

Rates are USD per million tokens, list prices of each provider's standard (not batch, not
priority) tier, compiled on the ``as_of`` date from the providers' public pricing pages.
Prices change: operators pin a contract in the batch configuration or override entries
with ``AUTOCAD_BENCH_PRICING_JSON``. Conventions:

* ``cache_write`` is Anthropic's five-minute cache write (1.25x input). ``TokenUsage`` does
  not distinguish one-hour writes (2x input); they would be under-priced here.
* Providers with no cache-write surcharge (OpenAI, Fireworks) list their input rate, and
  models without prompt caching list their input rate as ``cached_input``.
* Entries marked "unverified" had no published rate on the ``as_of`` date; they are priced
  at the closest published sibling, cached input at full input rate (the cautious choice).

Infrastructure rates are on-demand USD per hour; AWS entries are approximate us-east-1
Windows (license included) rates, the image AutoCAD runs on. ``local-xvfb`` runs on the
operator's own machine and has no marginal cloud cost.
"""

from __future__ import annotations

from typing import Any

_OPENAI_LONG_CONTEXT: dict[str, Any] = {
    # OpenAI bills the whole request at 2x input / 1.5x output above 272K input tokens.
    "long_context_threshold_tokens": 272_000,
    "long_context_input_multiplier": 2,
    "long_context_output_multiplier": 1.5,
}
_ANTHROPIC_LONG_CONTEXT: dict[str, Any] = {
    # 1M-context Sonnet 4.x / Opus 4.6: requests above 200K input tokens pay 2x / 1.5x.
    "long_context_threshold_tokens": 200_000,
    "long_context_input_multiplier": 2,
    "long_context_output_multiplier": 1.5,
}


def _openai(inp: float, cached: float, out: float, **extra: Any) -> dict[str, Any]:
    return {"input": inp, "cached_input": cached, "cache_write": inp, "output": out, **extra}


def _anthropic(inp: float, read: float, write: float, out: float, **extra: Any) -> dict[str, Any]:
    return {"input": inp, "cached_input": read, "cache_write": write, "output": out, **extra}


_OPUS_4_5 = _anthropic(5, 0.50, 6.25, 25)
_SONNET_4_5 = _anthropic(3, 0.30, 3.75, 15, **_ANTHROPIC_LONG_CONTEXT)
_HAIKU_4_5 = _anthropic(1, 0.10, 1.25, 5)
_OPUS_4_1 = _anthropic(15, 1.50, 18.75, 75)
_KIMI_K2P6_FAST = _openai(2.00, 0.30, 8.00)

DEFAULT_PRICING: dict[str, Any] = {
    "as_of": "2026-11-30",
    "models": {
        # OpenAI (Responses API)
        "gpt-5": _openai(1.25, 0.125, 10),
        "gpt-5-mini": _openai(0.25, 0.025, 2),
        "gpt-5-nano": _openai(0.05, 0.005, 0.40),
        "gpt-5-pro": _openai(15, 15, 120),
        "gpt-5.1": _openai(1.25, 0.125, 10),
        "gpt-5.2": _openai(1.75, 0.175, 14),
        "gpt-5.4": _openai(2.50, 0.25, 15, **_OPENAI_LONG_CONTEXT),
        "gpt-5.5": _openai(5, 0.50, 30, **_OPENAI_LONG_CONTEXT),
        "gpt-5.5-pro": _openai(30, 30, 180, **_OPENAI_LONG_CONTEXT),
        # OpenAI's computer-use model (native tool mode); no prompt-caching discount listed.
        "computer-use-preview": _openai(3, 3, 12),
        "computer-use-preview-2025-03-11": _openai(3, 3, 12),
        # Anthropic (Messages API)
        "claude-fable-5-1": _anthropic(10, 0.25, 12.50, 50),
        "claude-fable-5": _anthropic(10, 1, 12.50, 50),
        "claude-opus-5-5": _anthropic(4, 0.20, 5, 20),
        "claude-opus-5": _anthropic(5, 0.50, 6.25, 25),
        "claude-opus-4-8": _OPUS_4_5,
        "claude-opus-4-7": _OPUS_4_5,
        "claude-opus-4-6": {**_OPUS_4_5, **_ANTHROPIC_LONG_CONTEXT},
        "claude-opus-4-5": _OPUS_4_5,
        "claude-opus-4-5-20251101": _OPUS_4_5,
        "claude-opus-4-1": _OPUS_4_1,
        "claude-opus-4-1-20250805": _OPUS_4_1,
        "claude-sonnet-5-5": _anthropic(2, 0.10, 2.50, 10),
        "claude-sonnet-5": _anthropic(2, 0.20, 2.50, 10),
        "claude-sonnet-4-6": _SONNET_4_5,
        "claude-sonnet-4-5": _SONNET_4_5,
        "claude-sonnet-4-5-20250929": _SONNET_4_5,
        "claude-haiku-4-5": _HAIKU_4_5,
        "claude-haiku-4-5-20251001": _HAIKU_4_5,
        # Fireworks (Chat Completions); Fast/Turbo routers are the premium tier.
        "accounts/fireworks/models/kimi-k2p6": _openai(0.95, 0.16, 4.00),
        "accounts/fireworks/routers/kimi-k2p6-fast": _KIMI_K2P6_FAST,
        "accounts/fireworks/routers/kimi-k2p6-turbo": _KIMI_K2P6_FAST,
        "accounts/fireworks/models/kimi-k2p5": _openai(0.60, 0.10, 3.00),
        # AWS Mantle (unverified: priced like Fireworks Kimi K2.5, cached input at full rate)
        "moonshotai.kimi-k2.5": _openai(0.60, 0.60, 3.00),
    },
    "infrastructure_hourly_usd": {
        "local-xvfb": 0.0,
        "m6i.xlarge": 0.376,
        "m6i.2xlarge": 0.752,
        "g4dn.xlarge": 0.71,
        "g4dn.2xlarge": 1.12,
        "g5.xlarge": 1.19,
        "g5.2xlarge": 1.58,
    },
}

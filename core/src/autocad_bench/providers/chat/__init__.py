"""The append-only Chat Completions machinery shared by the OpenAI-compatible providers.

Fireworks and AWS Mantle ship no copy of their own; each passes its OpenAI SDK client
and settings in. Nothing here imports an SDK.

* :mod:`.history`: the model-visible conversation (append-only, byte-bounded, compacted
  to a compaction summary, resumable) and the checksum-verified image store;
* :mod:`.wire`: Chat Completions rendering, response parsing, token usage and the
  classification of HTTP errors and SDK exceptions;
* :mod:`.session`: the turn protocol over the history (:class:`~.session.HistorySession`),
  per-response telemetry and the Chat Completions session.
"""

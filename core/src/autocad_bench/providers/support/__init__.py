"""SDK-independent helpers shared by provider distributions.

Everything here imports only the standard library, pydantic and core, so core stays
importable without any provider SDK: SDK exceptions and responses are read by duck typing.

* :mod:`.text`: one-line clipping of messages and summaries;
* :mod:`.errors`: HTTP error classification (status codes, ``retry-after`` headers,
  OpenAI-compatible SDK exceptions);
* :mod:`.images`: checksum-verified image loading and the ``data:`` URL cache;
* :mod:`.responses`: the Responses API pieces shared by the ``openai`` and ``openrouter``
  providers (instructions, cache key, output and usage reading, the request itself);
* :mod:`.catalog`: grouping of model specs for catalog checks.
"""

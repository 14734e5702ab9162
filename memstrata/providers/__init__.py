"""Models memstrata calls, each behind a one-method seam: embedders
(:mod:`.embedders`, ``Embedder.embed``), chat LLMs (:mod:`.llm`, ``LLM.complete``; the
local llama.cpp server in :mod:`.local`), tolerant structured output
(:mod:`.structured`), the shared HTTP retry policy (:mod:`.http`) and the per-user
metering of LLM calls (:mod:`.metered`)."""

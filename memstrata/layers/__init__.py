"""The memory layers, bottom-up.

* :mod:`~memstrata.layers.working` — **L1**, working memory: trim a message list to a
  token budget without splitting a tool call from its results.
* :mod:`~memstrata.layers.episodic` — **L2**, episodic memory: progressive session
  summaries, the session life cycle (idle archiving, resume).
* :mod:`~memstrata.layers.semantic` — **L3**, semantic memory: extraction, credibility,
  dedup/conflict decisions, the item writer, forgetting, the core profile.
* :mod:`~memstrata.layers.context` — context assembly over all of them under a token
  budget with per-layer quotas.

Each is pure logic over values where it can be, with a thin shell over the store seams.
"""

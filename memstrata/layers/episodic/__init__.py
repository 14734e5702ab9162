"""L2, episodic memory: what happened in each session.

* :mod:`~.summary` — progressive structured summaries: the
  :class:`Summariser` seam, the offline :class:`ExtractiveSummariser`, incremental planning;
* :mod:`~.llm` — :class:`LLMSummariser`, the same seam with a metered LLM behind it;
* :mod:`~.sessions` — :class:`SessionManager`: appends with optimistic locking, a summary
  step every N messages, idle archiving and resume over any session store.

Raw turns themselves are indexed for retrieval as the episodic layer of the search
index (:mod:`memstrata.retrieval.indexer`).
"""

from __future__ import annotations

from .sessions import DEFAULT_IDLE, Resume, SessionManager
from .summary import (DEFAULT_EVERY_N, ExtractiveSummariser, IncrementalPlan, Summariser,
                      plan_incremental, update_summary)

__all__ = ["SessionManager", "Resume", "DEFAULT_IDLE", "Summariser", "ExtractiveSummariser",
           "IncrementalPlan", "plan_incremental", "update_summary", "DEFAULT_EVERY_N"]

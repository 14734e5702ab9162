"""An LLM behind the L2 :class:`~.summary.Summariser` seam."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...prompts import SUMMARY_SCHEMA, first_summary_prompt, merged_summary_prompt
from ...providers.metered import MeteredLLM
from ...types import PARTS, Message, Scope, StructuredSummary
from .summary import ExtractiveSummariser

__all__ = ["LLMSummariser"]

log = logging.getLogger("memstrata.summary")


@dataclass(frozen=True, slots=True)
class LLMSummariser:
    """The first and merged summary prompts, each part clipped to ``max_chars``, the call
    metered to the session's user (``scope``). Parts the LLM leaves empty — or the whole
    summary, when the call fails, the budget is spent or no scope is given — come from
    the extractive summariser."""

    llm: MeteredLLM
    max_chars: int = 200
    fallback: ExtractiveSummariser = field(default_factory=ExtractiveSummariser)

    def summarise(self, previous: StructuredSummary | None,
                  new_messages: Sequence[Message | Mapping[str, Any]], *,
                  scope: Scope | None = None) -> StructuredSummary:
        base = self.fallback.summarise(previous, new_messages)
        if scope is None:
            log.warning("LLM summary asked for without a user scope: extractive summary instead")
            return base
        msgs = [m if isinstance(m, Message) else Message.from_dict(m, index=i)
                for i, m in enumerate(new_messages)]
        prompt = (first_summary_prompt(msgs, max_chars=self.max_chars)
                  if previous is None or previous.is_empty
                  else merged_summary_prompt(previous, msgs, max_chars=self.max_chars))
        done = self.llm.call(scope, "summary", prompt, SUMMARY_SCHEMA)
        got = done.parsed.first if done is not None else None
        if not got:
            return base
        parts = {p: str(got.get(p) or "").strip() or getattr(base, p) for p in PARTS}
        return StructuredSummary.clipped(max_chars=self.max_chars, version=base.version, **parts)

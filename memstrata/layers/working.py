"""L1 working memory: trim a chat message list to what fits, never breaking tool calls.

Pure functions over OpenAI-format messages (dicts or :class:`~memstrata.types.Message`);
the output is always a list of OpenAI-format dicts that the OpenAI and Anthropic chat
APIs accept.

How it works:

1. **Group** (:func:`group_messages`). A system message, a user message and an
   assistant message without tool calls are each one group. An assistant message with
   ``tool_calls`` and the tool results that follow it are one group that is kept or
   dropped whole.
2. **Repair or reject** malformed tool-call sequences, per ``policy``:

   - ``"repair"`` (default): a tool result that does not answer a call of the assistant
     message right before its run of results (an *orphan*: no call, a call further
     back, or a second answer to the same call) is dropped; a call that gets no result
     is stripped from its assistant message, and an assistant message left with
     neither calls nor text is dropped. Every repair is listed in the report.
   - ``"strict"``: the first problem raises :class:`ToolCallSequenceError` naming the
     message index and the ``tool_call_id``.

3. **Select** groups newest-first until the budget or the window is used up, keeping
   every system message; the output keeps the input order. Selection stops at the
   first group that does not fit, so the kept history has no holes.

Strategies: ``"budget"`` (token budget only), ``"window"`` (the last N turns, where a
turn starts at a user message; default 6, optionally also within a budget) and
``"summary+window"`` (the L2 summary as a system message after the leading system
messages, then the window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import BudgetError, ToolCallSequenceError, ValidationError, shown
from ..tokens import REPLY_PRIMING, Tokenizer, count_message
from ..types import Message, Role

__all__ = [
    "Group",
    "POLICIES",
    "Dropped",
    "Grouping",
    "TrimReport",
    "TrimResult",
    "group_messages",
    "trim",
    "DEFAULT_WINDOW",
]

DEFAULT_WINDOW = 6  # turns: enough for a follow-up, cheap in tokens

Strategy = Literal["budget", "window", "summary+window"]
Policy = Literal["repair", "strict"]
POLICIES: tuple[str, ...] = ("repair", "strict")
MessageLike = Message | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Group:
    """Messages that are kept or dropped together.

    ``kind`` is ``system``, ``user``, ``assistant`` or ``tool_calls``; ``positions``
    index :attr:`Grouping.messages`; ``sources`` are the indices in the caller's list.
    """

    kind: str
    positions: tuple[int, ...]
    sources: tuple[int, ...]
    tokens: int


@dataclass(frozen=True, slots=True)
class Dropped:
    """Something left out, with why.

    ``reason`` is one of ``orphan_tool_result``, ``unanswered_tool_call`` (calls
    stripped from a message, or the message dropped), ``outside_window``,
    ``over_budget`` or ``summary_over_budget``. ``sources`` are input indices.
    """

    reason: str
    sources: tuple[int, ...]
    detail: str
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Grouping:
    """The repaired messages (OpenAI dicts), their groups, and what repair removed."""

    messages: tuple[dict[str, Any], ...]
    groups: tuple[Group, ...]
    repairs: tuple[Dropped, ...]


@dataclass(frozen=True, slots=True)
class TrimReport:
    """What :func:`trim` kept and dropped.

    ``tokens`` counts the whole output as sent (messages plus reply priming);
    ``dropped`` lists repairs first, then groups left out by the window or the budget.
    """

    strategy: str
    budget: int | None
    tokens: int
    system_tokens: int
    summary_tokens: int
    groups_kept: int
    groups_dropped: int
    dropped: tuple[Dropped, ...]


@dataclass(frozen=True, slots=True)
class TrimResult:
    """The messages to send and the report on how they were chosen."""

    messages: list[dict[str, Any]]
    report: TrimReport


def _normalise(messages: Sequence[MessageLike]) -> list[dict[str, Any]]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ValidationError("messages must be a list of OpenAI-format dicts or Message objects")
    return [Message.from_dict(m, index=i).to_openai() for i, m in enumerate(messages)]


def _strict_error(index: int, problem: str) -> ToolCallSequenceError:
    return ToolCallSequenceError(
        f"message {index}: {problem}. Every assistant tool call needs one tool result right "
        "after it, and every tool result must answer such a call; fix the list or use "
        "policy='repair' to drop and strip the offending messages")


_Kept = tuple[int, dict[str, Any], str, int]  # (source, message, kind, group no)


def _tool_call_run(msgs: list[dict[str, Any]], i: int, policy: Policy, repairs: list[Dropped],
                   group_no: int) -> tuple[list[_Kept], int]:
    """The group of the assistant message ``msgs[i]`` that has tool calls: its answered
    calls and their results (orphans dropped, unanswered calls stripped, each repair
    listed in ``repairs``). Returns the kept messages and the index after the run of
    tool results."""
    call_ids: list[str] = []
    msg = msgs[i]
    for call in msg["tool_calls"]:
        if call["id"] in call_ids:
            if policy == "strict":
                raise _strict_error(i, f"tool_call_id {call['id']!r} appears twice")
        call_ids.append(call["id"])
    answered: dict[str, tuple[int, dict[str, Any]]] = {}
    j = i + 1
    while j < len(msgs) and msgs[j]["role"] == Role.TOOL.value:
        call_id = msgs[j]["tool_call_id"]
        if call_id in call_ids and call_id not in answered:
            answered[call_id] = (j, msgs[j])
        elif policy == "strict":
            raise _strict_error(j, f"tool result for tool_call_id {call_id!r} answers no "
                                   f"open call of message {i}")
        else:
            repairs.append(Dropped("orphan_tool_result", (j,),
                                   f"tool result {call_id!r} answers no open call of message {i}"))
        j += 1
    seen: set[str] = set()
    calls = []
    for call in msg["tool_calls"]:
        if call["id"] in answered and call["id"] not in seen:
            calls.append(call)
            seen.add(call["id"])
        elif policy == "strict":
            raise _strict_error(i, f"tool call {call['id']!r} has no tool result after it")
        else:
            repairs.append(Dropped("unanswered_tool_call", (i,),
                                   f"tool call {call['id']!r} stripped: no result follows it"))
    kept: list[_Kept] = []
    if calls:
        kept.append((i, {**msg, "tool_calls": calls}, "tool_calls", group_no))
        # results stay in input order; the APIs accept any order within the run
        kept.extend((src, res, "tool_calls", group_no)
                    for src, res in sorted(answered[c["id"]] for c in calls))
    elif msg.get("content") and msg["content"].strip():
        plain = {k: v for k, v in msg.items() if k != "tool_calls"}
        kept.append((i, plain, "assistant", group_no))
    else:
        repairs.append(Dropped("unanswered_tool_call", (i,),
                               "assistant message dropped: no call answered and no text"))
    return kept, j


def _groups(kept: list[_Kept], tokenizer: Tokenizer | None) -> tuple[Group, ...]:
    """Kept messages with the same group number become one :class:`Group`."""
    groups: list[Group] = []
    for pos, (src, msg, kind, group_no) in enumerate(kept):
        tokens = count_message(msg, tokenizer)
        if groups and kept[pos - 1][3] == group_no:
            last = groups[-1]
            groups[-1] = Group(last.kind, last.positions + (pos,), last.sources + (src,),
                               last.tokens + tokens)
        else:
            groups.append(Group(kind, (pos,), (src,), tokens))
    return tuple(groups)


def group_messages(messages: Sequence[MessageLike], *, policy: Policy = "repair",
                   tokenizer: Tokenizer | None = None) -> Grouping:
    """Validate, repair (or reject) and group messages, so a tool call
    is never kept without its results.

    Raises :class:`ValidationError` for a message that is not valid OpenAI format and,
    with ``policy="strict"``, :class:`ToolCallSequenceError` for the first orphan tool
    result or unanswered tool call.
    """
    if policy not in POLICIES:
        raise ValidationError(f"policy must be one of {', '.join(POLICIES)}, not {shown(policy)}")
    msgs = _normalise(messages)
    repairs: list[Dropped] = []
    kept: list[_Kept] = []
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        role = msg["role"]
        if role == Role.TOOL.value:
            call_id = msg["tool_call_id"]
            if policy == "strict":
                raise _strict_error(i, f"tool result for tool_call_id {call_id!r} does not "
                                       "follow the assistant message that made the call")
            repairs.append(Dropped("orphan_tool_result", (i,),
                                   f"tool result {call_id!r} has no matching call before it"))
            i += 1
        elif role != Role.ASSISTANT.value or not msg.get("tool_calls"):
            kept.append((i, msg, role, len(kept)))
            i += 1
        else:
            run, i = _tool_call_run(msgs, i, policy, repairs, len(kept))
            kept.extend(run)
    return Grouping(tuple(m for _, m, _, _ in kept), _groups(kept, tokenizer), tuple(repairs))


def _summary_message(summary: Any) -> dict[str, Any] | None:
    if summary is None:
        return None
    text = summary.render() if hasattr(summary, "render") else summary
    if not isinstance(text, str):
        raise ValidationError("summary must be a string or have render() -> str "
                              "(e.g. a StructuredSummary)")
    return {"role": "system", "content": text} if text.strip() else None


def _check_trim_args(budget: int | None, strategy: str, window: int) -> None:
    if strategy not in ("budget", "window", "summary+window"):
        raise ValidationError(f"strategy must be 'budget', 'window' or 'summary+window', "
                              f"not {shown(strategy)}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValidationError(f"budget must be a positive number of tokens, not {shown(budget)}")
    if strategy == "budget" and budget is None:
        raise ValidationError("strategy 'budget' needs a budget (tokens), e.g. budget=4000")
    if strategy != "budget" and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValidationError(f"window must be a positive number of turns, not {shown(window)}")


def _select(groups: tuple[Group, ...], strategy: str, window: int, budget: int | None,
            used: int, dropped: list[Dropped]) -> tuple[set[int], int]:
    """The groups to keep (every system group, then the newest that fit the window and
    the budget, stopping at the first that does not) and the tokens used after them.
    The groups left out are appended to ``dropped``."""
    others = [k for k, g in enumerate(groups) if g.kind != "system"]
    first_in_window = 0
    if strategy != "budget":
        user_groups = [k for k in others if groups[k].kind == "user"]
        if len(user_groups) > window:
            first_in_window = user_groups[-window]
    keep: set[int] = {k for k, g in enumerate(groups) if g.kind == "system"}
    stopped = False
    for k in reversed(others):
        g = groups[k]
        if k < first_in_window:
            dropped.append(Dropped("outside_window", g.sources,
                                   f"{g.kind} group older than the last {window} turns", g.tokens))
        elif stopped or (budget is not None and used + g.tokens > budget):
            stopped = True
            dropped.append(Dropped("over_budget", g.sources,
                                   f"{g.kind} group of {g.tokens} tokens did not fit", g.tokens))
        else:
            keep.add(k)
            used += g.tokens
    return keep, used


def _in_order(grouping: Grouping, keep: set[int],
              summary_msg: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The kept groups' messages in input order, the summary after the leading system
    messages."""
    out: list[dict[str, Any]] = []
    placed = summary_msg is None
    for k, g in enumerate(grouping.groups):
        if summary_msg is not None and not placed and g.kind != "system":
            out.append(summary_msg)
            placed = True
        if k in keep:
            out.extend(dict(grouping.messages[p]) for p in g.positions)
    if summary_msg is not None and not placed:
        out.append(summary_msg)
    return out


def trim(messages: Sequence[MessageLike], budget: int | None = None, *,
         strategy: Strategy = "budget", window: int = DEFAULT_WINDOW, summary: Any = None,
         tokenizer: Tokenizer | None = None, policy: Policy = "repair") -> TrimResult:
    """Choose the messages to send: all system messages, then the newest groups that fit.

    ``budget`` is in tokens and covers the whole output as :func:`memstrata.tokens.
    count_messages` counts it; it is required for ``strategy="budget"`` and optional
    for the window strategies. ``window`` is a number of turns (a turn starts at a user
    message). ``summary`` (a string or a ``StructuredSummary``) is used by
    ``"summary+window"`` only; it is left out, and reported, if it does not fit.

    Raises :class:`BudgetError` when the system messages alone exceed ``budget``.
    """
    _check_trim_args(budget, strategy, window)
    grouping = group_messages(messages, policy=policy, tokenizer=tokenizer)
    groups = grouping.groups
    dropped = list(grouping.repairs)
    system_tokens = sum(g.tokens for g in groups if g.kind == "system")
    used = REPLY_PRIMING + system_tokens
    if budget is not None and used > budget:
        raise BudgetError(f"the system messages need {used} tokens (with the reply priming) "
                          f"but the budget is {budget}; raise the budget to at least {used} "
                          "or shorten the system prompt")
    summary_msg = _summary_message(summary) if strategy == "summary+window" else None
    summary_tokens = 0
    if summary_msg is not None:
        cost = count_message(summary_msg, tokenizer)
        if budget is not None and used + cost > budget:
            dropped.append(Dropped("summary_over_budget", (), f"summary needs {cost} tokens, "
                                   f"{budget - used} left after the system messages", cost))
            summary_msg = None
        else:
            summary_tokens = cost
            used += cost
    keep, used = _select(groups, strategy, window, budget, used, dropped)
    return TrimResult(_in_order(grouping, keep, summary_msg), TrimReport(
        strategy=strategy, budget=budget, tokens=used, system_tokens=system_tokens,
        summary_tokens=summary_tokens, groups_kept=len(keep),
        groups_dropped=sum(d.reason in ("outside_window", "over_budget") for d in dropped),
        dropped=tuple(dropped)))

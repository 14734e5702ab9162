"""Every public call of the library refuses odd values with a ValidationError.

Each call of :class:`memstrata.Memory`, :class:`memstrata.UserMemory` (sessions, context,
items, profile, search) and the knowledge base (:class:`memstrata.Knowledge`) is made with
valid arguments except one, which gets an odd value: NaN and infinite floats, huge and
negative ints, bools where numbers go, empty, blank, NUL-holding, lone-surrogate and
overlong strings, metadata that is deep or not JSON (sets, bytes, objects, cycles) and
plain wrong types. A call may succeed (an odd value may be a fine one there) or raise a
:class:`~memstrata.errors.MemstrataError`; anything else — TypeError, ValueError,
OverflowError, RecursionError, a database's own error — is a failure. After every call
the writes acknowledged before it are all still there.

``test_every_call_with_every_odd_value`` sweeps the whole table once; the hypothesis test
draws generated values (floats, ints, text, nested containers with non-JSON leaves) into
the same arguments.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstrata import Memory, MemstrataError, UserMemory
from memstrata.errors import ValidationError


def _cycle_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


def _cycle_list() -> list[Any]:
    out: list[Any] = [1]
    out.append(out)
    return out


def _deep(n: int) -> dict[str, Any]:
    d: dict[str, Any] = {"leaf": 1}
    for _ in range(n):
        d = {"k": d}
    return d


class _Thing:
    def __repr__(self) -> str:
        return "<a thing>"


#: The odd values, as factories (a cycle must be new each time).
ODD: dict[str, Callable[[], Any]] = {
    "nan": lambda: math.nan, "inf": lambda: math.inf, "-inf": lambda: -math.inf,
    "1e20": lambda: 1e20, "10**20": lambda: 10**20, "2**63": lambda: 2**63, "-1": lambda: -1,
    "-10**20": lambda: -10**20, "0": lambda: 0, "0.5": lambda: 0.5, "true": lambda: True,
    "false": lambda: False, "none": lambda: None, "empty": lambda: "", "blank": lambda: "  \t ",
    "nul": lambda: "a\x00b", "surrogate": lambda: "x\ud800y", "overlong": lambda: "long " * 60_000,
    "now-text": lambda: "now", "bad-date": lambda: "2024-13-45", "naive-datetime":
    lambda: datetime(2024, 1, 1), "decimal-nan": lambda: Decimal("NaN"), "complex": lambda: 1j,
    "bytes": lambda: b"bytes", "bytearray": lambda: bytearray(b"x"), "set": lambda: {"a", "b"},
    "frozenset": lambda: frozenset({1}), "object": _Thing, "type": lambda: int, "function":
    lambda: len, "empty-list": lambda: [], "empty-dict": lambda: {}, "list-of-ints":
    lambda: [1, 2], "list-of-none": lambda: [None], "int-key-dict": lambda: {1: "x"},
    "tuple-key-dict": lambda: {(1, 2): "x"}, "nan-in-dict": lambda: {"x": math.nan},
    "set-in-dict": lambda: {"x": {1, 2}}, "bytes-in-dict": lambda: {"x": b"y"},
    "object-in-dict": lambda: {"x": _Thing()}, "cycle-dict": _cycle_dict, "cycle-list": _cycle_list,
    "deep-dict": lambda: _deep(5000), "deep-list": lambda: _nest_list(5000), "wide-dict":
    lambda: {f"k{i}": i for i in range(20_000)}, "huge-in-dict": lambda: {"x": 10**400},
}


def _nest_list(n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(n):
        out = [out]
    return out


@dataclass
class World:
    memory: Memory
    lin: UserMemory  # the user whose acknowledged writes must never be lost
    victim: UserMemory  # the user destructive calls are made on
    item_id: str  # lin's item that nothing may change
    edit_id: str  # lin's item the edits are made on
    victim_item_id: str
    messages: list[tuple[str, str | None]]
    doc_id: str = "guide"


def _message(**fields: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "I packed the lantern.", **fields}]


#: (name, call, valid arguments) — the call gets the world and the arguments.
Call = tuple[str, Callable[..., Any], dict[str, Any]]


def _calls() -> list[Call]:
    add = lambda w, **a: w.lin.add(a.pop("messages"), **a)
    msg = lambda field: lambda w, **a: w.lin.add(_message(**{field: a.pop(field)}), "fuzz")
    kb = lambda name: lambda w, **a: getattr(w.memory.knowledge(), name)(**a)
    on_lin = lambda name: lambda w, **a: getattr(w.lin, name)(**a)
    on_victim = lambda name: lambda w, **a: getattr(w.victim, name)(**a)
    on_memory = lambda name: lambda w, **a: getattr(w.memory, name)(**a)
    item = lambda name: lambda w, **a: getattr(w.lin, name)(a.pop("item_id", w.edit_id), **a)
    victim_item = lambda name: lambda w, **a: getattr(w.victim, name)(
        a.pop("item_id", w.victim_item_id), **a)
    return [
        ("add", add, {"messages": _message(), "session_id": "fuzz", "index": True, "extract": False,
                      "idempotency_key": "key-1"}),
        ("add.content", msg("content"), {"content": "hello"}),
        ("add.created_at", msg("created_at"), {"created_at": "2024-05-08T13:56:00+00:00"}),
        ("add.timestamp", msg("timestamp"), {"timestamp": 1_700_000_000}),
        ("add.metadata", msg("metadata"), {"metadata": {"source": "app"}}),
        ("add.name", msg("name"), {"name": "lin"}),
        ("add.role", lambda w, **a: w.lin.add([{"role": a["role"], "content": "hi"}], "fuzz"),
         {"role": "user"}),
        ("add.tool_calls", lambda w, **a: w.lin.add([{"role": "assistant", "content": None,
                                                      "tool_calls": a["tool_calls"]}], "fuzz"),
         {"tool_calls": [{"id": "c1", "type": "function",
                          "function": {"name": "f", "arguments": "{}"}}]}),
        ("messages", on_lin("messages"), {"session_id": "fuzz"}),
        ("session", on_lin("session"), {"session_id": "fuzz"}),
        ("import_conversation", on_lin("import_conversation"),
         {"sessions": [{"session_id": "imp", "messages": _message()}], "progress": False,
          "extract": False}),
        ("import_conversation.session_id", lambda w, **a: w.lin.import_conversation(
            [{"session_id": a["session_id"], "messages": _message()}], progress=False),
         {"session_id": "imp"}),
        ("import_conversation.messages", lambda w, **a: w.lin.import_conversation(
            [{"session_id": "imp", "messages": a["messages"]}], progress=False),
         {"messages": _message()}),
        ("remember", lambda w, **a: w.lin.remember(a.pop("content"), **a),
         {"content": "Lin likes green tea.", "kind": "preference", "subject": "lin",
          "attribute": "drink", "value": "green tea", "confidence": 0.8, "importance": 0.5,
          "tags": ["food"], "metadata": {"source": "app"}, "session_id": "fuzz", "actor": "api",
          "reason": "fuzz"}),
        ("get", item("get"), {"item_id": None}),
        ("list", on_lin("list"), {"filters": None, "limit": 10, "offset": 0}),
        ("list.filters.since", lambda w, **a: w.lin.list(filters={"since": a["since"]}),
         {"since": "2024-01-01"}),
        ("list.filters.until", lambda w, **a: w.lin.list(filters={"until": a["until"]}),
         {"until": "2030-01-01"}),
        ("list.filters.kinds", lambda w, **a: w.lin.list(filters={"kinds": a["kinds"]}),
         {"kinds": ["fact"]}),
        ("list.filters.tags", lambda w, **a: w.lin.list(filters={"tags": a["tags"]}), {"tags": ["x"]}),
        ("update", item("update"), {"content": "Lin likes green tea a lot.", "importance": 0.6,
                                    "confidence": 0.7, "tags": ["food"], "metadata": {"a": 1},
                                    "expected_version": None, "actor": "api", "reason": "fuzz"}),
        ("history", item("history"), {}),
        ("feedback", item("feedback"), {"signal": "up"}),
        ("complete", victim_item("complete"), {}),
        ("undo", victim_item("undo"), {}),
        ("forget", victim_item("forget"), {"messages": False}),
        ("forget_all", on_victim("forget_all"), {"messages": True}),
        ("archive_session", on_victim("archive_session"), {"session_id": "v1"}),
        ("profile", on_lin("profile"), {"cached": False}),
        ("update_profile", on_lin("update_profile"),
         {"actor": "api", "name": "Lin", "role": "nurse", "goals": ["run"], "current": ["x"],
          "preferences": ["tea"], "language": "en"}),
        ("search", lambda w, **a: w.lin.search(a.pop("query"), **a),
         {"query": "lantern", "k": 5, "filters": None, "recent": ["hi"], "scoring": None,
          "mode": "hybrid", "now": None, "min_score": 0.0, "roles": ["user"]}),
        ("explain", lambda w, **a: w.lin.explain(a.pop("query"), **a),
         {"query": "lantern", "k": 5, "now": None, "min_score": 0.0}),
        ("resume", on_lin("resume"), {"exclude_session": "fuzz"}),
        ("context", on_lin("context"),
         {"session_id": "fuzz", "messages": [{"role": "user", "content": "where is my lantern?"}],
          "budget": 500, "quotas": None, "query": None, "recall": "auto", "k": 10,
          "policy": "repair", "tokenizer": None, "filters": None, "min_score": None,
          "roles": ["user"]}),
        ("context.message", lambda w, **a: w.lin.context("fuzz", _message(**a)),
         {"metadata": {"a": 1}}),
        ("enqueue_extraction", on_lin("enqueue_extraction"), {"session_id": "fuzz", "from_seq": 0}),
        ("maintain", on_lin("maintain"), {"now": None, "background": False}),
        ("jobs", on_lin("jobs"), {"status": None, "limit": 10}),
        ("memory.user", on_memory("user"), {"user_id": "lin", "agent": None}),
        ("memory.add", lambda w, **a: w.memory.add(a.pop("messages"), "lin", **a),
         {"messages": _message(), "session_id": "fuzz", "agent_id": None}),
        ("memory.maintain", on_memory("maintain"), {"user_id": "lin", "now": None,
                                                    "background": False}),
        ("memory.jobs", on_memory("jobs"), {"user_id": None, "status": None, "limit": 10}),
        ("memory.archive_idle", on_memory("archive_idle"), {"now": None, "limit": 10}),
        ("memory.flush", on_memory("flush"), {"timeout": 5}),
        ("memory.knowledge", on_memory("knowledge"), {"agent_id": None, "user_id": None}),
        ("kb.add_text", kb("add_text"),
         {"content": "# Returns\nReturns are accepted within 30 days.", "doc_id": "returns",
          "source": "returns.md", "title": "Returns", "format": "auto", "tags": ["policy"],
          "private": False, "last_reviewed": None, "metadata": {"owner": "ops"},
          "duplicates": "skip", "max_chars": None, "min_chars": None, "cjk_weight": None}),
        ("kb.search", kb("search"),
         {"query": "returns", "k": 3, "tags": [], "sources": [], "documents": [], "min_score": None,
          "expand": True, "mode": "hybrid", "private": None}),
        ("kb.search_documents", kb("search_documents"), {"query": "returns", "k": 3}),
        ("kb.list", kb("list"), {"tags": [], "sources": [], "private": None, "limit": 10, "offset": 0}),
        ("kb.get", kb("get"), {"doc_id": "guide", "private": False}),
        ("kb.chunks", kb("chunks"), {"doc_id": "guide", "private": False}),
        ("kb.stale", kb("stale"), {"min_recalls": None, "limit": 10, "private": None}),
        ("kb.mark_used", kb("mark_used"), {"chunk_ids": ["nothing"]}),
        ("kb.remove", lambda w, **a: w.memory.knowledge("victim-kb").remove(**a),
         {"doc_id": "x", "private": False}),
        ("kb.add", lambda w, **a: w.memory.knowledge("victim-kb").add(**a),
         {"path": "/nonexistent/file.md", "tags": [], "format": "auto", "progress": False}),
    ]


CALLS = _calls()
#: (call name, argument name) pairs: every argument of every call.
TARGETS = [(name, arg) for name, _, valid in CALLS for arg in valid]
_BY_NAME = {name: (call, valid) for name, call, valid in CALLS}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    path = tmp_path_factory.mktemp("libfuzz") / "m.db"
    memory = Memory(f"sqlite:///{path}", embedder="hash:256", worker="off", extraction="off")
    lin, victim = memory.user("lin"), memory.user("victim")
    added = lin.add([{"role": "user", "content": "I live in Berlin."},
                     {"role": "assistant", "content": "Noted: Berlin."}], "home")
    item = lin.remember("Lin is a nurse.", kind="fact")
    edited = lin.remember("Lin likes green tea.", kind="preference")
    memory.knowledge().add_text("# Guide\nThe lantern is in the shed.", doc_id="guide")
    victim_item = victim.remember("Victim likes tea.")
    w = World(memory, lin, victim, item.id, edited.id, victim_item.id,
              [(m.id, m.content) for m in added.messages])
    yield w
    memory.close()


def _intact(w: World) -> None:
    """The writes acknowledged before the fuzzing are all still there."""
    assert [(m.id, m.content) for m in w.lin.messages("home")] == w.messages
    assert w.lin.get(w.item_id).content == "Lin is a nurse."
    assert w.memory.knowledge().get("guide").text


def _try(w: World, name: str, arg: str, value: Any) -> str | None:
    """Make the call with ``arg`` odd; the raw exception's type, or None."""
    call, valid = _BY_NAME[name]
    args = dict(valid)
    args[arg] = value
    if "item_id" in args and args["item_id"] is None:
        del args["item_id"]
    try:
        call(w, **args)
    except MemstrataError:
        return None
    except Exception as exc:  # the finding: anything that is not a MemstrataError
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


def _victim_item(w: World) -> None:
    """Something for the destructive calls to act on (the last one may have forgotten it)."""
    items = w.victim.list(limit=1)
    w.victim_item_id = items[0].id if items else w.victim.remember("Victim likes tea.").id


def test_every_call_with_every_odd_value(world: World) -> None:
    raw: dict[tuple[str, str, str], str] = {}
    for name, arg in TARGETS:
        for odd, make in ODD.items():
            _victim_item(world)
            found = _try(world, name, arg, make())
            if found is not None:
                raw[(name, arg, odd)] = found
        _intact(world)
    kinds = sorted({(n, a, f.split(":")[0]) for (n, a, _), f in raw.items()})
    print(f"{len(TARGETS)} arguments x {len(ODD)} odd values; raw exceptions at "
          f"{len(kinds)} (call, argument, type):")
    for (n, a, o), f in sorted(raw.items()):
        print(f"  {n}({a}={o}): {f}")
    assert not raw, "\n".join(f"{n}({a}={o}): {f}" for (n, a, o), f in sorted(raw.items()))


_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                    st.text(max_size=30), st.binary(max_size=8), st.datetimes(),
                    st.decimals(allow_nan=True, allow_infinity=True))
_ODD_VALUES = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.sets(st.integers(), max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), inner, max_size=3),
    st.tuples(inner, inner)), max_leaves=8)


@settings(max_examples=int(os.environ.get("MEMSTRATA_FUZZ_EXAMPLES", 1000)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(target=st.sampled_from(TARGETS), value=_ODD_VALUES)
def test_generated_values_get_a_validation_error_or_work(world: World, target, value) -> None:
    _victim_item(world)
    found = _try(world, target[0], target[1], value)
    assert found is None, f"{target[0]}({target[1]}={value!r}): {found}"
    _intact(world)


def test_refusals_are_validation_errors_that_say_what_to_fix(world: World) -> None:
    """The values the issue names: NaN and 1e20 times, a set or 5,000-level metadata, NaN
    ``since``, ``now`` as a string, ``context(messages=5)``, ``import_conversation(5)``."""
    lin = world.lin
    cases: list[Callable[[], Any]] = [
        lambda: lin.add(_message(created_at=math.nan), "fuzz"),
        lambda: lin.add(_message(created_at=1e20), "fuzz"),
        lambda: lin.add(_message(metadata={"x": {1, 2}}), "fuzz"),
        lambda: lin.add(_message(metadata=_deep(5000)), "fuzz"),
        lambda: lin.remember("Lin likes jazz.", metadata=_cycle_dict()),
        lambda: lin.list(filters={"since": math.nan}),
        lambda: lin.search("lantern", now="yesterday"),
        lambda: lin.context("fuzz", messages=5),
        lambda: lin.import_conversation(5),  # type: ignore[arg-type]
        lambda: lin.search("lantern", k=True),
        lambda: lin.remember("Lin likes jazz.", importance=math.nan),
    ]
    for case in cases:
        with pytest.raises(ValidationError) as refused:
            case()
        assert len(str(refused.value)) > 20
    _intact(world)

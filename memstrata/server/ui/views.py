"""What each inspector page shows, as plain JSON-ready dicts: the page's JSON twin is
exactly this, and the HTML is this rendered. Built over a :class:`~memstrata.UserMemory`
handle and the store, from the values' own ``to_dict()`` (the REST API's shapes)."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ...errors import NotFoundError, ValidationError
from ...stores.base import AuditEntry
from ...types import Filters, Kind, Layer, Message, Status
from ...user import UserMemory

__all__ = ["ALL_STATUSES", "overview", "items_page", "item_page", "diff_words", "timeline",
           "version_label", "sessions_page", "session_detail", "FORGET_ACTIONS"]

ALL_STATUSES = Filters(statuses=tuple(Status))
#: Audit actions that forget memory (their entries carry ids, never content).
FORGET_ACTIONS = ("items.forget", "users.forget", "ui.items.forget", "ui.sessions.forget",
                  "sessions.forget")
_MANY = 10_000
_TOKEN = re.compile(r"\s+|[\u4e00-\u9fff]|[^\s\u4e00-\u9fff]+")


def version_label(op: str, actor: str) -> str:
    """The timeline's word for a version row (an i18n key)."""
    if op == "create":
        return "op_extracted" if actor.startswith(("rule:", "llm:")) else "op_remembered"
    return {"boost": "op_boosted", "supersede": "op_superseded", "edit": "op_corrected",
            "feedback": "op_feedback", "status": "op_status", "delete": "op_deleted",
            "undo": "op_undone"}.get(op, f"op_{op}")


def diff_words(before: str, after: str) -> list[dict[str, str]]:
    """Word-level diff (Chinese by character): ``[{"op": "same"|"del"|"ins", "text"}]``."""
    a, b = _TOKEN.findall(before), _TOKEN.findall(after)
    out: list[dict[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append({"op": "same", "text": "".join(a[i1:i2])})
            continue
        if i2 > i1:
            out.append({"op": "del", "text": "".join(a[i1:i2])})
        if j2 > j1:
            out.append({"op": "ins", "text": "".join(b[j1:j2])})
    return out


_SHOWN = ("content", "kind", "status", "subject", "attribute", "value", "confidence",
          "importance", "tags", "supersedes")


def _changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    before, after = before or {}, after or {}
    out = []
    for name in _SHOWN:
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        row: dict[str, Any] = {"field": name, "before": old, "after": new}
        if name == "content" and isinstance(old, str) and isinstance(new, str):
            row["diff"] = diff_words(old, new)
        out.append(row)
    return out


def _all_items(handle: UserMemory) -> list[Any]:
    return handle.list(filters=ALL_STATUSES, limit=_MANY)


def timeline(handle: UserMemory, audit: Sequence[AuditEntry], *, limit: int = 100) -> list[dict[str, Any]]:
    """What changed in memory and why, newest first: every version row of every item
    (reads — ``access`` rows — left out), profile edits, and forgetting (from the audit
    log: the content is gone, the fact that it was forgotten is not)."""
    rows: list[dict[str, Any]] = []
    for item in _all_items(handle):
        for v in handle.history(item.id):
            if v.op == "access":
                continue
            shown = v.after or v.before or {}
            rows.append({"at": v.at.isoformat(), "what": version_label(v.op, v.actor),
                         "op": v.op, "item_id": v.item_id, "version": v.version, "actor": v.actor,
                         "reason": v.reason, "content": str(shown.get("content", ""))})
    for p in handle.profile_history():
        rows.append({"at": p.at.isoformat(), "what": "op_profile", "op": "profile", "item_id": None,
                     "version": p.version, "actor": p.actor, "reason": p.reason,
                     "content": ", ".join(f"{k}={v}" for k, v in sorted(p.data.items()) if v)})
    for entry in audit:
        if entry.action in FORGET_ACTIONS and 200 <= entry.status < 400:  # 303: a form's redirect
            rows.append({"at": entry.at.isoformat(), "what": "op_forgotten", "op": "forget",
                         "item_id": entry.target, "version": None, "actor": f"key:{entry.key_id}",
                         "reason": entry.action, "content": ""})
    rows.sort(key=lambda r: r["at"], reverse=True)
    return rows[:limit]


def overview(handle: UserMemory, audit: Sequence[AuditEntry]) -> dict[str, Any]:
    """The user's overview: profile with its history, counts, timeline, open todos."""
    items = _all_items(handle)
    kinds = Counter(i.kind.value for i in items if i.status is Status.ACTIVE)
    statuses = Counter(i.status.value for i in items)
    todos = [i.to_dict() for i in items if i.kind is Kind.TODO and i.status is Status.ACTIVE]
    return {"user_id": handle.user_id,
            "profile": handle.profile().to_dict(),
            "profile_history": [p.to_dict() for p in reversed(handle.profile_history())],
            "counts": {"kind": {k.value: kinds.get(k.value, 0) for k in Kind},
                       "status": {s.value: statuses.get(s.value, 0) for s in Status},
                       "sessions": len(handle.sessions())},
            "timeline": timeline(handle, audit),
            "open_todos": todos}


def _choice(value: str | None, allowed: Sequence[str], what: str) -> str | None:
    if value in (None, ""):
        return None
    if value not in allowed:
        raise ValidationError(f"{what} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def items_page(handle: UserMemory, *, kind: str | None = None, status: str | None = None,
               layer: str | None = None, tag: str | None = None, text: str | None = None,
               limit: int = 50, offset: int = 0) -> dict[str, Any]:
    """Memory items (layer ``semantic``, the default) or raw turns (layer ``episodic``)
    matching the filters, newest first; ``text`` is a case-insensitive substring."""
    kind = _choice(kind, [k.value for k in Kind], "kind")
    status = _choice(status, [s.value for s in Status] + ["all"], "status")
    layer = _choice(layer, [Layer.SEMANTIC.value, Layer.EPISODIC.value], "layer") or "semantic"
    needle = (text or "").strip().casefold()
    filters = {"layer": layer, "kind": kind, "status": status, "tag": tag or None, "text": text or None}
    if layer == "episodic":
        turns = [m for info in handle.sessions() for m in handle.messages(info.session_id)
                 if not needle or needle in (m.content or "").casefold()]
        turns.sort(key=lambda m: (m.created_at, m.seq), reverse=True)
        rows = [m.to_dict() for m in turns[offset:offset + limit + 1]]
        return {"filters": filters, "items": [], "turns": rows[:limit], "offset": offset,
                "next_offset": offset + limit if len(rows) > limit else None}
    spec: dict[str, Any] = {"kind": kind or [], "tags": [tag] if tag else []}
    spec["status"] = [s.value for s in Status] if status == "all" else (status or "active")
    found = handle.list(filters=Filters.build(spec), limit=_MANY)
    if needle:
        found = [i for i in found if needle in i.content.casefold()]
    page = [i.to_dict() for i in found[offset:offset + limit + 1]]
    return {"filters": filters, "items": page[:limit], "turns": [], "offset": offset,
            "next_offset": offset + limit if len(page) > limit else None}


def _turns_by_id(handle: UserMemory, session_id: str | None, ids: Sequence[str]) -> list[dict[str, Any]]:
    wanted = set(ids)
    if not wanted:
        return []
    sessions = [session_id] if session_id else [s.session_id for s in handle.sessions()]
    found: list[Message] = []
    for sid in sessions:
        found += [m for m in handle.messages(sid) if m.id in wanted]
    if session_id and len(found) < len(wanted):  # an item merged from several sessions
        for info in handle.sessions():
            if info.session_id != session_id:
                found += [m for m in handle.messages(info.session_id) if m.id in wanted]
    return [m.to_dict() for m in found]


def item_page(handle: UserMemory, item_id: str) -> dict[str, Any]:
    """One item, its versions oldest first, each with the fields it changed (content as
    a word diff), and the source turns it was extracted from."""
    item = handle.get(item_id)
    versions = []
    for v in handle.history(item_id):
        row = v.to_dict()
        row["what"] = version_label(v.op, v.actor)
        row["changes"] = _changes(v.before, v.after)
        row["path"] = v.actor.split(":", 1)[0]  # rule / llm / api / key / user …
        after, before = v.after or {}, v.before or {}
        added = [m for m in after.get("source_message_ids") or ()
                 if m not in (before.get("source_message_ids") or ())]
        row["sources"] = {"session_id": after.get("source_session_id"), "message_ids": added}
        versions.append(row)
    return {"item": item.to_dict(), "versions": versions,
            "source_turns": _turns_by_id(handle, item.source_session_id, item.source_message_ids)}


def sessions_page(handle: UserMemory) -> dict[str, Any]:
    """The user's sessions, newest first."""
    rows = [s.to_dict() for s in handle.sessions()]
    rows.sort(key=lambda r: r["updated_at"], reverse=True)
    return {"sessions": rows}


def session_detail(handle: UserMemory, session_id: str) -> dict[str, Any]:
    """A session: state (archive status, versions), the summary with the message range
    it covers and its steps v1…vN newest first (each with the messages it folded in),
    and every message (tool calls and results included)."""
    state = handle.session(session_id)
    if not state.exists:
        raise NotFoundError(f"no session {session_id!r} of this user")
    messages = [m.to_dict() for m in handle.messages(session_id)]
    versions = handle.parts.store.summary_versions(handle.scope, session_id)
    return {"session": state.to_dict(), "messages": messages,
            "summary": state.summary.to_dict() if state.summary else None,
            "summary_range": [0, state.message_range_end],
            "summary_versions": [v.to_dict() for v in reversed(versions)]}


# ---------------------------------------------------------------- the person's page

#: the groups of the person's page, in the order a person thinks of them
ABOUT_GROUPS = ("me", "people", "likes", "asked")
_SELF = {None, "", "user", "the user", "用户", "我"}
_IRREGULAR = {"is": "are", "was": "were", "has": "have", "does": "do"}
_START = re.compile(r"^(?:The user|User)(?P<own>'s)?\s+(?P<word>[A-Za-z]+)(?P<rest>.*)$", re.S)
_HAS = {"is": "is", "am": "is", "are": "is", "were": "was", "have": "has", "do": "does",
        "go": "goes"}
#: words after "You"/"I" that stay as they are for "User": modals, and past forms
_KEEP = frozenset("""can could will would shall should may might must was had did used ought
    went got made took came left grew began became knew met bought found gave lost ran saw
    sold spent thought told wrote said kept felt fell heard held built paid sent sat stood won
    broke chose drove ate drank flew forgot taught threw understood woke wore""".split())
#: adverbs between the subject and its verb ("You often go" → "User often goes")
_ADVERBS = frozenset("""often usually always never sometimes also still really just now rarely
    only already mostly generally normally mainly""".split())
_CONTRACTED = {"'re": "is", "'m": "is", "'ve": "has", "'ll": "will", "'d": "would"}
_NEGATED = {"don't": "doesn't", "aren't": "isn't", "weren't": "wasn't", "haven't": "hasn't",
            "do not": "does not", "are not": "is not", "am not": "is not", "have not": "has not"}
_YOU = re.compile(r"^(?:you|i)(?P<clitic>'re|'m|'ve|'ll|'d|’re|’m|’ve|’ll|’d)?\s+(?P<rest>.*)$",
                  re.I | re.S)
_YOUR = re.compile(r"^(?:your|my)\s+(?P<rest>.*)$", re.I | re.S)


def _second_person_verb(word: str) -> str:
    """A third-person-singular verb as "you" says it: lives → live, is → are, studies →
    study, watches → watch; any other word (can, moved, wants-less forms) as it is."""
    low = word.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith("ies") and len(low) > 4:
        return word[:-3] + "y"
    if low.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return word[:-2]
    if low.endswith("s") and not low.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _said_to_you(rest: str) -> str:
    """The words after "User" as they follow "You": "lives in" → "live in", "often goes"
    → "often go", "doesn't eat" → "don't eat"."""
    low = rest.lower()
    for theirs, yours in _NEGATED.items():
        if low.startswith(yours + " ") or low == yours:
            return theirs + rest[len(yours):]
    words = rest.split(" ")
    i = 0
    while i < len(words) - 1 and words[i].lower() in _ADVERBS:
        i += 1
    head = re.match(r"[A-Za-z]+", words[i])
    if head:
        words[i] = _second_person_verb(head[0]) + words[i][head.end():]
    return " ".join(words)


def second_person(text: str) -> str:
    """A memory, stored about "User" / "用户", said to the person: "User lives in
    Lisbon" → "You live in Lisbon", "User's sister …" → "Your sister …", "用户住在里斯本"
    → "你住在里斯本". Other text is shown as stored."""
    text = text.strip()
    if "用户" in text:
        text = text.replace("用户的", "你的").replace("用户", "你")
    match = _START.match(text)
    if match:
        if match["own"]:
            text = f"Your {match['word']}{match['rest']}"
        else:
            text = "You " + _said_to_you(match["word"] + match["rest"])
    return re.sub(r"\b(?:the user|user)'s\b", "your", text, flags=re.I)


def _third_person_verb(word: str) -> str:
    """The verb after "You" as it is said after "User": live → lives, are → is, study →
    studies, watch → watches; modals and past forms (can, moved, went) as they are."""
    low = word.lower()
    if low in _HAS:
        return _HAS[low]
    if low in _KEEP or low.endswith("ed") or not low.isalpha():
        return word
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    return word + "s"


def third_person(text: str) -> str:
    """What the person wrote about themselves, stored the way memories are ("User …",
    "用户…"): the reverse of :func:`second_person` for the subject the sentence starts
    with — "You live in Porto" / "I live in Porto" → "User lives in Porto", "Your sister
    …" → "User's sister …", "你住在波尔图" / "我住在波尔图" → "用户住在波尔图", "你的妹妹…"
    → "用户的妹妹…"; "your" later in an English sentence → "the user's". Any other "你"
    or "you" is left as written (it may mean the assistant)."""
    text = text.strip()
    if re.match(r"^[你我](?!们)", text):  # not 你们/我们 (you all, we)
        return "用户" + text[1:]
    own = _YOUR.match(text)
    if own:
        text = f"User's {own['rest']}"
    else:
        match = _YOU.match(text)
        if match:
            rest = match["rest"]
            clitic = (match["clitic"] or "").replace("’", "'").lower()
            if clitic:
                text = f"User {_CONTRACTED[clitic]} {rest}"
            else:
                low = rest.lower()
                negated = next((n for n in _NEGATED if low.startswith(n + " ")), None)
                if negated:
                    text = f"User {_NEGATED[negated]}{rest[len(negated):]}"
                else:
                    words = rest.split(" ")
                    i = 0
                    while i < len(words) - 1 and words[i].lower() in _ADVERBS:
                        i += 1
                    words[i] = _third_person_verb(words[i])
                    text = "User " + " ".join(words)
    head, sep, tail = text.partition(" ")
    return head + sep + re.sub(r"\byour\b", "the user's", tail, flags=re.I) if sep else text


def editable(content: str) -> tuple[str, bool]:
    """What the person's correction box holds: the sentence said to them when turning it
    back gives the stored text exactly (then a correction written the same way is turned
    back on save), else the stored text as it is."""
    said = second_person(content)
    return (said, True) if said != content and third_person(said) == content else (content, False)


def _day(when: Any, lang: str) -> str:
    stamp = when if isinstance(when, datetime) else datetime.fromisoformat(str(when))
    if lang == "zh":
        return f"{stamp.year}年{stamp.month}月{stamp.day}日"
    return f"{stamp.day} {stamp:%b %Y}"


def _group(item: Any) -> str:
    if item.kind.value == "preference":
        return "likes"
    if item.kind.value in ("instruction", "todo"):
        return "asked"
    if (item.subject or "").strip().lower() not in _SELF:
        return "people"
    return "me"


def about(handle: UserMemory, lang: str, *, limit: int = 200) -> dict[str, Any]:
    """What the person's first page says: each active memory as a sentence to them,
    grouped as a person thinks (about me, people in my life, what I like and avoid, what
    I asked you to do), with when and from which message it was learned and what it
    replaced; then what we talked about (the sessions' summaries)."""
    turns: dict[str, dict[str, Message]] = {}

    def turn(session_id: str | None, message_id: str) -> Message | None:
        if not session_id:
            return None
        if session_id not in turns:
            turns[session_id] = {m.id: m for m in handle.messages(session_id)}
        return turns[session_id].get(message_id)

    groups: dict[str, list[dict[str, Any]]] = {g: [] for g in ABOUT_GROUPS}
    for item in handle.list(limit=limit):
        source = turn(item.source_session_id, item.source_message_ids[0]) if item.source_message_ids else None
        replaced = None
        if item.supersedes:
            try:
                replaced = second_person(handle.get(item.supersedes).content)
            except NotFoundError:
                replaced = None
        earlier = [str((v.before or {}).get("content")) for v in handle.history(item.id)
                   if v.op == "edit" and (v.before or {}).get("content")
                   and (v.before or {}).get("content") != (v.after or {}).get("content")]
        if earlier and replaced is None:  # what the person corrected it from
            replaced = second_person(earlier[0])
        groups[_group(item)].append({
            "id": item.id, "sentence": second_person(item.content), "content": item.content,
            "editable": editable(item.content)[0], "said_to_you": editable(item.content)[1],
            "kind": item.kind.value, "when": _day(item.created_at, lang),
            "source": source.content[:200] if source is not None and source.content else None,
            "source_role": source.role.value if source is not None else None,
            "replaced": replaced, "version": item.version})
    talked = []
    for info in reversed(handle.sessions()):
        state = handle.session(info.session_id)
        if state.summary is None:
            continue
        lines = state.summary.render(lang).strip().splitlines()[1:]  # the parts, not the title
        if lines:
            talked.append({"session_id": info.session_id, "summary": [ln.lstrip("- ") for ln in lines],
                           "when": _day(info.updated_at, lang), "messages": info.message_count})
    return {"user_id": handle.user_id, "groups": groups, "talked": talked[:10]}

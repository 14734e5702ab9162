"""A closed session's stage summary: its one line of text, the attribute of the item
that holds it, and the meta key that marks which summary version was consolidated.

The names are shared by the consolidator, which writes them (:mod:`.consolidate`), and
the forgetter, which finds and removes them (:mod:`.forget`); both import them from here.
"""

from __future__ import annotations

import hashlib

from memstrata.types import Scope

__all__ = ["stage_text", "consolidated_key", "stage_attribute"]

_LABELS = {"en": ("Session", "goal", "decided", "done", "open", "constraints", "learned"),
           "zh": ("会话", "目标", "决定", "完成", "待定", "约束", "记下")}


def stage_text(session_id: str, parts: dict[str, str], learned: list[str], lang: str) -> str:
    """The stage summary of one session as one line of text (pure)."""
    title, goal, decided, done, open_, constraints, learnt = _LABELS["zh" if lang == "zh" else "en"]
    colon, sep = ("：", "；") if lang == "zh" else (": ", "; ")
    chunks = [f"{label}{colon}{parts[key]}" for label, key in (
        (goal, "goal"), (decided, "decisions"), (done, "done"), (open_, "open_questions"),
        (constraints, "constraints")) if parts.get(key)]
    if learned:
        chunks.append(f"{learnt}{colon}" + sep.join(learned[:5]))
    return f"{title} {session_id}{colon}" + sep.join(chunks) if chunks else ""


def consolidated_key(scope: Scope, session_id: str) -> str:
    """The meta key that records which summary version of a session was consolidated;
    hashed, so it names no user once the user is forgotten."""
    raw = f"{scope.namespace}\x00{scope.user_id}\x00{session_id}".encode()
    return f"consolidated:{hashlib.sha256(raw).hexdigest()[:32]}"


def stage_attribute(session_id: str) -> str:
    """The attribute of a session's stage-summary item."""
    return f"stage:{session_id}"

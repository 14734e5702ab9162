"""The core profile: a fixed-structure portrait of the user,
aggregated from active memory items and injected into every prompt.

"A thousand fragments are worth less than one concise portrait": the profile holds the
name, role, long-term goals, current major matters, key preferences, the language to
answer in and the people in the user's life (what is known about the user's husband, boss,
son… — never mixed into the user's own parts) — and renders as a short block in Chinese
or English.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstrata.text import detect_language
from memstrata.types import Kind, MemoryItem, Status

from .extract import cardinality

__all__ = ["Profile", "aggregate", "render"]


@dataclass(frozen=True, slots=True)
class Profile:
    """The user's core profile. ``sources`` lists the item ids it was built from."""

    name: str | None = None
    role: str | None = None
    goals: tuple[str, ...] = ()
    current: tuple[str, ...] = ()
    preferences: tuple[str, ...] = ()
    language: str | None = None
    #: one line per person in the user's life: "husband: User's husband is diabetic; …"
    people: tuple[str, ...] = ()
    #: the current value of the user's one-value slots a request may depend on without
    #: naming them ("User lives in Shanghai", "用户今年35岁"): where they live, age, health…
    facts: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_empty(self) -> bool:
        """True when nothing is known yet."""
        return not (self.name or self.role or self.goals or self.current
                    or self.preferences or self.language or self.people or self.facts)

    def to_dict(self) -> dict:
        """A JSON-ready dict (the shape the API and the inspector show)."""
        return {"name": self.name, "role": self.role, "goals": list(self.goals),
                "current": list(self.current), "preferences": list(self.preferences),
                "language": self.language, "people": list(self.people),
                "facts": list(self.facts), "sources": list(self.sources)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Profile":
        return cls(data.get("name"), data.get("role"), tuple(data.get("goals") or ()),
                   tuple(data.get("current") or ()), tuple(data.get("preferences") or ()),
                   data.get("language"), people=tuple(data.get("people") or ()),
                   facts=tuple(data.get("facts") or ()), sources=tuple(data.get("sources") or ()))


_ROLE_ATTRS = ("job", "employer")
_PREF_ATTRS = ("answer_length", "answer_style", "answer_language", "likes", "food", "diet",
               "allergies", "preferences", "language", "tools")
_CURRENT_ATTRS = ("plans", "learning")
#: one-value slots that are neither the name, the role nor a preference: the current facts
#: a request depends on without naming them ("restaurants near me" needs the city)
_FACT_ATTRS = ("city", "age", "marital_status", "health:status", "hometown")
_FACT_PREFIXES = ("attr:", "favorite:")
_LANGS = {"Chinese": "zh", "English": "en"}


def _recency(item: MemoryItem) -> tuple[datetime, int]:
    return (item.updated_at, item.version)


def _rank(item: MemoryItem) -> float:
    return item.importance * item.confidence * float(item.metadata.get("weight", 1.0))


def aggregate(items: Iterable[MemoryItem], *, max_per_part: int = 5) -> Profile:
    """Build the profile from a user's items; only active ones (and open todos) count.

    For single-valued attributes the latest item wins, even if an older one was never
    superseded; multi-valued parts keep the ``max_per_part`` most important items.
    """
    every = [i for i in items if i.status is Status.ACTIVE]
    active = [i for i in every if (i.subject or "user") == "user"]
    others = [i for i in every if (i.subject or "user") != "user"]
    latest: dict[str, MemoryItem] = {}
    for item in sorted(active, key=_recency):
        if item.attribute and cardinality(item.attribute) == "single":
            latest[item.attribute] = item
    single_ids = {i.id for i in latest.values()}
    usable = [i for i in active if not (i.attribute and cardinality(i.attribute) == "single")
              or i.id in single_ids]

    def top(pred: Callable[[MemoryItem], bool]) -> list[MemoryItem]:
        chosen = [i for i in usable if pred(i)]
        return sorted(chosen, key=lambda i: (-_rank(i), -i.updated_at.timestamp()))[:max_per_part]

    name = latest.get("name")
    roles = [latest[a] for a in _ROLE_ATTRS if a in latest]
    goals = top(lambda i: i.attribute == "goals")
    current = top(lambda i: i.kind is Kind.TODO or i.attribute in _CURRENT_ATTRS)
    prefs = top(lambda i: i.kind is Kind.INSTRUCTION or i.attribute in _PREF_ATTRS)
    lang_item = latest.get("answer_language")
    language = _LANGS.get(lang_item.value or "", lang_item.value) if lang_item else _majority_lang(usable)
    people, known = _people(others, max_per_part)
    facts = [latest[a] for a in _FACT_ATTRS if a in latest] + sorted(
        (i for a, i in latest.items() if a.startswith(_FACT_PREFIXES)), key=_recency, reverse=True)
    facts = facts[:max_per_part]
    used = [x for x in [name, *roles, *goals, *current, *prefs, lang_item, *known, *facts]
            if x is not None]
    return Profile(
        name=name.value if name else None,
        role="; ".join(r.content for r in roles) or None,
        goals=tuple(g.content for g in goals),
        current=tuple(c.content for c in current),
        preferences=tuple(p.content for p in prefs),
        language=language, people=people, facts=tuple(f.content for f in facts),
        sources=tuple(dict.fromkeys(x.id for x in used)))


def _people(items: list[MemoryItem], limit: int) -> tuple[tuple[str, ...], list[MemoryItem]]:
    """A line per person (most important first), their latest facts, at most ``limit``
    people and three facts each."""
    by: dict[str, list[MemoryItem]] = {}
    for item in sorted(items, key=lambda i: (-_rank(i), -i.updated_at.timestamp())):
        by.setdefault(item.subject or "", []).append(item)
    lines, used = [], []
    for subject, facts in list(by.items())[:limit]:
        chosen = facts[:3]
        used += chosen
        sep = "；" if detect_language(chosen[0].content) == "zh" else "; "
        lines.append(f"{subject}: {sep.join(f.content for f in chosen)}")
    return tuple(lines), used


def _majority_lang(items: list[MemoryItem]) -> str | None:
    if not items:
        return None
    zh = sum(1 for i in items if detect_language(i.content) == "zh")
    return "zh" if zh * 2 > len(items) else "en"


_LABELS = {
    "en": ("User profile", "Name", "Role", "Long-term goals", "Current matters",
           "Key preferences", "Language", "(nothing known yet)", "People in the user's life",
           "Facts as of now"),
    "zh": ("用户档案", "称呼", "身份", "长期目标", "当前事项", "关键偏好", "语言", "（暂无信息）",
           "生活中的人", "目前情况"),
}


def render(profile: Profile, lang: str = "en") -> str:
    """The profile as a short text block for a system prompt, in ``"en"`` or ``"zh"``."""
    title, n, r, g, c, p, lg, empty, ppl, f = _LABELS["zh" if lang == "zh" else "en"]
    sep = "；" if lang == "zh" else "; "
    colon = "：" if lang == "zh" else ": "
    lines = [f"[{title}]"]
    for label, value in ((n, profile.name), (r, profile.role), (f, sep.join(profile.facts)),
                         (g, sep.join(profile.goals)),
                         (c, sep.join(profile.current)), (p, sep.join(profile.preferences)),
                         (lg, profile.language)):
        if value:
            lines.append(f"- {label}{colon}{value}")
    if profile.people:
        lines.append(f"- {ppl}{colon}" + "".join(f"\n  - {line}" for line in profile.people))
    if len(lines) == 1:
        lines.append(empty)
    return "\n".join(lines)

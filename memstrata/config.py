"""One settings table: it drives ``Settings``, environment variables, CLI flags and docs.

Each setting has a name, a default, a type and one line of help. ``MEMSTRATA_<NAME>``
overrides the default; keyword arguments to :class:`~memstrata.Memory` override both.
``docs/configuration.md`` lists them all (a test checks it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import ConfigError

__all__ = ["Settings", "SETTINGS"]


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    type: type
    help: str

    @property
    def env(self) -> str:
        return f"MEMSTRATA_{self.name.upper()}"


SETTINGS: tuple[Setting, ...] = (
    Setting("store", "sqlite:///memstrata.db", str, "Storage URL: sqlite:///file.db or memory://"),
    Setting("embedder", "local:e5-small", str,
            "Embedding provider: local:e5-small, local:minilm, hash:256, openai:MODEL, "
            "openai-compatible:URL#MODEL"),
    Setting("namespace", "", str, "Default agent/app namespace for every call"),
    Setting("max_message_chars", 200_000, int, "Longest message content accepted, in characters"),
    Setting("scoring", "balanced", str,
            "Scoring preset: balanced (0.6/0.3/0.1), fresh (0.4/0.3/0.3), decay, support, relevance"),
    Setting("candidates", 50, int, "Candidates taken from each of the dense and lexical lists"),
    Setting("fusion", "weighted", str, "Fusion of dense and lexical lists: weighted or rrf"),
    Setting("dense_weight", 0.35, float, "Weight of the dense list in fusion"),
    Setting("lexical_weight", 0.65, float, "Weight of the lexical (BM25) list in fusion"),
    Setting("context_weight", 0.3, float,
            "BM25 weight of a turn's context (neighbouring turns, date) against its own text"),
    Setting("query_turns", 3, int, "Recent turns added to the query besides the current message"),
    Setting("embed_batch", 32, int, "Texts per embedding call during imports"),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings; build with :meth:`Settings.load`."""

    store: str = "sqlite:///memstrata.db"
    embedder: str = "local:e5-small"
    namespace: str = ""
    max_message_chars: int = 200_000
    scoring: str = "balanced"
    candidates: int = 50
    fusion: str = "weighted"
    dense_weight: float = 0.35
    lexical_weight: float = 0.65
    context_weight: float = 0.3
    query_turns: int = 3
    embed_batch: int = 32

    @classmethod
    def load(cls, **overrides: Any) -> "Settings":
        """Defaults, then ``MEMSTRATA_*`` environment variables, then ``overrides``."""
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            raw = os.environ.get(setting.env)
            if raw is not None:
                try:
                    values[setting.name] = setting.type(raw)
                except ValueError:
                    raise ConfigError(f"{setting.env}={raw!r} is not a valid {setting.type.__name__}") from None
        known = {f.name for f in fields(cls)}
        for key, value in overrides.items():
            if key not in known:
                raise ConfigError(f"unknown setting {key!r}; known: {', '.join(sorted(known))}")
            if value is not None:
                values[key] = value
        return replace(cls(), **values)

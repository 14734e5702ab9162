"""memstrata — layered long-term memory for LLM agents.

Start with :class:`Memory`; errors are in :mod:`memstrata.errors`.
"""

from .errors import (BudgetError, ConfigError, ConflictError, JobError, MemstrataError,
                     NotFoundError, ProviderError, StoreError, ToolCallSequenceError,
                     ValidationError)
from .memory import AddResult, Memory
from .retrieval.search import SearchResult
from .types import (Filters, ItemVersion, Kind, Layer, MemoryItem, Message, Role, Scope,
                    ScoreParts, SearchHit, Status)

__version__ = "0.1.0"

__all__ = [
    "Memory",
    "AddResult",
    "SearchResult",
    "Filters",
    "ItemVersion",
    "Kind",
    "Layer",
    "MemoryItem",
    "Message",
    "Role",
    "Scope",
    "ScoreParts",
    "SearchHit",
    "Status",
    "MemstrataError",
    "ConfigError",
    "ValidationError",
    "ToolCallSequenceError",
    "NotFoundError",
    "ConflictError",
    "BudgetError",
    "JobError",
    "StoreError",
    "ProviderError",
    "__version__",
]

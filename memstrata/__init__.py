"""memstrata — layered long-term memory for LLM agents.

Start with :class:`Memory`; errors are in :mod:`memstrata.errors`.
"""

from .aio import AsyncMemory, AsyncUserMemory
from .client import AsyncClient, Client
from .errors import (BudgetError, ConfigError, ConflictError, JobError, MemstrataError,
                     NotFoundError, ProviderError, StoreError, ToolCallSequenceError,
                     ValidationError)
from .knowledge import DocumentHit, IngestResult, Knowledge, KnowledgeHit
from .memory import AddResult, Memory, UserMemory
from .requests import ContextRequest, SearchRequest
from .retrieval.search import SearchResult
from .types import (Filters, ItemVersion, Kind, Layer, MemoryItem, Message, Role, Scope, ScoreParts,
                    SearchHit, Status)

__version__ = "0.1.0"

__all__ = [
    "Memory",
    "UserMemory",
    "AsyncMemory",
    "AsyncUserMemory",
    "Client",
    "AsyncClient",
    "AddResult",
    "SearchRequest",
    "ContextRequest",
    "SearchResult",
    "Knowledge",
    "KnowledgeHit",
    "DocumentHit",
    "IngestResult",
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

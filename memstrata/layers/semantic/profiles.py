"""The core profile through the store: aggregation, manual edits as versions, snapshots.

:func:`~.profile.aggregate` (pure) builds the profile from active items; the latest
version of the user's manual overrides goes on top (an edit beats aggregation until
set back to None). A *snapshot* — the last aggregated profile, one metadata row — lets
a prompt read the profile with one lookup instead of an aggregation.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

from ...checks import check_label
from ...errors import ValidationError
from ...stores.base import ItemStore, MetaStore, ProfileVersion
from ...types import Filters, Scope, check_text, utcnow
from .profile import Profile, aggregate

__all__ = ["Profiles", "PROFILE_FIELDS"]

PROFILE_FIELDS = ("name", "role", "goals", "current", "preferences", "language")
_LISTS = ("goals", "current", "preferences")


class _ProfileBackend(ItemStore, MetaStore, Protocol):
    """What profiles need of a store."""


def _snapshot_key(scope: Scope) -> str:
    # hashed, so the key itself names no user once forget_user blanked the value
    digest = hashlib.sha256(f"{scope.namespace}\x00{scope.user_id}".encode()).hexdigest()[:24]
    return f"profile-snapshot:{digest}"


def _check(changes: Mapping[str, Any]) -> None:
    unknown = set(changes) - set(PROFILE_FIELDS)
    if unknown:
        raise ValidationError(f"cannot edit profile field(s) {sorted(unknown)}; fields: "
                              f"{', '.join(PROFILE_FIELDS)}")
    for key, value in changes.items():
        if key in _LISTS:
            if value is not None and (not isinstance(value, (list, tuple)) or not all(
                    isinstance(v, str) for v in value)):
                raise ValidationError(f"profile {key} must be a list of strings")
            for v in value or ():
                _text(v, f"profile {key}")
        elif value is not None and not isinstance(value, str):
            raise ValidationError(f"profile {key} must be a string or None")
        elif value is not None:
            _text(value, f"profile {key}")


def _text(value: str, what: str) -> None:
    check_text(value, what)
    if not value.strip():  # a blank value would show as an empty line; None clears a field
        raise ValidationError(f"{what} is empty; pass None to go back to what was learned")


class Profiles:
    """Profiles of the users of one store.

    The aggregation of a user's items is kept in memory (``keep`` users, least recently
    used out first) while the store's :meth:`~memstrata.stores.base.ItemStore.items_state`
    of the user is the same: ``context()`` reads the profile on every call, and reading
    10,000 items took 1.5 s of a 1.6 s context call (docs/benchmarks.md). One
    aggregation of a user runs at a time: concurrent calls after a change wait for it
    and read what it kept, instead of each reading every item again."""

    def __init__(self, store: _ProfileBackend, keep: int = 1024) -> None:
        self.store = store
        self.keep = keep
        self._aggregated: OrderedDict[Scope, tuple[tuple[int, int, int], Profile]] = OrderedDict()
        self._lock = threading.Lock()
        self._building = [threading.Lock() for _ in range(64)]  # by user, striped

    def _kept(self, scope: Scope, state: tuple[int, int, int]) -> Profile | None:
        with self._lock:
            kept = self._aggregated.get(scope)
            if kept is None or kept[0] != state:
                return None
            self._aggregated.move_to_end(scope)
            return kept[1]

    def _base(self, scope: Scope) -> Profile:
        """The profile aggregated from the user's items, from memory while they are unchanged."""
        state = self.store.items_state(scope)  # read before the items: a write after it is seen next time
        if (kept := self._kept(scope, state)) is not None:
            return kept
        with self._building[hash(scope) % len(self._building)]:
            state = self.store.items_state(scope)
            if (kept := self._kept(scope, state)) is not None:  # another call just aggregated
                return kept
            return self._aggregate(scope, state)

    def _aggregate(self, scope: Scope, state: tuple[int, int, int]) -> Profile:
        base = aggregate(self.store.list_items(scope, Filters(), limit=10**6))
        with self._lock:
            self._aggregated[scope] = (state, base)
            self._aggregated.move_to_end(scope)
            while len(self._aggregated) > self.keep:
                self._aggregated.popitem(last=False)
        return base

    def profile(self, scope: Scope) -> Profile:
        """Aggregated from active items, then the latest manual overrides on top."""
        base = self._base(scope)
        versions = self.store.profile_versions(scope)
        if not versions:
            return base
        changes = {k: (tuple(v) if isinstance(v, (list, tuple)) else v)
                   for k, v in versions[-1].data.items() if k in PROFILE_FIELDS}
        return Profile(**{**{k: getattr(base, k) for k in PROFILE_FIELDS}, **changes},
                       people=base.people, sources=base.sources)

    def update(self, scope: Scope, changes: Mapping[str, Any], *, actor: str = "api",
               reason: str = "update_profile() call") -> Profile:
        """Edit fields as a new version of the overrides; a None value goes back to the
        aggregated one."""
        _check(changes)
        check_label(actor, "actor")
        check_label(reason, "reason")
        versions = self.store.profile_versions(scope)
        data = dict(versions[-1].data) if versions else {}
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = list(value) if key in _LISTS else value
        self.store.add_profile_version(scope, ProfileVersion(len(versions) + 1, data, actor,
                                                             reason, utcnow()))
        return self.refresh_if_cached(scope) or self.profile(scope)

    def refresh(self, scope: Scope) -> Profile:
        """Store the current profile as the user's snapshot (latest only, no history)."""
        profile = self.profile(scope)
        self.store.set_meta(_snapshot_key(scope), json.dumps(profile.to_dict(), ensure_ascii=False))
        return profile

    def refresh_if_cached(self, scope: Scope) -> Profile | None:
        """Refresh the snapshot when the user has one (it must not keep what changed or
        was forgotten); None when there is none."""
        if self.store.get_meta(_snapshot_key(scope)) in (None, "{}"):
            return None
        return self.refresh(scope)

    def cached(self, scope: Scope) -> Profile | None:
        """The snapshot the last refresh stored (None when there is none): one key read
        instead of an aggregation over every item, for per-prompt injection."""
        raw = self.store.get_meta(_snapshot_key(scope))
        if not raw or raw == "{}":
            return None
        fields: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v)
                                  for k, v in json.loads(raw).items()}
        return Profile(**fields)

    def blank(self, scope: Scope) -> bool:
        """Blank the user's snapshot (forget_user): the key stays, naming nobody. True
        when there was one."""
        if self.store.get_meta(_snapshot_key(scope)) is None:
            return False
        self.store.set_meta(_snapshot_key(scope), "{}")
        return True

"""The progressive summary's steps v1…vN are kept (SQLite and PostgreSQL), shown by the
inspector with the messages each step folded in, and forgotten with the turns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401

from memstrata import Memory
from memstrata.stores import open_store
from memstrata.stores.base import SummaryVersion
from memstrata.types import Scope

T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    return request.getfixturevalue("pg_url")


def test_summary_versions_are_stored_replaced_and_forgotten(url):
    lin, max_ = Scope("lin", "acme"), Scope("max", "acme")
    with open_store(url) as store:
        for scope in (lin, max_):
            store.append_messages(scope, "s1", [])
            for v in (1, 2):
                store.add_summary_version(scope, "s1", SummaryVersion(v, 10 * (v - 1), 10 * v,
                                                                      {"goal": f"{scope.user_id} v{v}"}, T0))
        store.add_summary_version(lin, "s1", SummaryVersion(2, 10, 12, {"goal": "lin v2 again"}, T0))
        got = store.summary_versions(lin, "s1")
        assert [(v.version, v.range_start, v.range_end, v.summary["goal"]) for v in got] == [
            (1, 0, 10, "lin v1"), (2, 10, 12, "lin v2 again")]
        assert got[0].at == T0
        store.delete_summary_versions(lin, "s1")
        assert store.summary_versions(lin, "s1") == [] and len(store.summary_versions(max_, "s1")) == 2
        store.delete_user(max_, messages=False)  # the sessions stay, and their summaries
        assert len(store.summary_versions(max_, "s1")) == 2
        store.delete_user(max_, messages=True)
        assert store.summary_versions(max_, "s1") == []


def test_each_summary_step_is_kept_with_its_range(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", extraction="off") as memory:
        handle = memory.user("lin")
        for batch in range(3):
            handle.add([{"role": "user", "content": f"I want to plan trip {batch}. I decided on train {batch}."}
                        for _ in range(6)], "s1")
        # every_n=10: the second batch makes the first step (12 pending), archiving the last
        assert [(v.version, v.range_start, v.range_end) for v in
                memory.store.summary_versions(handle.scope, "s1")] == [(1, 0, 12)]
        state = handle.archive_session("s1")
        versions = memory.store.summary_versions(handle.scope, "s1")
        assert [(v.version, v.range_start, v.range_end) for v in versions] == [(1, 0, 12), (2, 12, 18)]
        assert versions[-1].summary == state.summary.to_dict() and state.message_range_end == 18
        assert versions[0].summary["version"] == 1 and versions[0].summary != versions[1].summary

"""An import is one transaction: a failed one stores nothing, so a retry never stores a
session twice."""

from __future__ import annotations

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.errors import ValidationError


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgres" \
        else f"sqlite:///{tmp_path / 'm.db'}"


def test_a_failed_import_stores_nothing_and_a_retry_stores_each_session_once(url):
    good = [{"session_id": f"s{i}", "messages": [{"role": "user", "content": f"我在第{i}天学了 Go"}]}
            for i in range(3)]
    bad = {"session_id": "s3", "messages": [{"role": "user", "content": "ok"},
                                            {"role": "robot", "content": "??"}]}
    with Memory(url, embedder="hash:64", worker="off") as m:
        lin = m.user("lin")
        with pytest.raises(ValidationError, match="robot"):
            lin.import_conversation([*good, bad], progress=False)
        assert lin.sessions() == [] and all(lin.messages(f"s{i}") == [] for i in range(4))
        lin.import_conversation([*good, {**bad, "messages": bad["messages"][:1]}], progress=False)
        assert [len(lin.messages(f"s{i}")) for i in range(4)] == [1, 1, 1, 1]
        assert lin.search("Go", mode="lexical")

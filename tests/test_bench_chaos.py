"""``memstrata bench chaos`` in small: the service on PostgreSQL + a private
redis-server under a few clients for ~10 s, Redis restarted empty once and the service
SIGKILLed and restarted once. Correctness only: every acknowledged add is read back and
exported, no forgotten word comes back. (The 32-client, 2-minute run: docs/benchmarks.md.)
"""

from __future__ import annotations

import shutil

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata.bench.chaos import render, run_chaos

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


def test_acknowledged_adds_survive_and_forgotten_words_stay_gone(pg_url: str) -> None:
    report = run_chaos(pg_url, clients=4, duration=10, users=2, embedder="hash:256", redis_down_s=1)
    print(render(report))
    checks = report["checks"]
    # both faults happened, during the load
    assert set(report["events_s"]) == {"redis_killed", "redis_back", "service_killed",
                                       "service_back", "load_end"}
    assert checks["acknowledged_adds"] > 0 and checks["planted"] > 0
    assert checks["read_back"] == checks["acknowledged_adds"]
    assert checks["in_export"] == checks["acknowledged_adds"]
    assert checks["back_in_export"] == checks["back_in_search"] == checks["back_in_session_log"] == 0
    # the only failures are the ones the faults explain: no refusal of a valid call (4xx)
    assert not [f for f in report["failures"] if f["kind"].startswith("4")], report["failures"]

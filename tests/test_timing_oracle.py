"""No cache shared across tenants that a timing can read.

The attack: with the default embedder (e5) a text already in the embedding cache costs a
few milliseconds instead of tens, so a key that may write could test guesses against
every other tenant's stored text ("User's bank pin is 4800" … "4899": the one that
answers fast is the victim's), and a key that may search could test guesses against the
questions other tenants asked (the query-vector cache). Both caches are now partitioned
by tenant and user.

The test runs the attack through the service and compares *distributions*, never one
timing: the AUC of "a guess that another tenant stored answers faster than one nobody
stored" over 20 × 20 pairs, interleaved so that load hits both alike. With no signal the
AUC is 0.5 ± 0.09; the attack today has 1.0. The same measurement inside one user —
whose own texts are still cached — must separate hits from misses (the control: it
shows the measurement would see the oracle if it were there).
"""

from __future__ import annotations

import random
import time

import httpx
from service_fixture import LiveServer

N = 20
# searches by meaning only, one hit: the query's embedding is most of what a search costs
DENSE = {"mode": "dense", "k": 1}
# long enough that embedding it (a cache miss) costs far more than the request around it,
# as a real turn does; the guesses differ only in their number
PIN = ("User's bank pin is {n}; the card was issued by the savings bank on the corner of "
       "the old market square, where the user has kept an account since moving to the city "
       "for the new job at the hospital, and the statements arrive by post every month.")
ASK = ("what was the code of the locker {n} at the swimming pool near the station, the one "
       "I rented for the summer while the gym downstairs was being renovated, and which my "
       "sister borrowed twice when she came to visit us in August with her two children?")


def _auc(fast: list[float], slow: list[float]) -> float:
    """P(a sample of ``fast`` is below one of ``slow``), ties counting half."""
    wins = sum((f < s) + 0.5 * (f == s) for f in fast for s in slow)
    return wins / (len(fast) * len(slow))


def _timed(client: httpx.Client, path: str, body: dict[str, object]) -> float:
    started = time.perf_counter()
    r = client.post(path, json=body)
    elapsed = time.perf_counter() - started
    assert r.status_code in (200, 201), r.text
    return elapsed


def _race(client: httpx.Client, path: str, key: str, guesses: list[tuple[str, str]],
          **extra: object) -> tuple[list[float], list[float]]:
    """Time each pair (a stored guess, an unstored one) back to back, in random order."""
    stored: list[float] = []
    fresh: list[float] = []
    rng = random.Random(29)
    for hit, miss in guesses:
        pair = [(hit, stored), (miss, fresh)]
        rng.shuffle(pair)
        for text, out in pair:
            out.append(_timed(client, path, {key: text, **extra}))
    return stored, fresh


def test_timing_tells_no_tenant_what_another_stored_or_asked(e5_memory_factory):
    m = e5_memory_factory("oracle")
    numbers = random.Random(17).sample(range(1000, 10000), 4 * N)
    pins = [PIN.format(n=n) for n in numbers]
    asks = [ASK.format(n=n) for n in numbers]
    with m, LiveServer(m) as live:
        victim = live.client(live.key("tenant-b", "app"))
        attacker = live.client(live.key("tenant-a", "app"))
        for pin, ask in zip(pins[:2 * N], asks[:2 * N]):  # the victim stores and asks
            assert victim.post("/v1/users/bob/items", json={"content": pin}).status_code in (200, 201)
            assert victim.post("/v1/users/bob/search", json={"query": ask, **DENSE}).status_code == 200
        for client, user in ((attacker, "mallory"), (victim, "bob")):  # warm both paths
            for i in range(3):
                _timed(client, f"/v1/users/{user}/items", {"content": f"warm-up {i} {user}"})
                _timed(client, f"/v1/users/{user}/search", {"query": f"warm-up {i} {user}", **DENSE})

        # the attack: the other tenant's stored texts and questions against fresh ones
        write_hit, write_miss = _race(attacker, "/v1/users/mallory/items", "content",
                                      list(zip(pins[:N], pins[2 * N:3 * N])))
        ask_hit, ask_miss = _race(attacker, "/v1/users/mallory/search", "query",
                                  list(zip(asks[:N], asks[2 * N:3 * N])), **DENSE)
        # the control: the victim's own cache still works, and this measurement sees it
        own_hit, own_miss = _race(victim, "/v1/users/bob/items", "content",
                                  list(zip(pins[N:2 * N], pins[3 * N:])))
        own_ask_hit, own_ask_miss = _race(victim, "/v1/users/bob/search", "query",
                                          list(zip(asks[N:2 * N], asks[3 * N:])), **DENSE)

    report = {"write oracle": _auc(write_hit, write_miss), "search oracle": _auc(ask_hit, ask_miss),
              "own writes": _auc(own_hit, own_miss), "own searches": _auc(own_ask_hit, own_ask_miss)}
    assert report["own writes"] >= 0.85 and report["own searches"] >= 0.85, report
    assert report["write oracle"] <= 0.75 and report["search oracle"] <= 0.75, report

"""Every write of every process is visible to every other process's search.

Real processes (``spawn``), each holding one store open for the whole test, as a
service with separate worker processes does. The parent drives them through pipes so
the interleavings are exact: a process writes, another writes, the first searches —
the order in which an in-process index can stamp itself with a generation that
includes a write it never applied. Then random interleavings of writes, rewrites and
deletes, every search checked against a model of what is committed.
"""

from __future__ import annotations

import multiprocessing as mp
import random
from datetime import UTC, datetime

import numpy as np
import pytest

from memstrata.stores import open_store
from memstrata.stores.base import IndexDoc
from memstrata.types import Filters, Layer, Scope

from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

SCOPE = Scope("sync-user", "sync")
DIM = 32


def _vector(seed: int) -> np.ndarray:
    vec = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vec / np.linalg.norm(vec)


def _doc(doc_id: str, word: str, seed: int) -> IndexDoc:
    return IndexDoc(doc_id, Layer.SEMANTIC, f"note {word}", word, "",
                    datetime(2026, 1, 1, tzinfo=UTC), kind="fact", status="active",
                    importance=0.5, vector=_vector(seed))


#: thresholds small enough that 150 steps snapshot, fold, reload and prune many times
TINY = {"snapshot_min": 6, "snapshot_every": 5, "snapshot_ratio": 0.1, "fold_min": 3,
        "fold_ratio": 0.05, "reload_ratio": 0.3, "log_keep": 12}


def _serve(url: str, conn, tiny: bool) -> None:  # runs in a child process
    if tiny:
        from memstrata.stores.sqlite.index import SQLiteIndex

        for name, value in TINY.items():
            setattr(SQLiteIndex, name, value)
    store = open_store(url)
    try:
        while True:
            op, *args = conn.recv()
            if op == "stop":
                break
            if op == "write":
                doc_id, word, seed = args
                store.index(SCOPE, [_doc(doc_id, word, seed)])
                conn.send(None)
            elif op == "delete":
                store.delete_messages(SCOPE, [args[0]])
                conn.send(None)
            elif op == "forget":
                store.delete_user(SCOPE)
                conn.send(None)
            elif op == "search":
                word, seed = args
                lexical = [d for d, _ in store.lexical_search(SCOPE, word, Filters(), 10)]
                dense = store.vector_search(SCOPE, _vector(seed), Filters(), 1)
                conn.send((lexical, [d for d, cos in dense if cos > 0.999]))
    finally:
        store.close()


class _Fleet:
    """``n`` child processes, each with the store open, answering one command at a time."""

    def __init__(self, url: str, n: int, tiny: bool = False) -> None:
        ctx = mp.get_context("spawn")
        self.pipes, self.procs = [], []
        for _ in range(n):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(url, child, tiny), daemon=True)
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)

    def ask(self, i: int, *command: object) -> object:
        self.pipes[i].send(command)
        if not self.pipes[i].poll(60):
            raise AssertionError(f"process {i} did not answer {command[0]}")
        return self.pipes[i].recv()

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(("stop",))
        for proc in self.procs:
            proc.join(30)
        assert all(p.exitcode == 0 for p in self.procs)


@pytest.fixture(params=["sqlite", "sqlite-tiny", "postgres"])
def backend(request, tmp_path):
    """(url, tiny): tiny thresholds make the SQLite mirrors snapshot, fold, reload and
    prune their log all the time."""
    if request.param.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'sync.db'}", request.param == "sqlite-tiny"
    return request.getfixturevalue("pg_url"), False


@pytest.mark.slow
def test_every_write_of_every_process_is_visible_to_every_other_process(backend):
    url, tiny = backend
    open_store(url).close()  # migrated once, before the children race to open it
    fleet = _Fleet(url, 3, tiny)
    try:
        live: dict[str, tuple[str, int]] = {}  # doc id -> (its word, its vector seed)
        gone: dict[str, tuple[str, int]] = {}

        def check(i: int, doc_id: str) -> None:
            word, seed = live.get(doc_id) or gone[doc_id]
            lexical, dense = fleet.ask(i, "search", word, seed)
            if doc_id in live:
                assert doc_id in lexical, f"process {i}: {doc_id} ({word}) not found lexically"
                assert dense == [doc_id], f"process {i}: {doc_id} not found by its vector"
            else:
                assert doc_id not in lexical and doc_id not in dense, f"process {i} still finds {doc_id}"

        for i in range(3):  # every process has loaded its index
            assert fleet.ask(i, "search", "nothing", 0) == ([], [])
        # the interleaving of the bug: 0 writes, 1 writes, 0 searches for 1's write
        live["d-a"], live["d-b"] = ("alphaword", 1), ("betaword", 2)
        fleet.ask(0, "write", "d-a", "alphaword", 1)
        fleet.ask(1, "write", "d-b", "betaword", 2)
        for i in range(3):
            check(i, "d-b")
            check(i, "d-a")

        rng = random.Random(13)
        for step in range(150):
            i = rng.randrange(3)
            roll = rng.random()
            if roll < 0.45 or not live:  # a new document
                doc_id, word, seed = f"d{step}", f"w{step}x", 100 + step
                fleet.ask(i, "write", doc_id, word, seed)
                live[doc_id] = (word, seed)
            elif roll < 0.65:  # rewrite a document: its old word must stop finding it
                doc_id = rng.choice(sorted(live))
                word, seed = f"r{step}x", 1000 + step
                fleet.ask(i, "write", doc_id, word, seed)
                gone[f"{doc_id}@old"] = live[doc_id]
                live[doc_id] = (word, seed)
                old_word, old_seed = gone[f"{doc_id}@old"]
                lexical, dense = fleet.ask(rng.randrange(3), "search", old_word, old_seed)
                assert doc_id not in lexical and doc_id not in dense
            else:  # delete
                doc_id = rng.choice(sorted(live))
                fleet.ask(i, "delete", doc_id)
                gone[doc_id] = live.pop(doc_id)
            # another process searches for what was just written or deleted, and for a
            # random earlier document
            other = (i + 1 + rng.randrange(2)) % 3
            check(other, doc_id)
            check(rng.randrange(3), rng.choice(sorted(live | {k: v for k, v in gone.items()
                                                              if "@" not in k})))
        for i in range(3):  # in the end every process sees exactly the committed documents
            for doc_id in sorted(live):
                check(i, doc_id)
    finally:
        fleet.close()
    if tiny:  # the paths the tiny thresholds are for did run
        store = open_store(url)
        floor, snapshot_rows = store._x("SELECT floor, snapshot_rows FROM index_state WHERE "
                                        "namespace=? AND user_id=?",
                                        (SCOPE.namespace, SCOPE.user_id)).fetchone()
        store.close()
        assert floor > 0 and snapshot_rows > 0


def test_a_forgotten_scope_written_again_is_seen_right_by_every_process(backend):
    """forget_user removes the scope's change log and state rows (they name the user);
    the other processes' mirrors of it must still drop what was forgotten and apply
    what the user writes afterwards."""
    url, tiny = backend
    open_store(url).close()
    fleet = _Fleet(url, 3, tiny)
    try:
        for n in range(8):
            fleet.ask(n % 3, "write", f"old{n}", f"oldword{n}", 10 + n)
        for i in range(3):  # every process has the scope's mirror loaded
            assert fleet.ask(i, "search", "oldword7", 17) == (["old7"], ["old7"])
        fleet.ask(0, "forget")
        fleet.ask(1, "write", "new0", "newword0", 50)
        for i in range(3):
            assert fleet.ask(i, "search", "oldword7", 17) == ([], [])
            assert fleet.ask(i, "search", "newword0", 50) == (["new0"], ["new0"])
        fleet.ask(2, "write", "new1", "newword1", 51)
        for i in range(3):
            assert fleet.ask(i, "search", "newword1", 51) == (["new1"], ["new1"])
            assert fleet.ask(i, "search", "oldword3", 13) == ([], [])
    finally:
        fleet.close()

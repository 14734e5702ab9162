"""The agent-style benchmarks run end to end on real data (hash embedder: instant), and
their numbers are proportions."""

from __future__ import annotations


import pytest

from memstrata.bench.chat import chat_sessions, run_chat, statements_behind
from memstrata.bench.longmemeval import run_longmemeval
from memstrata.bench.madial import load_madial, parse_dialogue, run_madial
from memstrata.bench.memdaily import load_memdaily

from bench_data import DATA
needs_data = pytest.mark.skipif(not (DATA / "memdaily").is_dir(), reason="bench data not here")


@needs_data
def test_memdaily_chat_sessions_interleave_assistant_replies():
    _, trajectory = load_memdaily(DATA / "memdaily")[0]
    sessions = chat_sessions(trajectory, seed=1)
    turns = [m for s in sessions for m in s["messages"]]
    assert len(turns) == 2 * len(trajectory["message_list"])
    assert [m["role"] for m in turns[:2]] == ["user", "assistant"]
    assert chat_sessions(trajectory, seed=1) == sessions  # seeded: the same chat every run


@needs_data
def test_bench_chat_madial_and_longmemeval_run_end_to_end():
    chat = run_chat(DATA / "memdaily", limit=2, embedder="hash:256", progress=False)
    assert chat["questions"] > 0 and set(chat["systems"]) == {"memstrata", "bm25", "dense"}
    for key in ("context_hit", "weak_share"):
        assert 0.0 <= chat[key] <= 1.0
    assert chat["memory_tokens_per_query"] > 0
    memories, dialogues = load_madial(DATA / "madial", "en")
    assert len(memories) == 76 and parse_dialogue(dialogues[0]["dialogue"])[0][0] == "user"
    madial = run_madial(DATA / "madial", ks=[5], embedder="hash:256", limit=3)
    assert madial["questions"] == 6 and 0.0 <= madial["systems"]["memstrata"]["overall"]["recall@5"] <= 1
    lme = run_longmemeval(DATA / "longmemeval" / "longmemeval_s_dev60.json", ks=[5], limit=1,
                          embedder="hash:256", progress=False)
    assert lme["questions"] == 1
    assert {"turn_recall@5", "session_any@5", "session_all@5"} <= set(lme["systems"]["memstrata"]["overall"])


def test_the_first_statement_of_a_trajectory_counts_as_evidence():
    """mid 0 is a statement like any other (a truthiness test once dropped it: MemDaily-chat
    evidence in the top 5 read 0.625 instead of 0.9)."""
    mid_of = {"t0": 0, "t1": 1, "a0": None}
    sources = {"item": {"t0", "a0"}}
    assert statements_behind(["t0"], mid_of, sources) == {"0"}
    assert statements_behind(["item", "t1"], mid_of, sources) == {"0", "1"}
    assert statements_behind(["a0", "unknown"], mid_of, sources) == set()


@needs_data
def test_longmemeval_keeps_its_import_and_vectors_for_the_next_run(tmp_path):
    data = DATA / "longmemeval" / "longmemeval_s_dev60.json"
    store, cache = f"sqlite:///{tmp_path / 'lme.db'}", tmp_path / "vectors.db"
    first = run_longmemeval(data, ks=[5], limit=1, embedder="hash:256", progress=False,
                            store=store, embedding_cache=cache)
    assert first["embedding_cache"]["misses"] > 400  # a haystack of ~500 turns, embedded once
    again = run_longmemeval(data, ks=[5], limit=1, embedder="hash:256", progress=False,
                            store=store, embedding_cache=cache)
    assert again["embedding_cache"]["misses"] == 0  # not imported again: only the question
    assert again["systems"] == first["systems"] and again["per_question"] == first["per_question"]
    import json

    from memstrata import Memory
    q = next(x for x in json.loads(data.read_text()) if not x["question_id"].endswith("_abs"))
    cut_short = f"sqlite:///{tmp_path / 'cut.db'}"
    with Memory(cut_short, embedder="hash:256") as memory:  # an import stopped after a session
        memory.import_conversation([{"session_id": q["haystack_session_ids"][0], "messages": [
            {"role": t["role"], "content": t["content"]} for t in q["haystack_sessions"][0]]}],
            f"lme-{q['question_id']}", progress=False)
    redone = run_longmemeval(data, ks=[5], limit=1, embedder="hash:256", progress=False,
                             store=cut_short, embedding_cache=cache)
    assert redone["systems"] == first["systems"]  # imported again in full
    with Memory(cut_short, embedder="hash:256") as memory:
        scope = memory.user(f"lme-{q['question_id']}").scope
        assert len(memory.store.list_sessions(scope)) == len(q["haystack_sessions"])

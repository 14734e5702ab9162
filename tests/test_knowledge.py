"""The knowledge base through the public API, on real SQLite files and PostgreSQL.

Ingestion of a folder, re-ingestion of a changed document, deletion that leaves no
bytes, duplicates, shared and private scopes, filters, neighbour expansion, usage
counting and stale chunks, the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory, SearchRequest
from memstrata.cli.main import cli
from memstrata.errors import NotFoundError, ValidationError

ROUTER = """# Router guide

## Reset

Hold the reset button for ten seconds. The lights blink twice, then the router restarts
with its factory settings.

## Wi-Fi

The default Wi-Fi password is printed on the label under the router.
"""

RETURNS = """# 退货政策

## 时限

自收货之日起七天内可以无理由退货。商品需保持完好，包装齐全。

## 运费

质量问题由我们承担运费；非质量问题由买家承担运费。
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "zh").mkdir(parents=True)
    (docs / "router.md").write_text(ROUTER)
    (docs / "zh" / "returns.md").write_text(RETURNS)
    (docs / "notes.bin").write_bytes(b"\x00\x01")  # not a document: skipped
    return docs


@pytest.fixture(params=["sqlite", "postgres"])
def any_memory(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with Memory(url, embedder="hash:256", worker="off") as m:
        yield m


def test_ingest_search_reingest_and_remove_on_both_backends(any_memory, folder) -> None:
    kb = any_memory.kb
    results = kb.add(folder, tags=["manual"], progress=False)
    assert [(r.doc_id, r.status, r.chunks) for r in results] == [("router.md", "added", 2),
                                                               ("zh/returns.md", "added", 2)]
    [hit] = kb.search("how do I reset the router", k=1)
    assert hit.heading_path == ("Router guide", "Reset") and hit.doc_id == "router.md"
    assert hit.label == "Router guide › Reset" and "ten seconds" in hit.text
    zh = kb.search("退货运费谁承担", k=1)[0]
    assert zh.heading_path == ("退货政策", "运费") and zh.chunk.tags == ("manual",)
    assert kb.add(folder, tags=["manual"], progress=False)[0].status == "unchanged"

    before = {c.heading_path: c for c in kb.chunks("router.md")}
    (folder / "router.md").write_text(ROUTER.replace("ten seconds", "fifteen seconds"))
    [changed, same] = kb.add(folder, tags=["manual"], progress=False)
    assert (changed.status, changed.added, changed.removed, changed.kept) == ("updated", 1, 1, 1)
    assert same.status == "unchanged"
    after = {c.heading_path: c for c in kb.chunks("router.md")}
    assert after[("Router guide", "Wi-Fi")].id == before[("Router guide", "Wi-Fi")].id
    assert after[("Router guide", "Reset")].id != before[("Router guide", "Reset")].id
    assert "fifteen" in kb.search("reset button", k=1)[0].text
    assert all("ten seconds" not in h.text for h in kb.search("ten seconds", k=5, mode="lexical"))

    assert kb.reindex(progress=False) == 4
    assert kb.search("how do I reset the router", k=1)[0].doc_id == "router.md"
    lin = any_memory.user("lin")
    lin.kb.add_text("Lin keeps the spare router in the attic.", doc_id="lin-note", private=True)
    assert "lin-note" in {h.doc_id for h in lin.kb.search("spare router attic", k=5)}
    any_memory.forget_user("lin")  # the private knowledge base goes with the user
    assert lin.kb.list(private=True) == []
    assert "lin-note" not in {h.doc_id for h in lin.kb.search("spare router attic", k=5)}

    assert kb.remove("router.md") == 2
    assert [d.id for d in kb.list()] == ["zh/returns.md"]
    assert all(h.doc_id != "router.md" for h in kb.search("router reset", k=5))
    with pytest.raises(NotFoundError):
        kb.remove("router.md")


def test_an_empty_file_in_a_folder_is_skipped_and_the_rest_ingested(memory, folder) -> None:
    (folder / "blank.md").write_text("  \n\n")
    results = {r.doc_id: r.status for r in memory.kb.add(folder, progress=False)}
    assert results == {"blank.md": "empty", "router.md": "added", "zh/returns.md": "added"}
    assert [d.id for d in memory.kb.list()] == ["router.md", "zh/returns.md"]
    (folder / "router.md").write_text("")  # emptied: skipped, the stored version stays
    results = {r.doc_id: r.status for r in memory.kb.add(folder, progress=False)}
    assert results["router.md"] == "empty" and len(memory.kb.chunks("router.md")) == 2
    with pytest.raises(ValidationError, match="no text"):  # a single empty file is an error
        memory.kb.add(folder / "blank.md")


def test_deleting_a_document_leaves_no_bytes(tmp_path) -> None:
    path = tmp_path / "forget.db"
    with Memory(f"sqlite:///{path}", embedder="hash:256", worker="off") as memory:
        kb = memory.kb
        kb.add_text("# Secret\n\nThe vault code word is Zanzibarite, kept in the Quokkahall.",
                    doc_id="secret.md")
        kb.add_text("# Public\n\nOpening hours are nine to five on weekdays.", doc_id="public.md")
        lin = memory.user("lin").kb
        lin.add_text("My private note mentions Wombatorium twice: Wombatorium.", doc_id="mine",
                     private=True)
        context = memory.user("lin").kb.search("vault code word", k=1)
        memory.knowledge_base.recalled(memory.user("lin").scope, "s1",
                                       [(context[0].kb, context[0].id)], "vault code word")
        assert memory.store._x("SELECT COUNT(*) FROM kb_recalls").fetchone()[0] == 1
        kb.remove("secret.md")
        memory.forget_user("lin")  # the private knowledge base goes with the user
        memory.compact()
        for table in ("kb_documents", "kb_chunks", "docs", "kb_recalls"):
            rows = memory.store._x(f"SELECT * FROM {table}").fetchall()
            assert all("zanzibarite" not in json.dumps(list(r), default=str).lower() for r in rows)
        assert memory.store._x("SELECT COUNT(*) FROM kb_recalls").fetchone()[0] == 0
        assert kb.search("opening hours", k=1)[0].doc_id == "public.md"
    for suffix in ("", "-wal"):
        file = Path(str(path) + suffix)
        if file.exists():
            data = file.read_bytes().lower()
            for word in (b"zanzibarite", b"quokkahall", b"wombatorium"):
                assert word not in data, (suffix, word)
            assert b"weekdays" in data or suffix


def test_duplicates_are_detected_and_skipped_unless_kept(memory) -> None:
    kb = memory.kb
    text = " ".join(f"Clause {i}: the tenant pays the {w} bill before the fifth day of each month."
                    for i, w in enumerate(["water", "power", "gas", "internet", "cleaning", "parking"]))
    assert kb.add_text(text, doc_id="lease-a").status == "added"
    dup = kb.add_text("  " + text + "\n", doc_id="lease-b")
    assert (dup.status, dup.duplicate_of) == ("duplicate", "lease-a")
    near = kb.add_text(text.replace("fifth", "sixth", 1), doc_id="lease-c")
    assert near.status == "near_duplicate" and near.duplicate_of == "lease-a" and near.similarity >= 0.85
    assert kb.add_text(text, doc_id="lease-d", duplicates="keep").status == "added"
    # the kept copy's chunks duplicate stored ones: stored, not indexed twice
    chunks = kb.chunks("lease-d")
    assert chunks and all(c.duplicate_of for c in chunks)
    assert len(kb.search("tenant water bill", k=10)) == len(kb.chunks("lease-a"))
    kb.remove("lease-a")  # the copy takes the original's place in the index
    assert {h.doc_id for h in kb.search("tenant water bill", k=10)} == {"lease-d"}
    assert [d.id for d in kb.list()] == ["lease-d"]


def test_shared_and_private_scopes_and_filters(memory) -> None:
    memory.kb.add_text(ROUTER, doc_id="router.md", source="manuals/router.md", tags=["hardware", "en"])
    memory.kb.add_text(RETURNS, doc_id="returns.md", source="policies/returns.md", tags=["policy", "zh"])
    memory.knowledge(agent_id="other").add_text("The router of the other agent is blue.", doc_id="x")
    lin, kai = memory.user("lin"), memory.user("kai")
    lin.kb.add_text("Lin's router sits behind the sofa, reset it with a pin.", doc_id="lin-note",
                    private=True)
    assert {h.doc_id for h in lin.kb.search("router reset", k=10)} == {"router.md", "lin-note",
                                                                     "returns.md"}
    assert "lin-note" not in {h.doc_id for h in kai.kb.search("router reset", k=10)}
    assert "x" not in {h.doc_id for h in lin.kb.search("router", k=10)}
    private = [h for h in lin.kb.search("sofa pin", k=10) if h.doc_id == "lin-note"]
    assert private and not private[0].shared and lin.kb.list(private=True)[0].owner == "lin"
    assert {h.doc_id for h in lin.kb.search("router", k=10, tags=["hardware"])} == {"router.md"}
    assert {h.doc_id for h in lin.kb.search("运费", k=10, sources=["policies/returns.md"])} == {"returns.md"}
    assert {h.doc_id for h in lin.kb.search("router", k=10, documents=["lin-note"])} == {"lin-note"}
    assert lin.kb.search("router", k=10, sources=["nowhere"]) == []
    assert [d.id for d in memory.kb.list(tags=["policy"])] == ["returns.md"]
    docs = lin.kb.search_documents("router reset button", k=2)
    assert docs[0].document.id in {"router.md", "lin-note"} and docs[0].hits
    with pytest.raises(ValidationError, match="private"):
        memory.kb.add_text("x", doc_id="y", private=True)
    with pytest.raises(ValidationError, match="no text"):
        memory.kb.add_text("   \n\n", doc_id="empty")
    with pytest.raises(ValidationError, match="format"):
        memory.kb.add_text("x", doc_id="y", format="docx")
    with pytest.raises(NotFoundError):
        memory.kb.add("/no/such/folder")
    with pytest.raises(ValidationError, match="doc_id"):  # an empty id is not "no id"
        memory.kb.add(__file__, doc_id="")


def test_a_hit_cut_mid_paragraph_comes_with_its_neighbour(memory) -> None:
    para = " ".join(f"Step {i}: turn the dial {i} clicks to the right." for i in range(40))
    memory.kb.add_text(para + "\n\nThe safe opens when the last step is done.", doc_id="safe")
    chunks = memory.kb.chunks("safe")
    assert chunks[0].joins_next and len(chunks) >= 3
    [hit] = memory.kb.search("Step 0: turn the dial 0 clicks", k=1, mode="lexical")
    assert hit.id == chunks[0].id and hit.expanded == (chunks[1].id,)
    assert hit.text == chunks[0].text + "\n" + chunks[1].text
    [plain] = memory.kb.search("Step 0: turn the dial 0 clicks", k=1, mode="lexical", expand=False)
    assert plain.text == chunks[0].text and plain.expanded == ()


def test_usage_is_counted_from_the_reply_and_stale_chunks_sink(memory) -> None:
    kb = memory.kb
    kb.add_text("# Warranty\n\nThe warranty lasts 24 months from the date of purchase and covers "
                "parts and labour.", doc_id="warranty")
    kb.add_text("# Shipping\n\nParcels ship within two working days by tracked courier.", doc_id="ship")
    lin = memory.user("lin")
    warranty = kb.chunks("warranty")[0]
    shipping = kb.chunks("ship")[0]
    # five different exchanges: an identical add to the same session is not stored twice
    for question in ("How long is the warranty?", "What does the warranty cover?",
                     "Is the warranty still valid after a year?", "保修期多长？",
                     "Does the warranty include labour?"):
        memory.knowledge_base.recalled(lin.scope, "s1", [(kb.shared_scope, warranty.id),
                                                         (kb.shared_scope, shipping.id)],
                                       "how long is the warranty?")
        lin.add([{"role": "user", "content": question},
                 {"role": "assistant", "content": "It lasts 24 months from purchase, parts and "
                                                  "labour included."}], session_id="s1")
    counts = {c.doc_id: (c.recalled, c.used) for c in kb.chunks("warranty") + kb.chunks("ship")}
    assert counts == {"warranty": (5, 5), "ship": (5, 0)}
    assert [c.doc_id for c in kb.stale()] == ["ship"] and kb.stale(min_recalls=6) == []
    hits = {h.doc_id: h for h in kb.search("warranty shipping parcels", k=2)}
    assert hits["ship"].stale and hits["ship"].parts.boost == memory.settings.kb_stale_weight
    # a reply with no pending recall changes nothing; explicit marks count
    lin.add([{"role": "assistant", "content": "Parcels ship within two working days."}], "s1")
    assert kb.chunks("ship")[0].used == 0
    assert kb.mark_used([shipping.id, "kc_unknown"]) == 1
    assert kb.chunks("ship")[0].used == 1 and kb.stale() == []


def test_kb_cli_add_list_search_stale_remove(tmp_path, folder, monkeypatch) -> None:
    monkeypatch.setenv("MEMSTRATA_STORE", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash:256")
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    out = run("kb", "add", str(folder), "--tag", "manual")
    assert out.exit_code == 0 and "added" in out.output and "2 document(s)" in out.output
    out = run("kb", "list", "--json")
    assert [d["id"] for d in json.loads(out.output)] == ["router.md", "zh/returns.md"]
    out = run("kb", "search", "退货运费谁承担", "-k", "1")
    assert "退货政策 › 运费" in out.output and "doc=zh/returns.md" in out.output
    assert "router.md" in run("kb", "search", "--documents", "reset router").output
    # the label names the headings; the text after it does not repeat them
    assert "[Router guide › Reset] Hold the reset button" in run("kb", "search", "reset button").output
    assert run("kb", "stale").output.strip() == "no stale chunks"
    out = run("kb", "add", str(folder), "--private")
    assert out.exit_code == 2 and "--user" in out.output
    out = run("kb", "add", str(folder), "--user", "lin", "--private", "--json")
    assert out.exit_code == 0 and all(r["status"] == "added" for r in json.loads(out.output))
    assert "removed router.md (2 chunks)" in run("kb", "remove", "router.md").output
    out = run("kb", "remove", "router.md")
    assert out.exit_code == 1 and out.output.startswith("error: no document")
    for sub in ("add", "list", "search", "remove", "stale"):
        assert run("kb", sub, "--help").exit_code == 0


def test_context_fills_the_knowledge_quota_and_counts_recalls_and_uses(memory) -> None:
    memory.kb.add_text(ROUTER, doc_id="router.md", source="manuals/router.md")
    memory.kb.add_text(RETURNS, doc_id="returns.md")
    lin = memory.user("lin")
    question = [{"role": "user", "content": "How do I reset my router?"}]
    result = lin.context("s1", question, budget=2000)
    report = result.report
    knowledge = [m for m in result.messages if "<knowledge>" in (m.get("content") or "")]
    assert len(knowledge) == 1 and report.layers["knowledge"] > 0
    assert "[Router guide › Reset]" in knowledge[0]["content"] and "ten seconds" in knowledge[0]["content"]
    assert report.layers["knowledge"] <= report.quota_tokens["knowledge"]
    assert result.messages[-1] == question[0]
    reset = next(c for c in memory.kb.chunks("router.md") if "Reset" in c.heading_path)
    assert reset.id in report.kept_ids and reset.recalled == 1
    lin.add(question + [{"role": "assistant", "content": "Hold the reset button for ten seconds "
                                                         "until the lights blink twice."}], "s1")
    assert next(c for c in memory.kb.chunks("router.md") if c.id == reset.id).used == 1
    # quotas per call: no knowledge quota, no chunks (and no recall counted)
    none = lin.context("s1", question, budget=2000, quotas=(0.6, 0.4, 0.0))
    assert none.report.layers["knowledge"] == 0 and reset.id not in none.report.kept_ids
    # a small knowledge quota keeps fewer tokens of knowledge than a policy-heavy one
    small = lin.context("s2", question, budget=600, quotas=(0.6, 0.3, 0.1)).report
    large = lin.context("s2", question, budget=600, quotas=(0.3, 0.1, 0.6)).report
    assert small.quota_tokens["knowledge"] < large.quota_tokens["knowledge"]
    assert small.layers["knowledge"] <= small.quota_tokens["knowledge"]
    assert large.layers["knowledge"] > small.layers["knowledge"]
    assert next(c for c in memory.kb.chunks("router.md") if c.id == reset.id).recalled == 1 + \
        (reset.id in small.kept_ids) + (reset.id in large.kept_ids)
    # a user whose namespace has no knowledge base gets no knowledge layer
    other = memory.user("kai", agent="elsewhere").context("s1", question, budget=2000)
    assert other.report.layers["knowledge"] == 0


def test_bench_kb_scores_gold_spans_through_the_cleaning(tmp_path) -> None:
    from memstrata.bench.kb import render, run_kb

    data = tmp_path / "kb"
    data.mkdir()
    text_a = "Acme Rockets\n\nAcme   builds rockets in Nevada.\nThe CEO is Wile E. Coyote."
    text_b = "Road Runner Inc\n\nRoad Runner Inc sells birdseed in Arizona since 1949."
    (data / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in (
        {"doc_id": "a", "title": "Acme Rockets", "text": text_a},
        {"doc_id": "b", "title": "Road Runner Inc", "text": text_b})))
    start = text_b.index("sells")
    queries = [{"qid": "1", "question": "Where does Road Runner Inc sell birdseed?",
                "gold_doc_ids": ["b"], "gold_spans": [{"doc_id": "b", "start": start,
                                                        "end": start + 20, "text": text_b[start:start + 20]}],
                "meta": {"query_type": "fact"}},
               {"qid": "2", "question": "Who founded Acme on the moon?", "gold_doc_ids": [],
                "gold_spans": [], "meta": {"unanswerable": True}}]
    (data / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    report = run_kb([data], store=f"sqlite:///{tmp_path / 'b.db'}", embedder="hash:256",
                    progress=False, strategies=["500/300", "40/0"])
    first, small = report["runs"]
    assert first["questions"] == 1 and first["unanswerable"] == 1 and first["chunks"] == 2
    assert first["systems"]["bm25"]["overall"]["hit@1"] == 1.0
    assert first["systems"]["bm25"]["overall"]["doc_recall@5"] == 1.0
    assert small["chunks"] > first["chunks"]  # the second strategy cut smaller chunks
    assert "| kb | 40/0 | bm25 |" in render(report)


def test_the_knowledge_base_over_http(tmp_path) -> None:
    pytest.importorskip("fastapi")
    from service_fixture import LiveServer

    with Memory(f"sqlite:///{tmp_path / 'http.db'}", embedder="hash:256", worker="off") as memory, \
            LiveServer(memory) as live:
        with live.client(live.key("acme", "app")) as app:
            added = app.post("/v1/kb/documents", json={"doc_id": "router.md", "content": ROUTER,
                                                      "tags": ["hardware"]})
            assert added.status_code == 201 and added.json()["status"] == "added"
            again = app.post("/v1/kb/documents", json={"doc_id": "router.md", "content": ROUTER,
                                                      "tags": ["hardware"]})
            assert again.json()["status"] == "unchanged"
            assert [d["id"] for d in app.get("/v1/kb/documents").json()["data"]] == ["router.md"]
            hits = app.post("/v1/kb/search", json={"query": "reset the router", "k": 1}).json()["hits"]
            assert hits[0]["label"] == "Router guide › Reset"
            private = app.post("/v1/users/lin/kb/documents",
                               json={"doc_id": "mine", "content": "Lin's router is in the attic."})
            assert private.status_code == 201
            mine = app.post("/v1/users/lin/kb/search", json={"query": "router attic", "k": 5}).json()
            assert {h["doc_id"] for h in mine["hits"]} == {"router.md", "mine"}
            other = app.post("/v1/users/max/kb/search", json={"query": "router attic", "k": 5}).json()
            assert {h["doc_id"] for h in other["hits"]} == {"router.md"}
            ctx = app.post("/v1/users/lin/context", json={
                "messages": [{"role": "user", "content": "How do I reset the router?"}],
                "budget": 1500}).json()
            assert ctx["report"]["layers"]["knowledge"] > 0
            assert app.get("/v1/kb/documents/router.md/chunks").json()["chunks"][0]["recalled"] >= 1
        with live.client(live.key("acme", "read-only")) as reader:
            assert reader.post("/v1/kb/documents", json={"doc_id": "x", "content": "y"}).status_code == 403
            assert reader.get("/v1/kb/documents/router.md").json()["text"].startswith("Router guide")
        with live.client(live.key("globex", "app")) as stranger:  # another tenant: its own, empty
            assert stranger.get("/v1/kb/documents").json()["data"] == []
            assert stranger.get("/v1/kb/documents/router.md").status_code == 404
        with live.client(live.key("acme", "admin")) as admin:
            assert admin.delete("/v1/kb/documents/router.md").status_code == 204
            assert admin.get("/v1/kb/documents/router.md").status_code == 404


def test_search_ranks_chunks_as_the_hybrid_engine_ranks_them(memory) -> None:
    """kb.search orders chunks by the engine's fusion order (as Memory.search does), not by
    the calibrated score: that score says how well a chunk matches, for min_score, and
    re-sorting by it cost COVID-QA dev chunk Hit@5 0.844 -> 0.824 (docs/benchmarks.md)."""
    sentences = [
        "The router restarts with its factory settings after a long press of the reset button.",
        "Hold the reset button for ten seconds; the lights blink twice.",
        "The Wi-Fi password is printed on the label under the router.",
        "Firmware updates install at night and the router restarts by itself.",
        "A router placed near the microwave loses its Wi-Fi signal.",
        "质量问题由我们承担运费；非质量问题由买家承担运费。",
        "自收货之日起七天内可以无理由退货，商品需保持完好。",
        "退货时请保留包装，运费按照退货原因承担。",
        "Returns are accepted within seven days; the buyer pays the shipping unless the item is faulty.",
        "The reset button is a small hole on the back, next to the power socket.",
    ]
    for i, text in enumerate(sentences):
        memory.kb.add_text(text, doc_id=f"d{i}", title=f"Note {i}")
    engine = memory.knowledge_base
    scope = memory.kb.shared_scope
    differ = 0
    for query in ("how do I reset the router", "router restarts", "who pays the shipping for returns",
                  "退货运费谁承担", "Wi-Fi password label", "reset button lights blink"):
        hits = memory.kb.search(query, k=5, expand=False)
        found = engine.retriever.search(scope, SearchRequest(query, k=5, scoring="relevance"),
                                        touch=False, split=False)
        assert [h.id for h in hits] == [h.id for h in found.hits], query
        differ += [h.id for h in hits] != sorted((h.id for h in hits),
                                                  key=lambda i: -next(x.score for x in hits if x.id == i))
    assert differ  # the calibrated score alone would order some of these differently


@pytest.mark.parametrize("iso, ctx, query, space", [
    (("Descale the coffee machine with vinegar every month.",
      "The grinder has twelve settings from fine to coarse.",
      "Wipe the milk frother after each use."),
     ("The warranty covers parts for two years.",
      "Empty the water tank of the coffee machine before you descale it.",
      "Descale the coffee machine with citric acid every month."),
     "descale the coffee machine every month", " "),
    (("咖啡机每月用柠檬酸除垢一次。", "磨豆机有十二档研磨粗细。", "每次用完擦净奶泡器。"),
     ("保修期内免费更换零件两年。", "咖啡机除垢前先倒空水箱。", "咖啡机每月用白醋除垢一次。"),
     "咖啡机每月除垢", ""),
])
def test_a_chunk_whose_neighbour_matches_outranks_an_isolated_equal_match(tmp_path, iso, ctx,
                                                                           query, space) -> None:
    """kb_neighbour_weight: a chunk's ordering value gains a share of the best adjacent
    chunk's that continues its paragraph, so of two about equal matches the one whose
    paragraph goes on in another match ranks first; off, the slightly better isolated
    match (its neighbours are other paragraphs) does."""
    ranked = {}
    for weight in (0.0, 0.5):
        with Memory(f"sqlite:///{tmp_path / f'n{weight}.db'}", embedder="hash:256", worker="off",
                    kb_neighbour_weight=weight) as m:
            longest = max(20, *map(len, iso + ctx))
            m.kb.add_text("\n\n".join(iso), doc_id="iso", title="Notes", max_chars=longest,
                          min_chars=0)  # three paragraphs
            m.kb.add_text(space.join(ctx), doc_id="ctx", title="Notes", max_chars=longest,
                          min_chars=0)  # one paragraph cut in three
            chunks = m.kb.chunks("ctx")
            assert [c.text.strip() for c in chunks] == list(ctx) and chunks[1].joins_next
            assert not any(c.joins_next for c in m.kb.chunks("iso"))
            hits = m.kb.search(query, k=3, expand=False)
            ranked[weight] = [(h.doc_id, h.chunk.ordinal) for h in hits]
            scores = {(h.doc_id, h.chunk.ordinal): h.score for h in hits}
            assert scores[("iso", 0)] > scores[("ctx", 2)]  # the isolated match scores higher
    assert ranked[0.0][:2] == [("iso", 0), ("ctx", 2)]
    assert ranked[0.5][:2] == [("ctx", 2), ("iso", 0)]

"""memstrata bench kb: the on-disk embedding cache changes no score and embeds nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from memstrata.bench.embedding_cache import DiskCachedEmbedder
from memstrata.bench.kb import render, run_kb
from memstrata.cli.main import cli
from memstrata.providers.embedders import HashEmbedder

DOCS = [
    ("router", "Router guide",
     "Reset\n\nHold the reset button for ten seconds until the light blinks orange. The router then "
     "restarts with the settings it had when it left the factory.\n\nWi-Fi\n\nThe network name and "
     "the password are printed on the label under the router. Change them in the web page at "
     "192.168.1.1 after the first start."),
    ("returns", "退货政策",
     "退货\n\n收到商品七天内可以无理由退货，商品需保持完好。质量问题的退货运费由商家承担，其他情况由买家承担。\n\n"
     "退款\n\n退款在收到退回的商品后三个工作日内原路退回。使用优惠券的订单按实际支付金额退款。"),
    ("warranty", "Warranty",
     "Every device has a two-year warranty from the date of purchase. The warranty covers defects "
     "in materials and workmanship, not damage from water or falls. Keep the receipt: it is the "
     "proof of the date."),
]
QUERIES = [
    ("q1", "How long do I hold the reset button?", "router", "ten seconds"),
    ("q2", "Where is the Wi-Fi password printed?", "router", "on the label under the router"),
    ("q3", "质量问题退货运费谁承担？", "returns", "质量问题的退货运费由商家承担"),
    ("q4", "退款多久到账？", "returns", "三个工作日内原路退回"),
    ("q5", "How long is the warranty?", "warranty", "two-year warranty"),
    ("q6", "Does the warranty cover water damage?", "warranty", "not damage from water"),
]


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls = 0

    def embed(self, texts, *, kind="passage"):  # type: ignore[no-untyped-def]
        self.calls += len(texts)
        return super().embed(texts, kind=kind)


def _data(tmp_path: Path) -> Path:
    d = tmp_path / "kbset"
    d.mkdir()
    with (d / "corpus.jsonl").open("w") as f:
        for doc_id, title, text in DOCS:
            f.write(json.dumps({"doc_id": doc_id, "title": title, "text": text}, ensure_ascii=False) + "\n")
    texts = {doc_id: text for doc_id, _, text in DOCS}
    with (d / "queries.jsonl").open("w") as f:
        for qid, question, doc_id, answer in QUERIES:
            start = texts[doc_id].index(answer)
            span = {"doc_id": doc_id, "start": start, "end": start + len(answer), "text": answer}
            f.write(json.dumps({"qid": qid, "question": question, "answers": [answer],
                                "gold_doc_ids": [doc_id], "gold_spans": [span],
                                "meta": {"query_type": "factual"}}, ensure_ascii=False) + "\n")
        f.write(json.dumps({"qid": "u1", "question": "What is the dividend of July 2017?", "answers": [],
                            "gold_doc_ids": [], "gold_spans": [], "meta": {"unanswerable": True}}) + "\n")
    return d


def test_disk_cache_returns_the_embedders_vectors_and_keeps_them_across_opens(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    path = tmp_path / "cache" / "vectors.db"
    texts = ["Hold the reset button", "退货运费由商家承担", "Hold the reset button"]
    first = DiskCachedEmbedder(inner, path)
    assert (first.name, first.dim) == (inner.name, inner.dim)
    got = first.embed(texts, kind="passage")
    assert np.array_equal(got, HashEmbedder(64).embed(texts, kind="passage"))
    assert inner.calls == 2  # the repeated text once
    first.close()
    again = DiskCachedEmbedder(inner, path)  # a later run
    assert np.array_equal(again.embed(texts, kind="passage"), got)
    assert inner.calls == 2 and again.misses == 0 and again.hits == 3
    # a query is not the passage of the same text (e5 prefixes them differently)
    again.embed(["Hold the reset button"], kind="query")
    assert inner.calls == 3 and again.misses == 1
    again.close()


def test_bench_kb_scores_the_same_with_the_cache_and_embeds_nothing_the_second_time(tmp_path: Path) -> None:
    data = _data(tmp_path)
    cache = tmp_path / "vectors.db"
    plain = run_kb([data], embedder="hash:64", progress=False)
    first = run_kb([data], embedder="hash:64", progress=False, embedding_cache=cache)
    second = run_kb([data], embedder="hash:64", progress=False, embedding_cache=cache)
    for report in (first, second):
        assert report["runs"][0]["systems"] == plain["runs"][0]["systems"]
        assert report["runs"][0]["top_score_below"] == plain["runs"][0]["top_score_below"]
        assert report["runs"][0]["chunks"] == plain["runs"][0]["chunks"]
    assert first["embedding_cache"]["misses"] > 0
    assert second["embedding_cache"] == {"path": str(cache), "hits": first["embedding_cache"]["hits"]
                                         + first["embedding_cache"]["misses"], "misses": 0}
    assert plain["embedding_cache"] is None
    overall = plain["runs"][0]["systems"]["bm25"]["overall"]
    assert plain["runs"][0]["questions"] == 6 and plain["runs"][0]["unanswerable"] == 1
    assert overall["hit@10"] == 1.0  # every gold chunk is among three documents' chunks


def test_bench_kb_cli_takes_the_embedding_cache(tmp_path: Path) -> None:
    data = _data(tmp_path)
    cache = tmp_path / "vectors.db"
    out = tmp_path / "kb.json"
    result = CliRunner().invoke(cli, ["bench", "kb", "--data", str(data), "--embedder", "hash:64",
                                       "--embedding-cache", str(cache), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert f"embedding cache {cache}" in result.output
    assert json.loads(out.read_text())["embedding_cache"]["path"] == str(cache)
    assert cache.exists()


class ClippingEmbedder(CountingEmbedder):
    """Reads only the first 12 characters of a text, as e5 reads only its first 512 tokens."""

    def clip(self, text: str, kind: str = "passage") -> str:
        return text[:12]

    def embed(self, texts, *, kind="passage"):  # type: ignore[no-untyped-def]
        return super().embed([self.clip(t, kind) for t in texts], kind=kind)


def test_disk_cache_keys_a_vector_by_what_the_model_reads(tmp_path: Path) -> None:
    """A vector cached before the embedder cut texts is not served for a text it now cuts
    (the cache key is the text the model reads, not the text it was given)."""
    path = tmp_path / "vectors.db"
    long = "Hold the reset button for ten seconds until the light blinks."
    old = DiskCachedEmbedder(CountingEmbedder(), path)  # the same name, no cut
    old.embed([long, "short text"], kind="passage")
    old.close()
    inner = ClippingEmbedder()
    new = DiskCachedEmbedder(inner, path)
    got = new.embed([long, "short text"], kind="passage")
    assert np.array_equal(got, HashEmbedder(64).embed([long[:12], "short text"], kind="passage"))
    assert (new.hits, new.misses, inner.calls) == (1, 1, 1)  # "short text" is read whole
    new.close()


def test_bench_kb_counts_the_neighbour_an_expanded_hit_brings(tmp_path: Path) -> None:
    """memstrata_expanded: a hit cut mid-paragraph comes with its neighbour (kb.search's
    default); the span in that neighbour counts there, and only there."""
    first = ("The vault of the old bank has a brass handle, a steel frame and a dial with "
             "forty numbers. Visitors may look at the vault from the hall. The guard opens "
             "the hall at nine and closes it at five. Photographs of the vault are allowed "
             "without a flash. The brass handle was polished in the spring.")
    second = ("The combination is changed every Monday by the manager. It is written on no "
              "paper and told to nobody else. A wrong number three times in a row locks the "
              "dial for an hour. The manager keeps a sealed envelope for emergencies. It is "
              "opened only with a notary present.")
    text = first + " " + second
    d = tmp_path / "vault"
    d.mkdir()
    fillers = [f"Museum {i} shows a vault door with a brass handle and a steel frame in its hall; "
               f"photographs of the dial are allowed, and the handle is polished every {i} weeks."
               for i in range(9)]  # other hits, so that the neighbour is not a hit of its own
    (d / "corpus.jsonl").write_text("\n".join(json.dumps({"doc_id": doc_id, "title": "", "text": t})
                                              for doc_id, t in [("bank", text),
                                                                *((f"m{i}", f) for i, f in enumerate(fillers))])
                                    + "\n")
    start = text.index("sealed envelope")
    span = {"doc_id": "bank", "start": start, "end": start + 20, "text": text[start:start + 20]}
    (d / "queries.jsonl").write_text(json.dumps({
        "qid": "1", "question": "vault brass handle steel frame dial polished hall photographs",
        "answers": [], "gold_doc_ids": ["bank"], "gold_spans": [span], "meta": {}}) + "\n")
    report = run_kb([d], embedder="hash:64", progress=False)
    run = report["runs"][0]
    assert run["chunks"] == 11
    systems = run["systems"]
    assert systems["memstrata"]["overall"]["hit@10"] == 0.0  # the first chunk, not the span's
    assert systems["memstrata_expanded"]["overall"]["hit@10"] == 1.0  # ...with its neighbour
    assert "| vault | 500/300 | memstrata_expanded |" in render(report)

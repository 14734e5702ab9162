"""The rerank seam against a real HTTP server in this process: the /rerank formats
of llama.cpp/vLLM/Jina and TEI, an LLM as reranker over the chat seam, and search()
reordering its best hits with it. The server scores by shared words, so the order it
gives is known."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memstrata import ConfigError, Memory, ProviderError
from memstrata.providers.llm import parse_provider
from memstrata.providers.rerank import HTTPReranker, LLMReranker, parse_reranker


def _overlap(query: str, doc: str) -> float:
    q = set(re.findall(r"\w+", query.lower()))
    return float(len(q & set(re.findall(r"\w+", doc.lower()))))


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, *args):  # keep the test output clean
        pass

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).seen.append({"path": self.path, **body})
        if self.path == "/rerank" and "texts" in body:  # TEI
            self._answer(200, [{"index": i, "score": _overlap(body["query"], t)}
                               for i, t in enumerate(body["texts"])])
        elif self.path == "/rerank" and body.get("query") == "broken":
            self._answer(200, {"results": [{"index": 0}]})
        elif self.path == "/rerank":  # llama.cpp / Jina / vLLM, best first like the real ones
            rows = [{"index": i, "relevance_score": _overlap(body["query"], d)}
                    for i, d in enumerate(body["documents"])]
            self._answer(200, {"results": sorted(rows, key=lambda r: -r["relevance_score"])})
        elif self.path == "/v1/chat/completions":
            prompt = body["messages"][-1]["content"]
            query = re.search(r"Query: (.*)", prompt).group(1)
            docs = re.findall(r"^\d+\. (.*)$", prompt, re.MULTILINE)
            text = json.dumps({"scores": [_overlap(query, d) for d in docs]})
            self._answer(200, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
        else:
            self._answer(404, {"error": "no such route"})


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


DOCS = ["I keep bees on my roof", "Bees make honey on my roof in summer", "我家楼顶养了蜜蜂"]


@pytest.mark.parametrize("fmt", ["jina", "tei"])
def test_http_reranker_scores_in_the_documents_order(server, fmt):
    reranker = HTTPReranker(server, "bge-reranker", format=fmt)
    assert reranker.rerank("honey bees roof", DOCS) == [2.0, 3.0, 0.0]
    sent = _Handler.seen[-1]
    assert sent["path"] == "/rerank" and sent["query"] == "honey bees roof"
    assert (sent["texts"] if fmt == "tei" else sent["documents"]) == DOCS
    assert reranker.rerank("anything", []) == []
    reranker.close()


def test_bad_answers_and_specs_are_clear_errors(server):
    with pytest.raises(ProviderError, match="unknown shape|scored"):
        HTTPReranker(server).rerank("broken", DOCS)
    with pytest.raises(ProviderError, match="404"):
        HTTPReranker(f"{server}/nowhere").rerank("x", DOCS)
    with pytest.raises(ConfigError, match="rerank:URL"):
        parse_reranker("cohere")
    with pytest.raises(ConfigError, match="needs an LLM"):
        parse_reranker("llm")
    assert parse_reranker("") is None


def test_an_llm_reranks_over_the_chat_seam(server):
    llm = parse_provider(f"openai-compatible:{server}/v1#tiny")
    assert LLMReranker(llm).rerank("honey bees roof", DOCS) == [2.0, 3.0, 0.0]
    assert isinstance(parse_reranker("llm", llm=llm), LLMReranker)
    llm.close()


def test_search_reorders_its_best_hits_with_the_reranker(server, tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'r.db'}", embedder="hash:256", worker="off",
                reranker=f"rerank:{server}#bge-reranker") as m:
        for n, text in enumerate(["I keep bees on my roof", "My roof leaks when it rains",
                                  "Honey from my bees tastes of lime"]):
            m.add(text, "u", f"s{n}")
        hits = m.search("honey from the bees", "u", filters={"layer": "episodic"})
        assert hits[0].text == "Honey from my bees tastes of lime"
        assert [h.parts.rerank for h in hits] == sorted((h.parts.rerank for h in hits), reverse=True)
        assert _Handler.seen[-1]["path"] == "/rerank"
    with Memory(f"sqlite:///{tmp_path / 'off.db'}", embedder="hash:256", worker="off") as m:
        m.add("I keep bees on my roof", "u")
        assert m.retriever.reranker is None and m.search("bees", "u")[0].parts.rerank is None


@pytest.mark.parametrize("texts, query", [
    (["I keep bees on my roof", "My roof leaks when it rains", "Honey from my bees tastes of lime"],
     "honey from the bees"),
    (["我家楼顶养了蜜蜂", "下雨的时候我家屋顶漏水", "我家蜜蜂酿的蜂蜜有青柠味"], "蜜蜂 蜂蜜"),
])
def test_llm_reranker_calls_count_against_the_daily_budget(server, tmp_path, texts, query):
    """reranker='llm' spends the user's llm_daily_budget like extraction does: each call
    is recorded (purpose 'rerank'), and once the budget is spent search keeps its own
    order instead of calling the LLM again."""
    with Memory(f"sqlite:///{tmp_path / 'b.db'}", embedder="hash:256", worker="off",
                llm=f"openai-compatible:{server}/v1#tiny", llm_daily_budget=2,
                reranker="llm") as m:
        for n, text in enumerate(texts):
            m.add(text, "u", f"s{n}")
        calls = len([s for s in _Handler.seen if s["path"] == "/v1/chat/completions"])
        reranked = [m.search(query, "u", filters={"layer": "episodic"}) for _ in range(3)]
        made = len([s for s in _Handler.seen if s["path"] == "/v1/chat/completions"]) - calls
        assert made == 2  # the third search did not call the LLM
        assert all(h.parts.rerank is not None for hits in reranked[:2] for h in hits)
        assert all(h.parts.rerank is None for h in reranked[2])
        assert [h.id for h in reranked[2]]  # still answered, in the fused order
        usage = m.usage("u")
        assert usage.calls["rerank"].calls == 2 and usage.skipped["rerank"] == 1
        # another user has a budget of its own
        m.add(texts[0], "v", "s0")
        m.add(texts[2], "v", "s1")
        assert m.search(query, "v", filters={"layer": "episodic"})[0].parts.rerank is not None

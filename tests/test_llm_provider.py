"""The OpenAI-compatible provider against a real HTTP server on 127.0.0.1.

The server (http.server in a thread) plays every failure a provider can show: 401,
404, 429 then 200 with Retry-After, 500, bodies that are not JSON, a server that
rejects ``response_format``, and one too slow to answer. No httpx mocking.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memstrata.errors import (ConfigError, ProviderAuthError, ProviderError, ProviderNotFoundError,
                              ProviderRateLimitError, ProviderResponseError, ProviderTimeoutError,
                              ValidationError)
from memstrata.prompts import EXTRACTION_SCHEMA, extraction_prompt
from memstrata.providers.http import Retry
from memstrata.providers.llm import LLM, OPENAI_BASE_URL, OpenAICompatibleLLM, UsageLog, parse_provider
from memstrata.types import Message, UsageRecord, utcnow

ANSWER = ('```json\n{"items": [{"kind": "fact", "content": "用户用 Go 写后端", '
          '"confidence": 1e15}, {"kind": "mood", "content": "x"}]}\n```\nDone.')


def _chat_body(content: str, model: str = "test-model") -> bytes:
    return json.dumps({"model": model, "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 12, "completion_tokens": 7}}).encode()


class FakeProvider(BaseHTTPRequestHandler):
    """Routes by the first path segment: /<behaviour>/v1/chat/completions."""

    requests: list[tuple[str, dict, dict]] = []
    counters: dict[str, int] = {}

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: C901 -- a table of fake endpoints, one branch per route
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        mode = self.path.strip("/").split("/")[0]
        FakeProvider.requests.append((mode, dict(self.headers), body))
        count = FakeProvider.counters[mode] = FakeProvider.counters.get(mode, 0) + 1
        error = json.dumps({"error": {"message": mode}}).encode()
        if mode == "ok":
            self._send(200, _chat_body(ANSWER))
        elif mode == "auth":
            self._send(401, error)
        elif mode == "forbidden":
            self._send(403, error)
        elif mode == "missing":
            self._send(404, json.dumps({"error": {"message": "model 'nope' not found"}}).encode())
        elif mode == "flaky":  # 429 twice, then fine
            if count <= 2:
                self._send(429, error, {"Retry-After": "0"})
            else:
                self._send(200, _chat_body('{"items": []}'))
        elif mode == "limited":
            self._send(429, error, {"Retry-After": "1"})
        elif mode == "broken":
            self._send(500, error)
        elif mode == "garbage":
            self._send(200, b"<html>gateway</html>")
        elif mode == "nochoices":
            self._send(200, b'{"choices": []}')
        elif mode == "noformat":  # a server that takes no response_format at all
            if "response_format" in body:
                self._send(400, json.dumps({"error": "response_format not supported"}).encode())
            else:
                self._send(200, _chat_body(ANSWER))
        elif mode == "objectonly":  # llama-cpp-python: json_object + schema, 422 otherwise
            kind = body.get("response_format", {}).get("type")
            if kind == "json_schema":
                self._send(422, b'{"detail": [{"loc": ["body", "response_format", "type"]}]}')
            else:
                self._send(200, _chat_body(ANSWER))
        elif mode == "schema500":  # some llama.cpp forks answer 500 for json_schema
            if body.get("response_format", {}).get("type") == "json_schema":
                self._send(500, b'{"error": {"message": "response_format type must be one '
                                b'of \\"text\\" or \\"json_object\\", but got: json_schema"}}')
            else:
                self._send(200, _chat_body(ANSWER))
        elif mode == "slow":
            time.sleep(1.5)
            self._send(200, _chat_body("late"))
        else:
            self._send(418, error)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def _reset():
    FakeProvider.requests.clear()
    FakeProvider.counters.clear()


def _llm(server: str, mode: str, **options) -> OpenAICompatibleLLM:
    options.setdefault("backoff_s", 0.01)
    return parse_provider(f"openai-compatible:{server}/{mode}/v1#test-model", **options)


HELLO = [{"role": "user", "content": "hello"}]


def test_structured_call_parses_and_records_usage(server):
    log = UsageLog()
    llm = _llm(server, "ok", api_key="sk-test", usage=log)
    assert isinstance(llm, LLM)
    result = llm.complete(extraction_prompt([{"role": "user", "content": "我用 Go 写后端"}]),
                          schema=EXTRACTION_SCHEMA, purpose="extract")
    _, headers, body = FakeProvider.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert result.server_schema
    assert [i["content"] for i in result.parsed.items] == ["用户用 Go 写后端"]
    assert result.parsed.items[0]["confidence"] == 1.0
    assert len(result.parsed.rejected) == 1
    assert (result.prompt_tokens, result.completion_tokens) == (12, 7)
    [record] = log.records()
    assert (record.model, record.purpose, record.prompt_tokens, record.ok) == (
        "test-model", "extract", 12, True)


def test_message_values_are_accepted(server):
    llm = _llm(server, "ok")
    llm.complete([Message.from_dict({"role": "user", "content": "hi"})])
    assert FakeProvider.requests[0][2]["messages"] == [{"role": "user", "content": "hi"}]
    assert "Authorization" not in FakeProvider.requests[0][1]


def test_rejected_response_format_falls_back_to_prompt_json(server):
    llm = _llm(server, "noformat")
    first = llm.complete(HELLO, schema=EXTRACTION_SCHEMA)
    assert not first.server_schema and llm.structured_output == "prompt"
    assert len(first.parsed.items) == 1
    sent = [body for _, _, body in FakeProvider.requests]
    assert [b.get("response_format", {}).get("type") for b in sent] == [
        "json_schema", "json_object", None]
    assert "JSON Schema" in sent[2]["messages"][0]["content"]
    assert sent[2]["messages"][0]["role"] == "system"
    llm.complete(HELLO, schema=EXTRACTION_SCHEMA)
    assert FakeProvider.counters["noformat"] == 4  # the capability is remembered


@pytest.mark.parametrize("mode", ["objectonly", "schema500"])
def test_json_object_with_schema_when_json_schema_is_refused(server, mode):
    llm = _llm(server, mode, max_retries=3)
    result = llm.complete(HELLO, schema=EXTRACTION_SCHEMA)
    assert result.server_schema and llm.structured_output == "json_object"
    assert FakeProvider.counters[mode] == 2  # the refusal is not retried as a 5xx
    body = FakeProvider.requests[1][2]
    assert body["response_format"]["schema"] == EXTRACTION_SCHEMA.json_schema()
    assert len(result.parsed.items) == 1


def test_schema_hint_joins_the_leading_system_message(server):
    llm = _llm(server, "ok", structured_output="prompt")
    llm.complete(extraction_prompt(HELLO), schema=EXTRACTION_SCHEMA)
    messages = FakeProvider.requests[0][2]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("You extract") and "JSON Schema" in messages[0]["content"]


def test_plain_call_without_schema_sends_no_response_format(server):
    _llm(server, "noformat").complete(HELLO)
    assert FakeProvider.counters["noformat"] == 1
    with pytest.raises(ConfigError, match="structured_output"):
        _llm(server, "ok", structured_output="xml")


@pytest.mark.parametrize("mode, error, words", [
    ("auth", ProviderAuthError, "API key"),
    ("forbidden", ProviderAuthError, "HTTP 403"),
    ("missing", ProviderNotFoundError, "check the model name / base URL"),
    ("broken", ProviderResponseError, "HTTP 500"),
    ("garbage", ProviderResponseError, "not JSON"),
    ("nochoices", ProviderResponseError, "choices"),
    ("teapot", ProviderResponseError, "HTTP 418"),
])
def test_errors_are_mapped(server, mode, error, words):
    log = UsageLog()
    with pytest.raises(error, match=words) as info:
        _llm(server, mode, max_retries=2, usage=log).complete(HELLO)
    assert info.value.__cause__ is not None
    assert log.records()[0].error == error.__name__


def test_5xx_is_retried_before_failing(server):
    with pytest.raises(ProviderResponseError):
        _llm(server, "broken", max_retries=2).complete(HELLO)
    assert FakeProvider.counters["broken"] == 3
    with pytest.raises(ProviderAuthError):
        _llm(server, "auth", max_retries=2).complete(HELLO)
    assert FakeProvider.counters["auth"] == 1  # 4xx is not retried


def test_429_is_retried_then_succeeds(server):
    waits: list[float] = []
    result = _llm(server, "flaky", sleep=waits.append, max_retries=3).complete(HELLO)
    assert result.text == '{"items": []}'
    assert FakeProvider.counters["flaky"] == 3
    assert waits == [0.0, 0.0]  # Retry-After: 0 honoured


def test_429_after_all_retries(server):
    waits: list[float] = []
    with pytest.raises(ProviderRateLimitError, match="429"):
        _llm(server, "limited", sleep=waits.append, max_retries=2, max_wait_s=0.5).complete(HELLO)
    assert FakeProvider.counters["limited"] == 3
    assert waits == [0.5, 0.5]  # Retry-After: 1, bounded by max_wait_s


def test_real_retry_after_sleep(server):
    # One real (short) sleep, to show the default sleeper is wired in.
    assert _llm(server, "flaky", max_retries=2).complete(HELLO).text == '{"items": []}'


def test_timeout(server):
    with pytest.raises(ProviderTimeoutError, match="did not answer") as info:
        _llm(server, "slow", timeout_s=0.2).complete(HELLO)
    assert info.value.__cause__ is not None


def test_connection_refused_is_retried_then_reported():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits: list[float] = []
    llm = parse_provider(f"openai-compatible:http://127.0.0.1:{port}/v1#m", max_retries=2,
                         sleep=waits.append)
    with pytest.raises(ProviderError, match="cannot reach"):
        llm.complete(HELLO)
    assert len(waits) == 2 and all(0 < w <= 30 for w in waits)


def test_backoff_grows_with_jitter_and_is_bounded():
    retry = Retry(backoff_s=1.0, max_wait_s=5.0)
    for attempt, (lo, hi) in enumerate([(0.5, 1), (1, 2), (2, 4), (2.5, 5), (2.5, 5)]):
        assert lo <= retry.delay(attempt, None) <= hi
    assert retry.delay(0, "120") == 5.0
    assert retry.delay(0, "Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert 0.5 <= retry.delay(0, "soon") <= 1.0


def test_parse_provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    openai = parse_provider("openai:gpt-4o-mini")
    assert (openai.model, openai.base_url, openai.api_key) == ("gpt-4o-mini", OPENAI_BASE_URL, "sk-env")
    assert "sk-env" not in repr(openai) and openai.needs_key
    assert parse_provider("openai:gpt-4o-mini", api_key="sk-arg").api_key == "sk-arg"

    monkeypatch.setenv("MEMSTRATA_LLM_API_KEY", "local-key")
    local = parse_provider("openai-compatible:http://localhost:11434/v1/#qwen2.5:7b", timeout_s=5)
    assert (local.model, local.base_url, local.api_key, local.timeout_s) == (
        "qwen2.5:7b", "http://localhost:11434/v1", "local-key", 5)
    monkeypatch.delenv("MEMSTRATA_LLM_API_KEY")
    assert parse_provider("openai-compatible:http://h:1/v1#m").api_key is None

    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        parse_provider("openai:gpt-4o-mini")
    for bad, words in [("anthropic:claude", "unknown LLM provider"), ("gpt-4o", "unknown"),
                       ("openai:", "names no model"),
                       ("openai-compatible:http://h:1/v1", "model after '#'"),
                       ("openai-compatible:localhost:8080#m", "http"),
                       ("openai-compatible:http://h/v1#m", None)]:
        if words is None:
            with pytest.raises(ConfigError, match="bad LLM option"):
                parse_provider(bad, colour="blue")
        else:
            with pytest.raises(ConfigError, match=words):
                parse_provider(bad)


def test_usage_log_queries_and_round_trips():
    log = UsageLog(max_records=3)
    now = utcnow()
    for i, (model, purpose) in enumerate([("a", "extract"), ("a", "summary"), ("b", "extract"),
                                          ("b", "extract")]):
        log.record(UsageRecord(now, model, purpose, 10 * i, i, 0.5,
                               None if i else "ProviderTimeoutError"))
    assert len(log) == 3  # bounded: the oldest went
    by_model = log.summary(by="model")
    assert by_model["b"].calls == 2 and by_model["b"].total_tokens == 55
    assert log.summary()["all"].failures == 0
    assert log.summary(by="purpose", model="b")["extract"].mean_latency_s == 0.5
    assert [r.purpose for r in log.records(purpose="summary")] == ["summary"]
    record = log.records()[0]
    assert UsageRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    with pytest.raises(ValidationError):
        log.summary(by="day")


def test_parsed_without_schema_is_a_clear_error(server):
    result = _llm(server, "ok").complete(HELLO)
    assert result.json[0]["items"][0]["kind"] == "fact"
    with pytest.raises(ValidationError, match="schema"):
        _ = result.parsed

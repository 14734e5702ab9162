"""The memory proxy passes through what it cannot read.

A real local HTTP upstream (a stdlib server on a free port) answers each call with what
hypothesis draws — completions with odd types, not JSON, JSON nested 5,000 deep, any
status, hop-by-hop, ``Set-Cookie`` and ``Location`` headers; streams whose chunks hold
anything — and the proxy, a real ``memstrata serve`` app, must hand every answer to the
caller unchanged: 0 raw 500s, 0 aborted streams, the user's turn stored after every
success and nothing after a failure or a redirect.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st
from service_fixture import LiveServer

from memstrata import Memory
from memstrata.server import ServerSettings


@dataclass
class Answer:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)


class Upstream(http.server.ThreadingHTTPServer):
    answer = Answer()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes: any chunks

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        answer: Answer = self.server.answer  # type: ignore[attr-defined]
        self.send_response(answer.status)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.end_headers()
        for chunk in answer.chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy(tmp_path) -> Iterator[tuple[Upstream, httpx.Client, Memory]]:
    upstream = Upstream(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    try:
        with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", worker="off") as memory:
            url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
            with LiveServer(memory, ServerSettings(rate_limit=0, upstream=url)) as live, \
                    live.client(live.key("acme", "app")) as client:
                yield upstream, client, memory
    finally:
        upstream.shutdown()
        upstream.server_close()


scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**30, max_value=10**30),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)
calls = st.lists(st.one_of(values, st.fixed_dictionaries({
    "index": st.one_of(st.integers(-5, 5), values), "id": st.one_of(st.text(max_size=8), values),
    "type": st.just("function"),
    "function": st.one_of(values, st.fixed_dictionaries({"name": st.one_of(st.text(max_size=8), values),
                                                         "arguments": st.one_of(st.text(max_size=20), values)}))})),
    max_size=3)
messages = st.one_of(values, st.fixed_dictionaries({
    "role": st.one_of(st.just("assistant"), values), "content": st.one_of(st.text(max_size=60), values),
}, optional={"tool_calls": st.one_of(calls, values)}))
usage = st.one_of(values, st.fixed_dictionaries({"prompt_tokens": st.one_of(st.integers(-10**20, 10**20), values),
                                                 "completion_tokens": st.one_of(st.integers(-3, 10**20), values)}))
completions = st.one_of(values, st.fixed_dictionaries({
    "choices": st.one_of(values, st.lists(st.one_of(values, st.fixed_dictionaries(
        {"index": st.integers(0, 2), "message": messages})), max_size=2)),
}, optional={"usage": usage}))
DEEP = b'{"choices": [{"message": {"content": ' + b"[" * 5000 + b"]" * 5000 + b"}}]}"
bodies = st.one_of(completions.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200),
                   st.just(DEEP), st.just(b"[" * 5000 + b"]" * 5000), st.just(b""))
extra_headers = st.lists(st.sampled_from([
    ("Set-Cookie", "session=abc; Path=/"), ("Location", "http://elsewhere.example/x"),
    ("Connection", "close, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"),
    ("Content-Location", "/x"), ("X-Upstream", "kept"), ("Content-Type", "application/json"),
    ("Content-Type", "text/plain; charset=utf-8")]), max_size=4, unique_by=lambda h: h[0])
STATUSES = [200, 201, 202, 203, 301, 302, 303, 307, 308, 400, 401, 403, 404, 409, 422, 429,
            500, 502, 503]
NOT_RELAYED = {"set-cookie", "location", "keep-alive", "content-location"}


def _not_relayed(headers: list[tuple[str, str]]) -> set[str]:
    """What must not reach the caller: the always-dropped, and what Connection names."""
    return NOT_RELAYED | ({"x-hop"} if ("Connection", "close, X-Hop") in headers else set())


def _delta_lines(value: object) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


deltas = st.one_of(values, st.fixed_dictionaries({"choices": st.lists(st.one_of(values, st.fixed_dictionaries({
    "index": st.one_of(st.integers(0, 1), values),
    "delta": st.one_of(values, st.fixed_dictionaries({"content": st.one_of(st.text(max_size=10), values)},
                                                      optional={"tool_calls": calls}))})), max_size=2)},
    optional={"usage": usage}))
stream_parts = st.lists(st.one_of(deltas.map(_delta_lines), st.binary(max_size=40),
                                  st.just(b"data: " + b"[" * 5000 + b"\n\n"), st.just(b"data: [DONE]\n\n"),
                                  st.just(b"data: {not json}\n\n")), max_size=6)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:]) if data[a:b]]


def _ask(client: httpx.Client, stream: bool) -> tuple[str, str, dict]:
    session, text = uuid.uuid4().hex[:10], f"what was the name of the lantern shop? {uuid.uuid4().hex[:6]}"
    body = {"model": "m", "user": "lin", "stream": stream, "messages": [{"role": "user", "content": text}]}
    return session, text, body


FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(status=st.sampled_from(STATUSES), headers=extra_headers, body=bodies)
def test_plain_answers_reach_the_caller_unchanged(proxy, status, headers, body):
    upstream, client, memory = proxy
    upstream.answer = Answer(status, headers, [body])
    session, text, request = _ask(client, stream=False)
    got = client.post("/v1/chat/completions", json=request, headers={"X-Memstrata-Session": session})
    assert (got.status_code, got.content) == (status, body)  # never a raw 500 of ours
    assert not _not_relayed(headers) & {k.lower() for k in got.headers}
    if ("X-Upstream", "kept") in headers:
        assert got.headers["x-upstream"] == "kept"
    stored = [m.content for m in memory.messages("lin", session, agent_id="acme")]
    note(f"upstream {status} {headers} {body[:300]!r}; stored {stored}")
    if 200 <= status < 300:
        assert stored[:1] == [text]  # the user's turn at least
    else:
        assert stored == []  # a failure, or a redirect: not a success


@FUZZ
@given(parts=stream_parts, cuts=st.lists(st.integers(0, 10**6), max_size=5), headers=extra_headers)
def test_streams_are_relayed_whatever_the_chunks_hold(proxy, parts, cuts, headers):
    upstream, client, memory = proxy
    data = b"".join(parts)
    headers = [h for h in headers if h[0] != "Content-Type"] + [("Content-Type", "text/event-stream")]
    upstream.answer = Answer(200, headers, _split(data, cuts))
    session, text, request = _ask(client, stream=True)
    with client.stream("POST", "/v1/chat/completions", json=request,
                       headers={"X-Memstrata-Session": session}) as got:
        relayed = b"".join(got.iter_raw())  # an aborted stream raises here
        assert got.status_code == 200 and not _not_relayed(headers) & {k.lower() for k in got.headers}
    assert relayed == data
    assert [m.content for m in memory.messages("lin", session, agent_id="acme")][:1] == [text]


def test_a_readable_answer_is_stored_and_an_unstorable_one_is_counted(proxy):
    upstream, client, memory = proxy
    good = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "The shop is Lumen & Co."}}]}
    upstream.answer = Answer(200, [("Content-Type", "application/json")], [json.dumps(good).encode()])
    session, text, request = _ask(client, stream=False)
    assert client.post("/v1/chat/completions", json=request,
                       headers={"X-Memstrata-Session": session}).json() == good
    assert [m.content for m in memory.messages("lin", session, agent_id="acme")] == [text, "The shop is Lumen & Co."]
    odd = {"choices": [{"message": {"role": "assistant", "content": {"not": "text"}}}]}
    upstream.answer = Answer(200, [], [json.dumps(odd).encode()])
    session, text, request = _ask(client, stream=False)
    assert client.post("/v1/chat/completions", json=request,
                       headers={"X-Memstrata-Session": session}).json() == odd
    assert [m.content for m in memory.messages("lin", session, agent_id="acme")] == [text]
    metrics = client.get("/metrics").text
    assert 'memstrata_proxy_warnings_total{kind="unstorable_answer"} 1.0' in metrics

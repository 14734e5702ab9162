"""The OpenAI-compatible memory proxy, end to end: the OpenAI SDK → memstrata serve →
an upstream (a local fake that records what it got, for errors and tool calls; and the
real llama.cpp server of ``memstrata llm serve``), streaming and not."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from service_fixture import LiveServer, serve_asgi

from memstrata import Memory
from memstrata.providers.local import llama_cpp_available
from memstrata.server import ServerSettings
from memstrata.server.proxy import Accumulator, turn_to_store

openai = pytest.importorskip("openai")

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}


def fake_upstream(seen: list) -> FastAPI:
    """Answers by the last user message: 'tool' → a tool call, 'fail' → 429, else text."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("authorization")})
        last = next(m for m in reversed(body["messages"]) if m["role"] in ("user", "tool"))
        text = last.get("content") or ""
        if "fail" in text:
            return JSONResponse({"error": {"message": "slow down", "type": "rate_limit"}}, status_code=429)
        if body.get("stream"):
            def chunks():
                if "tool" in text:
                    deltas = [{"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                    "function": {"name": "get_", "arguments": ""}}]},
                              {"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": '{"city": '}}]},
                              {"tool_calls": [{"index": 0, "function": {"arguments": '"Lisbon"}'}}]}]
                else:
                    deltas = [{"role": "assistant", "content": "Stre"}, {"content": "amed "}, {"content": "answer"}]
                for d in deltas:
                    yield f"data: {json.dumps({'id': 'c1', 'object': 'chat.completion.chunk', 'model': 'fake', 'choices': [{'index': 0, 'delta': d}]})}\n\n"
                yield "data: [DONE]\n\n"
            return StreamingResponse(chunks(), media_type="text/event-stream")
        message = ({"role": "assistant", "content": None, "tool_calls": [CALL]} if "tool" in text and last["role"] == "user"
                   else {"role": "assistant", "content": f"echo: {text}"})
        return {"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}

    return app


def test_turn_to_store_and_accumulator_are_pure():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    assert turn_to_store(msgs) == [msgs[3]]
    assert turn_to_store(msgs[:2]) == [msgs[1]]
    acc = Accumulator()
    for piece in (b'data: {"choices":[{"index":0,"delta":{"content":"He', b'llo"}}]}\n\ndata: [DONE]\n\n'):
        acc.feed(piece)  # a chunk boundary inside a line
    assert acc.message() == {"role": "assistant", "content": "Hello"}


@pytest.fixture
def proxied(tmp_path):
    seen: list = []
    with serve_asgi(fake_upstream(seen)) as upstream, \
            Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory:
        settings = ServerSettings(rate_limit=0, upstream=f"{upstream}/v1", upstream_key="sk-up")
        with LiveServer(memory, settings) as live:
            key = live.key("acme", "app")
            client = openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0)
            yield client, memory, seen, live


def test_proxy_adds_memory_forwards_and_stores_the_turn(proxied):
    client, memory, seen, live = proxied
    memory.user("lin", agent="acme").remember("Lin lives in Lisbon and prefers short answers")
    answer = client.chat.completions.create(
        model="fake", user="lin", messages=[{"role": "system", "content": "You are helpful."},
                                            {"role": "user", "content": "As I said last time, where do I live?"}])
    assert answer.choices[0].message.content == "echo: As I said last time, where do I live?"
    assert answer.usage.total_tokens == 14  # the upstream's body, unchanged
    sent = seen[-1]["body"]["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("You are helpful.")
    assert any("Lisbon" in m["content"] for m in sent if m["role"] == "system")  # recalled memory
    assert seen[-1]["auth"] == "Bearer sk-up"  # the upstream's key, never the caller's
    log = memory.messages("lin", "proxy", agent_id="acme")
    assert [(m.role.value, m.content) for m in log] == [
        ("user", "As I said last time, where do I live?"), ("assistant", "echo: As I said last time, where do I live?")]
    # the next call of the same conversation stores only what is new; a header names the user
    client.chat.completions.create(model="fake", messages=[
        {"role": "user", "content": "As I said last time, where do I live?"},
        {"role": "assistant", "content": "echo: As I said last time, where do I live?"},
        {"role": "user", "content": "thanks"}], extra_headers={"X-Memstrata-User": "lin"})
    assert [m.content for m in memory.messages("lin", "proxy", agent_id="acme")][2:] == ["thanks", "echo: thanks"]
    audit = memory.store.list_audit("acme", action="proxy")
    assert [a.status for a in audit] == [200, 200] and all(a.user_id == "lin" for a in audit)
    assert 'memstrata_proxy_upstream_tokens_total{kind="prompt"} 22.0' in live.client().get("/metrics").text


def test_proxy_passes_tool_calls_through_both_ways(proxied):
    client, memory, seen, _ = proxied
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    first = client.chat.completions.create(model="fake", user="lin", tools=tools,
                                           messages=[{"role": "user", "content": "use the tool for Lisbon"}])
    call = first.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "get_weather", '{"city": "Lisbon"}')
    assert seen[-1]["body"]["tools"] == tools
    second = client.chat.completions.create(model="fake", user="lin", tools=tools, messages=[
        {"role": "user", "content": "use the tool for Lisbon"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24°C"}])
    assert second.choices[0].message.content == "echo: sunny, 24°C"
    forwarded = seen[-1]["body"]["messages"]
    assert forwarded[-2]["tool_calls"][0]["id"] == "call_1" and forwarded[-1]["tool_call_id"] == "call_1"
    log = memory.messages("lin", "proxy", agent_id="acme")
    assert [m.role.value for m in log] == ["user", "assistant", "tool", "assistant"]
    assert log[1].tool_calls[0]["function"]["name"] == "get_weather" and log[2].tool_call_id == "call_1"
    streamed = client.chat.completions.create(model="fake", user="lin", tools=tools, stream=True,
                                              messages=[{"role": "user", "content": "tool again"}])
    pieces = [c.choices[0].delta for c in streamed if c.choices]
    assert "".join(d.tool_calls[0].function.arguments or "" for d in pieces if d.tool_calls) == '{"city": "Lisbon"}'
    stored = memory.messages("lin", "proxy", agent_id="acme")[-1]
    assert stored.tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}


def test_proxy_streams_and_relays_errors_unchanged(proxied):
    client, memory, seen, live = proxied
    stream = client.chat.completions.create(model="fake", user="zoe", stream=True,
                                            messages=[{"role": "user", "content": "stream please"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "Streamed answer"
    assert [m.content for m in memory.messages("zoe", "proxy", agent_id="acme")] == ["stream please", "Streamed answer"]
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="fake", user="zoe", messages=[{"role": "user", "content": "fail now"}])
    assert caught.value.body == {"message": "slow down", "type": "rate_limit"}  # the upstream's own error
    assert len(memory.messages("zoe", "proxy", agent_id="acme")) == 2  # a failed call stores nothing
    with pytest.raises(openai.UnprocessableEntityError, match="X-Memstrata-User"):
        client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "who am I?"}])
    mine = openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme", "end-user", user_id="zoe"),
                         max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        mine.chat.completions.create(model="fake", user="lin", messages=[{"role": "user", "content": "hi"}])
    reader = openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme", "read-only"), max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        reader.chat.completions.create(model="fake", user="lin", messages=[{"role": "user", "content": "hi"}])


def test_proxy_without_a_reachable_upstream_is_a_502(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, \
            LiveServer(memory, ServerSettings(rate_limit=0, upstream="http://127.0.0.1:9/v1")) as live:
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme", "app"), max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="m", user="lin", messages=[{"role": "user", "content": "hi"}])
        assert caught.value.status_code == 502 and "upstream" in caught.value.message
        assert memory.messages("lin", "proxy", agent_id="acme") == []


@pytest.mark.slow
@pytest.mark.skipif(not llama_cpp_available(), reason="needs pip install 'memstrata[local-llm]'")
def test_proxy_against_the_real_llama_cpp_server(tmp_path):
    llm = subprocess.Popen([sys.executable, "-m", "memstrata.cli.main", "llm", "serve", "--port", "0",
                            "--threads", "2", "--n-ctx", "2048"], stdout=subprocess.PIPE, text=True)
    try:
        base = re.search(r"at (http://\S+/v1)", llm.stdout.readline()).group(1)
        with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, \
                LiveServer(memory, ServerSettings(rate_limit=0, upstream=base, proxy_budget=600)) as live:
            memory.user("lin", agent="acme").remember("Lin keeps bees on her roof")
            client = openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme", "app"), max_retries=0)
            question = [{"role": "user", "content": "As I said last time, what do I keep on my roof?"}]
            plain = client.chat.completions.create(model="smollm2", user="lin", messages=question,
                                                   max_tokens=24, temperature=0)
            text = plain.choices[0].message.content
            assert plain.object == "chat.completion" and isinstance(text, str) and text
            # another question: the same exchange sent twice is stored once (a retry), and at
            # temperature 0 the model may well answer it word for word again
            again = [{"role": "user", "content": "Remind me, what is on my roof?"}]
            chunks = list(client.chat.completions.create(model="smollm2", user="lin", messages=again,
                                                         max_tokens=24, temperature=0, stream=True))
            streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert streamed
            log = memory.messages("lin", "proxy", agent_id="acme")
            assert [m.role.value for m in log] == ["user", "assistant", "user", "assistant"]
            assert log[1].content == text and log[3].content == streamed  # what the caller saw
    finally:
        llm.terminate()
        llm.wait(30)

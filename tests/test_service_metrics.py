"""/metrics counts what operators watch: request latency per route, the job queue, and
the write path's LLM calls and tokens (through the service's metered usage sink)."""

from __future__ import annotations

import re

from service_fixture import LiveServer, serve_asgi
from test_service_proxy import fake_upstream

from memstrata import Memory


def _value(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_requests_jobs_and_llm_calls(tmp_path):
    seen: list = []
    with serve_asgi(fake_upstream(seen)) as upstream, \
            Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256",
                   llm=f"openai-compatible:{upstream}/v1#fake", worker="off") as memory, \
            LiveServer(memory) as live:
        with live.client(live.key("acme", "app")) as c:
            c.post("/v1/users/lin/messages", json={"messages": [
                {"role": "user", "content": "I moved to Lisbon last month."},
                {"role": "assistant", "content": "Nice!"}]})
            before = live.client().get("/metrics").text
            assert _value(before, "memstrata_jobs", status="pending") >= 1
            memory.flush()  # the extraction job calls the LLM through the metered sink
            text = live.client().get("/metrics").text
        assert seen, "the write path called the LLM"
        calls = sum(float(m) for m in re.findall(r'memstrata_llm_calls_total\{[^}]*purpose="extract"[^}]*\} (\S+)', text))
        assert calls >= 1
        assert _value(text, "memstrata_llm_tokens_total", purpose="extract", kind="prompt") >= 11
        assert _value(text, "memstrata_jobs", status="pending") == 0
        assert _value(text, "memstrata_http_request_duration_seconds_count", method="POST",
                      route="/v1/users/{user_id}/messages") == 1
        assert _value(text, "memstrata_http_requests_total", method="POST",
                      route="/v1/users/{user_id}/messages", status="201") == 1

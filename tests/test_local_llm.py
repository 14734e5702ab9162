"""End to end against a real llama.cpp server running SmolLM2-135M on 127.0.0.1.

The tiny model answers nonsense; the point is that whatever it says goes through the
same client as OpenAI, is validated item by item, and never crashes or leaks values out
of range. Skipped only when llama-cpp-python is not installed (CI installs the
``local-llm`` extra).
"""

from __future__ import annotations

import sys

import pytest

from memstrata.errors import ConfigError
from memstrata.prompts import (CONFLICT_SCHEMA, EXTRACTION_SCHEMA, SUMMARY_SCHEMA, conflict_prompt,
                               extraction_prompt, first_summary_prompt)
from memstrata.providers.llm import UsageLog, parse_provider
from memstrata.providers.local import LocalLLMServer, find_smollm2_gguf, llama_cpp_available

KINDS = {"fact", "preference", "instruction", "todo", "event"}
CONVERSATION = [
    {"role": "user", "content": "I'm a backend developer. I switched from Java to Go last month."},
    {"role": "assistant", "content": "Nice, Go is great for services."},
    {"role": "user", "content": "Please keep your answers short. 我下周要把支付服务迁移到 Go。"},
]


def test_missing_llama_cpp_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if not installed
    assert not llama_cpp_available()
    with pytest.raises(ConfigError, match=r"pip install 'memstrata\[local-llm\]'"):
        LocalLLMServer().start()


def test_missing_model_file(tmp_path):
    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed: pip install 'memstrata[local-llm]'")
    with pytest.raises(ConfigError, match="no GGUF model"):
        LocalLLMServer(tmp_path / "nope.gguf").start()


needs_llama = pytest.mark.skipif(
    not llama_cpp_available(),
    reason="llama-cpp-python is not installed: pip install 'memstrata[local-llm]'")


@pytest.fixture(scope="module")
def server(local_llm):
    return local_llm  # conftest.py: SmolLM2 in llama.cpp's server, once per module


@needs_llama
def test_smollm2_model_is_found():
    path = find_smollm2_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000


def _check_extraction(parsed) -> None:
    for item in parsed.items:
        assert item["kind"] in KINDS
        assert isinstance(item["content"], str) and item["content"]
        assert 0.0 <= item["confidence"] <= 1.0 and 0.0 <= item["importance"] <= 1.0
    for rejection in parsed.rejected:
        assert rejection.reason


@needs_llama
def test_extraction_through_the_real_server(server):
    log = UsageLog()
    llm = parse_provider(server.spec, usage=log, timeout_s=300, max_retries=1)
    for mode in ("json_schema", "prompt"):  # server-enforced if it can, then prompt-only
        llm.structured_output = mode
        result = llm.complete(extraction_prompt(CONVERSATION), schema=EXTRACTION_SCHEMA,
                              max_tokens=128, purpose="extract")
        assert isinstance(result.text, str)
        _check_extraction(result.parsed)  # whatever came back, nothing out of range
    summary = log.summary(by="purpose")["extract"]
    assert summary.calls == 2 and summary.failures == 0 and summary.prompt_tokens > 0


@needs_llama
def test_verdict_and_summary_never_crash(server):
    llm = server.llm(timeout_s=300, max_retries=1)
    verdict = llm.complete(conflict_prompt("用户用 Java", "用户改用 Go 了"),
                           schema=CONFLICT_SCHEMA, max_tokens=48).parsed
    assert verdict.first is None or verdict.first["relation"] in (
        "contradiction", "same", "scenario_differs", "unrelated")
    summary = llm.complete(first_summary_prompt(CONVERSATION), schema=SUMMARY_SCHEMA,
                           max_tokens=96).parsed
    if summary.first is not None:
        assert all(len(v) <= 200 for v in summary.first.values())

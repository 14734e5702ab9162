"""``memstrata.compat.mem0.Memory`` runs Mem0's documented examples (its README and
quickstart: ``from mem0 import Memory`` → ``from memstrata.compat.mem0 import Memory``,
nothing else changed) and answers in Mem0's shapes."""

from __future__ import annotations

import pytest

from memstrata import NotFoundError, ValidationError


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Memory() opens ./memstrata.db, as Mem0's Memory() opens its own
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash:256")
    return tmp_path


def test_the_quickstart_of_mem0(here):
    # --- Mem0's quickstart, the import changed ---
    from memstrata.compat.mem0 import Memory

    m = Memory()
    messages = [
        {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
        {"role": "assistant", "content": "How about thriller movies? They can be quite engaging."},
        {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
        {"role": "assistant", "content": "Got it! I'll avoid thriller recommendations and suggest sci-fi movies in the future."}
    ]
    result = m.add(messages, user_id="alice", metadata={"category": "movies"})
    related_memories = m.search(query="What do you know about me?", user_id="alice")
    all_memories = m.get_all(user_id="alice")
    # --- end of the example ---
    learned = [r["memory"] for r in result["results"]]
    assert any("sci-fi" in text for text in learned), learned
    assert all(r["event"] == "ADD" and r["id"].startswith("mem_") for r in result["results"])
    assert {r["id"] for r in all_memories["results"]} == {r["id"] for r in result["results"]}
    assert set(related_memories) == {"results"}
    movies = m.search(query="which movies do I love?", user_id="alice")["results"]
    assert movies and "sci-fi" in movies[0]["memory"] and isinstance(movies[0]["score"], float)
    assert set(movies[0]) >= {"id", "memory", "score", "metadata", "created_at", "updated_at", "user_id"}
    m.close()


def test_the_crud_examples_of_mem0(here):
    from memstrata.compat.mem0 import Memory

    m = Memory()
    # 1. Add: Store a memory from any unstructured text
    result = m.add("I am working on improving my tennis skills. Suggest some online courses.", user_id="alice",
                   metadata={"category": "hobbies"})
    memory_id_1 = result["results"][0]["id"]
    # 2. Update: update the memory
    result = m.update(memory_id=memory_id_1, data="Likes to play tennis on weekends")
    assert result == {"message": "Memory updated successfully!"}
    # 3. Search: search related memories
    related_memories = m.search(query="What are Alice's hobbies?", user_id="alice")
    assert related_memories["results"][0]["memory"] == "Likes to play tennis on weekends"
    # 4. Get all memories
    all_memories = m.get_all(user_id="alice")
    memory_id = all_memories["results"][0]["id"]  # get a memory_id
    assert m.get(memory_id)["memory"] == "Likes to play tennis on weekends"  # by id alone, as in Mem0
    # 5. Get memory history for a particular memory_id
    history = m.history(memory_id=memory_id_1)
    assert [h["event"] for h in history] == ["ADD", "UPDATE"]
    assert history[1]["old_memory"] != history[1]["new_memory"] == "Likes to play tennis on weekends"
    # 6. Delete, delete all, reset
    m.add("I keep bees on my roof.", user_id="bob", infer=False)
    assert m.delete(memory_id=memory_id) == {"message": "Memory deleted successfully!"}
    with pytest.raises(NotFoundError):
        m.get(memory_id)
    assert m.delete_all(user_id="alice") == {"message": "Memories deleted successfully!"}
    assert m.get_all(user_id="alice") == {"results": []}
    assert [r["memory"] for r in m.get_all(user_id="bob")["results"]] == ["I keep bees on my roof."]
    m.reset()
    assert m.get_all(user_id="bob") == {"results": []}
    with pytest.raises(ValidationError, match="pass user_id"):
        m.search("anything")
    m.close()


def test_the_migration_guide_names_every_call_of_the_shim():
    from pathlib import Path

    from memstrata.compat.mem0 import Memory

    guide = (Path(__file__).resolve().parent.parent / "docs" / "migrating-from-mem0.md").read_text()
    for name in ("add", "search", "get", "get_all", "update", "history", "delete", "delete_all", "reset"):
        assert callable(getattr(Memory, name))
        assert f"`m.{name}(" in guide, name

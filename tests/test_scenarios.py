"""The bilingual L3 scenario suite: multi-session conversations through the
public API on the real default embedder (multilingual-e5-small), asserting the final
memory state. Extraction runs in the background worker; ``flush()`` waits for it.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from memstrata import Memory, Status
from memstrata.types import utcnow

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def say(memory: Memory, user: str, session: str, *turns: str) -> None:
    """Each user turn with a short assistant reply, then wait for extraction."""
    for text in turns:
        memory.add([{"role": "user", "content": text}, {"role": "assistant", "content": "OK."}],
                   user_id=user, session_id=session)
    memory.flush(timeout=120)


def active(memory: Memory, user: str) -> list[str]:
    return sorted(i.content for i in memory.list(user))


def everything(memory: Memory, user: str):
    return memory.list(user, filters={"status": ["active", "superseded", "inactive", "done"]})


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> Memory:
    path = tmp_path_factory.mktemp("scenarios") / "m.db"
    with Memory(f"sqlite:///{path}") as m:  # the default embedder: local:e5-small
        yield m


def test_java_to_go_supersedes_with_version_two_and_history(memory: Memory) -> None:
    say(memory, "u-java", "s1", "I use Java at work every day.")
    say(memory, "u-java", "s2", "I switched from Java to Go last month.")
    items = everything(memory, "u-java")
    go = next(i for i in items if i.value == "Go")
    java = next(i for i in items if i.value == "Java")
    assert go.status is Status.ACTIVE and go.version == 2 and go.supersedes == java.id
    assert java.status is Status.SUPERSEDED
    assert [v.op for v in memory.history(java.id, "u-java")] == ["create", "supersede"]
    assert memory.history(java.id, "u-java")[-1].reason.startswith("slot.")
    assert active(memory, "u-java") == ["User uses Go"]


@pytest.mark.parametrize("second", ["My main language is Python.", "我的主力语言是Python"])
def test_restating_a_fact_boosts_one_item(memory: Memory, second: str) -> None:
    user = f"u-py-{len(second)}"
    say(memory, user, "s1", "I use Python.")
    [before] = memory.list(user)
    say(memory, user, "s2", second)
    [after] = memory.list(user)
    assert after.id == before.id
    assert after.confidence == pytest.approx(before.confidence + 0.05)
    assert [v.op for v in memory.history(after.id, user)][-1] == "boost"


def test_a_joke_is_not_stored_long_term(memory: Memory) -> None:
    say(memory, "u-mars", "s1", "I'm from Mars, haha", "我来自火星哈哈")
    assert memory.list("u-mars") == []
    assert len(memory.messages("u-mars", "s1")) == 4  # the raw turns are kept


def test_a_todo_survives_sessions_and_decay_until_done(memory: Memory) -> None:
    say(memory, "u-todo", "s1", "Remind me to renew my passport next week.")
    say(memory, "u-todo", "s2", "I like hiking.", "提醒我周五给妈妈打电话")
    todos = memory.list("u-todo", filters={"kind": "todo"})
    assert len(todos) == 2 and any("passport" in t.content for t in todos)
    later = utcnow() + timedelta(days=400)
    report = memory.maintain("u-todo", now=later)
    assert report.deactivated == 1  # the old preference, not the todos
    assert {t.id for t in memory.list("u-todo", filters={"kind": "todo"})} == {t.id for t in todos}
    passport = next(t for t in todos if "passport" in t.content)
    memory.complete(passport.id, "u-todo")
    assert memory.get(passport.id, "u-todo").status is Status.DONE
    assert "passport" not in " ".join(memory.profile("u-todo").current)


def test_likes_accumulate(memory: Memory) -> None:
    say(memory, "u-likes", "s1", "I like hiking.")
    say(memory, "u-likes", "s2", "I like jazz.", "我喜欢爬山")
    say(memory, "u-likes", "s3", "I also like chess.")
    likes = [i for i in memory.list("u-likes") if i.attribute == "likes"]
    assert {i.value for i in likes} >= {"hiking", "jazz", "chess"}
    assert all(i.status is Status.ACTIVE and i.version == 1 for i in likes)


def test_thumbs_down_then_maintain_deactivates(memory: Memory) -> None:
    say(memory, "u-fb", "s1", "I live in Berlin.", "I like sushi.")
    berlin = next(i for i in memory.list("u-fb") if "Berlin" in i.content)
    down = memory.feedback(berlin.id, "u-fb", "down")
    assert down.confidence < 0.3 and down.status is Status.ACTIVE
    report = memory.maintain("u-fb")
    assert report.deactivated == 1
    assert memory.get(berlin.id, "u-fb").status is Status.INACTIVE
    assert active(memory, "u-fb") == ["User likes sushi"]
    assert [v.op for v in memory.history(berlin.id, "u-fb")] == ["create", "feedback", "decay"]
    assert berlin.id not in [h.id for h in memory.search("Berlin", "u-fb")]


def test_profile_reflects_the_latest_state_and_manual_edits(memory: Memory) -> None:
    say(memory, "u-prof", "s1", "My name is Alice.", "I work as a data engineer.")
    say(memory, "u-prof", "s2", "I'm now a product manager.", "Please keep it short.")
    profile = memory.profile("u-prof")
    assert profile.name == "Alice"
    assert "product manager" in (profile.role or "") and "data engineer" not in (profile.role or "")
    assert any("short" in p for p in profile.preferences)
    edited = memory.update_profile("u-prof", name="Ally", goals=["ship v2"])
    assert edited.name == "Ally" and edited.goals == ("ship v2",)
    assert [v.version for v in memory.profile_history("u-prof")] == [1]
    assert memory.update_profile("u-prof", name=None).name == "Alice"  # back to aggregation


def test_undo_a_supersede_restores_the_old_value(memory: Memory) -> None:
    say(memory, "u-undo", "s1", "I live in Paris.")
    say(memory, "u-undo", "s2", "I moved to London.")
    london = next(i for i in memory.list("u-undo") if "London" in i.content)
    restored = memory.undo(london.id, "u-undo")
    assert restored is not None and "Paris" in restored.content
    assert active(memory, "u-undo") == [restored.content]


def test_forget_in_conversation(memory: Memory) -> None:
    say(memory, "u-ask", "s1", "I'm allergic to peanuts.", "I like tennis.")
    say(memory, "u-ask", "s2", "Please forget my allergy.")
    assert all("peanut" not in c for c in active(memory, "u-ask"))
    say(memory, "u-ask", "s3", "我喜欢吃榴莲", "忘掉这个")
    assert all("榴莲" not in c for c in active(memory, "u-ask"))
    assert any("tennis" in c for c in active(memory, "u-ask"))


def test_forget_naming_nothing_stored_deletes_nothing(memory: Memory) -> None:
    say(memory, "u-nothing", "s1", "I'm allergic to peanuts.", "I like tennis.", "I live in Paris.")
    before = active(memory, "u-nothing")
    assert len(before) == 3
    say(memory, "u-nothing", "s2", "Please forget my cat's name.")
    say(memory, "u-nothing", "s3", "请忘掉我的车牌号")
    assert active(memory, "u-nothing") == before


def test_concurrent_adds_for_one_user_lose_and_duplicate_nothing(memory: Memory) -> None:
    sports = ["hiking", "tennis", "chess", "jazz", "sushi", "cycling"]

    def talk(i: int) -> None:
        for sport in sports:
            memory.add([{"role": "user", "content": f"I like {sport}."},
                        {"role": "assistant", "content": "Nice."}],
                       user_id="u-conc", session_id=f"thread-{i}")

    threads = [threading.Thread(target=talk, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    memory.flush(timeout=120)
    assert sum(len(memory.messages("u-conc", f"thread-{i}")) for i in range(4)) == 48
    likes = memory.list("u-conc")
    assert sorted(i.value for i in likes) == sorted(sports)  # one item each, boosted
    assert all(i.confidence == pytest.approx(min(1.0, 0.8 + 3 * 0.05)) for i in likes)


def test_forget_leaves_no_trace_in_search_rows_or_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "forget.db"
    with Memory(f"sqlite:///{path}") as memory:
        say(memory, "u-f", "s1", "I live in Zanzibar.", "I like tennis.")
        say(memory, "other", "s1", "I like tennis.")
        [item] = [i for i in memory.list("u-f") if "Zanzibar" in i.content]
        memory.forget(item.id, "u-f", messages=True)
        assert memory.search("Zanzibar", "u-f", mode="lexical") == []
        assert all("zanzibar" not in h.text.lower() for h in memory.search("Zanzibar", "u-f"))
        assert all("Zanzibar" not in (m.content or "") for m in memory.messages("u-f", "s1"))
        memory.compact()
        rows = memory.store._x("SELECT text FROM docs").fetchall()
        assert all("zanzibar" not in r[0].lower() for r in rows)
        memory.forget_user("u-f")
        assert memory.list("u-f") == [] and memory.messages("u-f", "s1") == []
        assert memory.users()[0].user_id == "other"
    for suffix in ("", "-wal"):
        file = Path(str(path) + suffix)
        if file.exists():
            data = file.read_bytes().lower()
            assert b"zanzibar" not in data, suffix
            assert b"tennis" in data or suffix  # the other user's memory is still there

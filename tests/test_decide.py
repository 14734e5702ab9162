"""Dedup, conflict, decay, eviction, feedback and forget requests as pure functions."""

from datetime import UTC, datetime, timedelta

import pytest

from memstrata.errors import ValidationError
from memstrata.layers.semantic.decide import (Action, DecayConfig, DecideConfig, Neighbor,
                                              apply_decision, apply_feedback, decay, decide, evict,
                                              forget_request, to_item)
from memstrata.layers.semantic.extract import extract_text
from memstrata.types import Kind, MemoryItem, Status

NOW = datetime(2024, 6, 1, tzinfo=UTC)


_ids = iter(range(10**6))


def cand(text: str):
    found = extract_text(text, message_id=f"m{next(_ids)}")
    assert found, text
    return found[0]


def stored(text: str, id: str = "i1", **changes) -> MemoryItem:
    item = to_item(cand(text), id=id, user_id="u", now=NOW - timedelta(days=10))
    return item.evolve(**changes)


def test_java_then_go_supersedes_with_version_2():
    old = stored("I use Java")
    new = cand("I switched to Go")
    d = decide(new, [Neighbor(old, 0.903)])
    assert d.action is Action.SUPERSEDE and d.target_id == "i1" and d.version == 2
    rows = apply_decision(d, new, old, id="i2", user_id="u", now=NOW)
    assert rows[0].status is Status.SUPERSEDED and rows[0].id == "i1"
    assert rows[1].version == 2 and rows[1].supersedes == "i1" and rows[1].value == "Go"


def test_chinese_change_supersedes_english_item():
    d = decide(cand("我改用Go了"), [Neighbor(stored("I use Java"), 0.84)])
    assert d.action is Action.SUPERSEDE


@pytest.mark.parametrize("text, sim", [("my main language is Python", 0.931),
                                       ("我的主力语言是Python", 0.837)])
def test_same_fact_reworded_boosts(text, sim):
    old = stored("I use Python", confidence=0.8)
    new = cand(text)
    d = decide(new, [Neighbor(old, sim)])
    assert d.action is Action.BOOST and d.target_id == "i1"
    assert d.confidence == pytest.approx(0.85)
    rows = apply_decision(d, new, old, id="x", user_id="u", now=NOW)
    assert len(rows) == 1 and rows[0].id == "i1"
    assert rows[0].content == max(old.content, new.content, key=len)


def test_boost_is_capped_at_one():
    d = decide(cand("I use Python"), [Neighbor(stored("I use Python", confidence=0.98), 0.99)])
    assert d.confidence == 1.0


def test_likes_accumulate():
    d = decide(cand("I love jazz"), [Neighbor(stored("I love hiking"), 0.93)])
    assert d.action is Action.ADD


def test_negated_like_supersedes_that_like_only():
    likes = [Neighbor(stored("I love hiking", id="h"), 0.88),
             Neighbor(stored("I love jazz", id="j"), 0.86)]
    d = decide(cand("I no longer like jazz"), likes)
    assert d.action is Action.SUPERSEDE and d.target_id == "j"


def test_multi_valued_replaced_value_supersedes():
    vim = Neighbor(stored("I use Vim", id="v"), 0.9)
    d = decide(cand("I switched from vim to Emacs"), [vim])
    assert d.action is Action.SUPERSEDE and d.target_id == "v" and d.reason == "slot.replaces"
    assert decide(cand("I use Emacs"), [vim]).action is Action.ADD


def test_single_valued_city_supersedes_and_scenario_keeps_both():
    d = decide(cand("I live in Paris"), [Neighbor(stored("I live in Berlin"), 0.91)])
    assert d.action is Action.SUPERSEDE
    old = stored("I use Java at work")
    d = decide(cand("I use Python for side projects"), [Neighbor(old, 0.9)])
    assert d.action is Action.KEEP_BOTH and d.tags == ("past", "recent")
    rows = apply_decision(d, cand("I use Python for side projects"), old, id="n",
                          user_id="u", now=NOW)
    assert "past" in rows[0].tags and rows[1].tags == ("recent",)


def test_high_similarity_without_shared_slots_does_not_merge():
    # e5 scores these 0.928: different attributes must never be deduplicated
    d = decide(cand("我喜欢爬山"), [Neighbor(stored("我叫小王"), 0.928)])
    assert d.action is Action.ADD


def test_free_text_dedup_needs_similarity_and_shared_words():
    old = stored("I usually go to the gym every morning")
    assert decide(cand("I always go to the gym every morning"),
                  [Neighbor(old, 0.97)]).action is Action.BOOST
    assert decide(cand("I usually read before bed"),
                  [Neighbor(old, 0.95)]).action is Action.ADD


def test_band_uses_judge_when_given():
    old = stored("I usually go to the gym every morning")
    new = cand("I usually swim every morning")
    calls = []

    def judge(c, item):
        calls.append((c.content, item.id))
        return "contradiction"
    assert decide(new, [Neighbor(old, 0.85)], judge=judge).action is Action.SUPERSEDE
    assert calls == [(new.content, "i1")]
    assert decide(new, [Neighbor(old, 0.85)], judge=lambda c, i: "scenario").action is Action.KEEP_BOTH
    assert decide(new, [Neighbor(old, 0.6)], judge=judge).action is Action.ADD


def test_thresholds_are_configurable():
    old = stored("I usually go to the gym every morning")
    new = cand("I always go to the gym every morning")
    assert decide(new, [Neighbor(old, 0.93)], DecideConfig(dedup_threshold=0.95)).action is Action.ADD


def test_reextraction_of_same_message_is_ignored():
    c = cand("I love hiking")
    old = to_item(c, id="i1", user_id="u", now=NOW)
    assert decide(c, [Neighbor(old, 1.0)]).action is Action.IGNORE
    assert apply_decision(decide(c, [Neighbor(old, 1.0)]), c, old, id="x", user_id="u", now=NOW) == ()


def test_inactive_neighbours_are_ignored():
    old = stored("I use Java", status=Status.SUPERSEDED)
    assert decide(cand("I use Go"), [Neighbor(old, 0.93)]).action is Action.ADD


# -- decay, eviction, feedback --------------------------------------------------------------

def item(id, *, kind=Kind.FACT, age=0, access=0, conf=0.8, imp=0.5, status=Status.ACTIVE):
    t = NOW - timedelta(days=age)
    return MemoryItem(id=id, user_id="u", kind=kind, content=id, confidence=conf,
                      importance=imp, status=status, created_at=t, updated_at=t,
                      access_count=access, last_accessed=t if access else None)


def test_decay_rules():
    items = [item("old-unused", age=100, access=2), item("old-used", age=100, access=3),
             item("new", age=5), item("doubted", conf=0.2), item("todo", kind=Kind.TODO, age=400),
             item("mid-unused", age=60)]
    changed = {i.id: i for i in decay(items, NOW)}
    assert changed["old-unused"].status is Status.INACTIVE
    assert changed["doubted"].status is Status.INACTIVE
    assert "old-used" not in changed and "new" not in changed and "todo" not in changed
    assert changed["mid-unused"].status is Status.ACTIVE
    assert changed["mid-unused"].metadata["weight"] < 1.0
    assert decay([changed.get(i.id, i) for i in items], NOW) == ()


def test_decay_is_idempotent_and_configurable():
    items = [item("a", age=60), item("b", age=40, access=0)]
    first = decay(items, NOW)
    merged = [{i.id: i for i in first}.get(x.id, x) for x in items]
    assert decay(merged, NOW) == ()
    assert decay([item("c", age=20)], NOW, DecayConfig(max_age_days=10))[0].status is Status.INACTIVE


def test_done_todo_decays_but_open_todo_never():
    assert decay([item("t", kind=Kind.TODO, age=1000, conf=0.1)], NOW) == ()
    assert decay([item("t", kind=Kind.TODO, age=1000, status=Status.DONE)], NOW) == ()


def test_thumbs_down_then_decay_deactivates():
    down = apply_feedback(item("x"), "down", NOW)
    assert down.confidence < 0.3
    assert decay([down], NOW)[0].status is Status.INACTIVE
    assert apply_feedback(item("y", conf=0.95), "up").confidence == 1.0
    with pytest.raises(ValidationError):
        apply_feedback(item("z"), "sideways")


def test_evict_lowest_value_keeps_open_todos():
    items = [item("low", imp=0.1), item("high", imp=0.9), item("todo", kind=Kind.TODO, imp=0.05),
             item("mid", imp=0.5), item("gone", status=Status.INACTIVE)]
    assert evict(items, 3) == ("low",)
    assert evict(items, 1) == ("low", "mid", "high")
    assert evict(items, 10) == ()


# -- forget requests -------------------------------------------------------------------------

@pytest.mark.parametrize("text, query", [
    ("forget that", ""), ("Please forget that.", ""), ("forget my address", "address"),
    ("Forget about my ex", "ex"), ("forget what I said about my job", "job"),
    ("忘掉这个", ""), ("忘掉我的住址", "住址"), ("别记住我的电话号码", "电话号码"),
    ("请忘记我刚才说的", ""), ("delete my phone number", "phone number"),
])
def test_forget_requests(text, query):
    assert forget_request(text) == query


@pytest.mark.parametrize("text", ["forget it", "Forget about it!", "don't forget to call mom", "I forgot my keys", "别忘了提醒我",
                                  "remove the header from the file", "I use Java", "我忘了带钥匙"])
def test_not_forget_requests(text):
    assert forget_request(text) is None

"""Correcting a memory's text corrects its slot: the value moves with the words, through
every face (the API, REST, the inspector's form)."""

from __future__ import annotations

import pytest

from memstrata import Memory
from memstrata.layers.semantic.items import follow_value


@pytest.mark.parametrize("before, after, value, expected", [
    ("User lives in Lisbon", "User lives in Porto", "Lisbon", "Porto"),
    ("用户住在里斯本", "用户住在波尔图", "里斯本", "波尔图"),
    ("User lives in New York City", "User lives in Paris", "New York City", "Paris"),
    ("User is 34 years old", "User is 35 years old", "34", "35"),
    ("User lives in Lisbon", "User lives in Lisbon, Portugal", "Lisbon", "Lisbon"),  # still said
    ("User lives in Lisbon", "User moved away", "Lisbon", None),  # no longer supported
])
def test_the_value_follows_the_words(before, after, value, expected):
    assert follow_value(before, after, value) == expected


def test_update_of_the_text_updates_the_slot(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", worker="off") as memory:
        lin = memory.user("lin")
        city = lin.remember("User lives in Lisbon", subject="user", attribute="location", value="Lisbon")
        moved = lin.update(city.id, content="User lives in Porto")
        assert (moved.attribute, moved.value) == ("location", "Porto")
        assert lin.history(city.id)[-1].after["value"] == "Porto"
        explicit = lin.update(city.id, content="User lives in Braga", value="Braga, Portugal")
        assert explicit.value == "Braga, Portugal"  # a value given with the text wins
        zh = lin.remember("用户住在里斯本", attribute="location", value="里斯本")
        assert lin.update(zh.id, content="用户住在波尔图").value == "波尔图"

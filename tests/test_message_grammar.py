"""Messages name things with the article English gives them and types as people say
them: "an app key", "must be an integer" — wherever the word comes from a variable."""

from __future__ import annotations

import pytest
from service_fixture import LiveServer

from memstrata import ConfigError, Memory, ValidationError
from memstrata.config import Settings
from memstrata.errors import type_words, with_article


@pytest.mark.parametrize("noun, phrase", [
    ("app key", "an app key"), ("admin or app key", "an admin or app key"),
    ("read-only key", "a read-only key"), ("end-user key", "an end-user key"),
    ("user message", "a user message"), ("assistant message", "an assistant message"),
    ("input_text part", "an input_text part"), ("image_url part", "an image_url part"),
    ("hour", "an hour"), ("unique id", "a unique id"), ("8,000-character message", "an 8,000-character message"),
    ("12,000-character message", "a 12,000-character message"), ("one-off", "a one-off"),
])
def test_the_article_is_the_one_english_gives(noun, phrase):
    assert with_article(noun) == phrase


def test_types_are_named_as_people_say_them():
    assert [type_words(t) for t in (int, float, str, bool)] == [
        "an integer", "a number", "a string", "true or false"]


def test_a_key_without_the_role_says_an_app_key(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64") as memory, LiveServer(memory) as live:
        with live.client(live.key("acme", "app")) as http:
            answer = http.get("/v1/keys")
        assert answer.status_code == 403
        assert answer.json()["error"]["message"] == "an app key may not do this; it needs an admin key"
        with live.client(live.key("acme", "read-only")) as http:
            message = http.get("/v1/keys").json()["error"]["message"]
        assert message.startswith("a read-only key may not do this; it needs an admin key")


def test_a_setting_from_the_environment_says_an_integer(monkeypatch):
    monkeypatch.setenv("MEMSTRATA_CANDIDATES", "many")
    with pytest.raises(ConfigError, match=r"MEMSTRATA_CANDIDATES='many' is not an integer$"):
        Settings.load()


def test_a_content_part_without_text_names_it_with_an(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64") as memory:
        with pytest.raises(ValidationError, match="an input_text part needs a string 'text'"):
            memory.user("u").add([{"role": "user", "content": [{"type": "input_text", "text": 3}]}])

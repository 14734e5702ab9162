"""Ids and inputs: refused with a MemstrataError before anything is stored, so no two
ids can collide and no stored value can break later calls; CLI errors are one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memstrata import Memory
from memstrata.cli.main import cli
from memstrata.errors import MemstrataError, ValidationError
from memstrata.types import Message, Role, Scope, utcnow

BAD_IDS = ["\x1fkb", "a\x00b", "a\nb", "tab\there", "\x7f", "\x85next", "x" * 257, "bad \ud800 half", "", "  "]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_user_agent_and_session_ids_are_refused_and_store_nothing(memory: Memory, bad: str):
    with pytest.raises(ValidationError):
        memory.user(bad).add("hello")
    if bad.strip():  # an empty namespace is the default one
        with pytest.raises(ValidationError):
            memory.user("lin", agent=bad).add("hello")
    with pytest.raises(ValidationError):
        memory.user("lin").add("hello", session_id=bad)
    assert memory.users() == []


def test_a_nul_byte_cannot_make_two_users_share_a_profile(memory: Memory):
    # "a\x00b" in namespace "" and "b" in namespace "a" joined the same way before
    with pytest.raises(ValidationError):
        Scope("b", "a\x00")
    with pytest.raises(ValidationError):
        Scope("\x00b", "a")
    memory.user("b", agent="a").update_profile(name="Alice")
    assert memory.user("b", agent="a").profile().name == "Alice"
    assert memory.user("b").profile().name is None


@pytest.mark.parametrize("call", [
    {"id": "c1", "type": "function", "function": "get_weather"},
    {"id": "c1", "type": "function", "function": None},
    {"id": "c1", "type": "function", "function": {"name": None}},
    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": 3}},
    "not a call",
    {"id": None, "function": {"name": "f"}},
])
@pytest.mark.parametrize("as_message", [False, True])
def test_a_poison_tool_call_is_refused_and_the_session_stays_usable(memory: Memory, call,
                                                                    as_message: bool):
    lin = memory.user("lin")
    lin.add("What's the weather?", "s1")
    raw = {"role": "assistant", "content": None, "tool_calls": [call]}
    with pytest.raises(ValidationError):
        lin.add([Message(Role.ASSISTANT, None, utcnow(), tool_calls=(call,))] if as_message
                else [raw], "s1")
    assert [m.content for m in lin.messages("s1")] == ["What's the weather?"]
    lin.add([{"role": "user", "content": "I live in Oslo."}], "s1")
    memory.flush(timeout=60)
    assert not lin.jobs(status="failed")
    assert lin.search("Oslo", mode="lexical")
    assert lin.reindex(progress=False) >= 2


def test_text_that_is_not_unicode_is_refused(memory: Memory):
    lin = memory.user("lin")
    with pytest.raises(ValidationError, match="surrogate"):
        lin.add("broken \ud83d text")
    with pytest.raises(MemstrataError):
        lin.remember("broken \udc00 fact")
    with pytest.raises(MemstrataError):
        lin.search("broken \udc00 query")
    assert lin.messages() == [] and lin.list() == []


def test_message_values_are_checked_when_built_directly():
    with pytest.raises(ValidationError):
        Message("user", "hi", utcnow())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Message(Role.USER, 3, utcnow())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Message(Role.TOOL, "42", utcnow())  # a tool result without its call id


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTRATA_STORE", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash:64")
    return lambda *args: CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("args", [
    ["add", "--user", "a\x00b", "hello"],
    ["add", "--user", "u", "--session", "s\nx", "hello"],
    ["add", "--user", "u", "--time", "yesterday-ish", "hello"],
    ["add", "--user", "u", "   "],
    ["search", "--user", "u", "-k", "0", "x"],
    ["search", "--user", "u", "--since", "not a time", "x"],
    ["history", "--user", "u", "mem_missing"],
    ["delete", "--user", "u", "mem_missing"],
    ["add", "--store", "postgresql://u@localhost:99999/db", "--user", "u", "hi"],
    ["add", "--store", "nosuch://x", "--user", "u", "hi"],
])
def test_cli_bad_input_is_one_line_without_a_traceback(run, args):
    out = run(*args)
    assert out.exit_code == 1, (out.output, out.exception)
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.output
    assert "Traceback" not in out.output

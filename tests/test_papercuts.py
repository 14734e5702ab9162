"""What a new user trips over in the first hour, each fixed and kept fixed: the missing
optional extra named, the proxy switched off explaining itself, stored text never
driving the terminal, repeated calls not stored twice."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from service_fixture import LiveServer

from memstrata import Memory

ESC = "\x1b"


def _cli(*args: str, env_store: str, blocked: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``memstrata ARGS`` in a real process; ``blocked`` modules cannot be imported there
    (``sys.modules[name] = None``: what Python does for a package that is not installed)."""
    code = ("import sys\n"
            f"for name in {list(blocked)!r}: sys.modules[name] = None\n"
            "from memstrata.cli.main import main\n"
            f"sys.argv = ['memstrata', *{list(args)!r}]\n"
            "main()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "MEMSTRATA_STORE": env_store,
                               "MEMSTRATA_EMBEDDER": "hash:64"})


def test_keys_without_the_server_extra_names_the_extra(tmp_path):
    store = f"sqlite:///{tmp_path / 'k.db'}"
    for args in (("keys", "create", "--tenant", "acme", "--role", "app"), ("keys", "list")):
        done = _cli(*args, env_store=store, blocked=("fastapi",))
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip() == ("error: this needs the fastapi package, from memstrata's "
                                       "'server' extra: pip install 'memstrata[server]'")
        assert "bug" not in done.stderr and "Traceback" not in done.stderr
    done = _cli("keys", "list", env_store=store)  # with the extra: works
    assert done.returncode == 0, done.stderr


def test_the_proxy_switched_off_says_how_to_turn_it_on(tmp_path):
    openai = pytest.importorskip("openai")
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64") as memory, LiveServer(memory) as live:
        token = live.key("acme", "app")
        with live.client(token) as http:
            answer = http.post("/v1/chat/completions", json={
                "model": "any", "messages": [{"role": "user", "content": "hi"}]})
        assert answer.status_code == 404 and answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["type"] == "NotFoundError"
        assert error["message"].startswith("the memory proxy is off on this server")
        assert "memstrata serve --upstream http://127.0.0.1:8080/v1" in error["message"]
        assert "MEMSTRATA_UPSTREAM" in error["message"]
        # what an OpenAI SDK user sees
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key=token, max_retries=0)
        with pytest.raises(openai.NotFoundError, match="memory proxy is off"):
            client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}])
        assert "/v1/chat/completions" not in httpx.get(f"{live.url}/openapi.json").json()["paths"]


def test_verbose_output_never_prints_escape_codes_from_stored_text(tmp_path):
    store = f"sqlite:///{tmp_path / 'e.db'}"
    hostile = f"hello {ESC}[2J{ESC}]0;pwned\x07 I keep bees\x9b31m"
    added = _cli("-vv", "add", "--user", "u", "--session", "s1", hostile, env_store=store)
    remembered = _cli("-v", "remember", "--user", "u", hostile, env_store=store)
    item_id = remembered.stdout.split()[-1]
    runs = [added, remembered,
            _cli("-vv", "search", "--user", "u", "bees", env_store=store),
            _cli("-v", "search", "--user", "u", "--json", "bees", env_store=store),
            _cli("-v", "list", "--user", "u", env_store=store),
            _cli("-v", "get", "--user", "u", item_id, env_store=store),
            _cli("-v", "history", "--user", "u", item_id, env_store=store)]
    for done in runs:
        assert done.returncode == 0, done.stderr
        for stream in (done.stdout, done.stderr):
            assert ESC not in stream and "\x07" not in stream and "\x9b" not in stream
    assert "\\x1b[2J" in runs[2].stdout  # shown, escaped: the reader sees what is stored
    hits = json.loads(runs[3].stdout)  # JSON output still decodes to the stored text
    assert any(h["text"] == hostile for h in hits)
    # the logs ran: -vv logs the search with its text at DEBUG, -v the remember at INFO
    assert "DEBUG memstrata.search:" in runs[2].stderr and "INFO memstrata" in runs[1].stderr


def test_the_same_add_twice_is_stored_once(tmp_path):
    turns = [{"role": "user", "content": "I moved to Lisbon last spring."},
             {"role": "assistant", "content": "How do you like it?"}]
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", worker="off") as memory:
        lin = memory.user("lin")
        first = lin.add(turns, "s1")
        again = lin.add(turns, "s1")
        assert (first.replayed, again.replayed) == (False, True)
        assert again.message_ids == first.message_ids
        assert len(lin.messages("s1")) == 2 and len(lin.jobs()) == 1  # one extraction, too
        assert lin.add(turns[1:], "s1").replayed  # the session's last turn again
        # not the same add: another session, another turn, or the same words said anew
        assert not lin.add(turns, "s2").replayed
        assert not lin.add("Thanks!", "s1").replayed
        assert not lin.add(turns, "s1").replayed  # said again after "Thanks!"
        timed = {"role": "user", "content": "ok", "created_at": "2024-05-01T10:00:00Z"}
        assert not lin.add(timed, "s3").replayed
        assert lin.add(timed, "s3").replayed  # the same turn, the same time: a retry
        assert not lin.add({**timed, "created_at": "2024-05-01T10:05:00Z"}, "s3").replayed
        assert [len(lin.messages(s)) for s in ("s1", "s2", "s3")] == [5, 2, 2]


def test_remembering_the_same_thing_twice_is_one_memory(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", worker="off") as memory:
        lin = memory.user("lin")
        tea = lin.remember("Prefers oolong tea", kind="preference")
        assert lin.remember("prefers  Oolong tea", kind="preference").id == tea.id
        assert lin.remember("Prefers oolong tea", kind="preference").version == 1
        assert len(lin.list()) == 1 and len(lin.history(tea.id)) == 1
        zh = lin.remember("喜欢喝乌龙茶", kind="preference")
        assert lin.remember("喜欢喝乌龙茶", kind="preference").id == zh.id
        fact = lin.remember("Prefers oolong tea", kind="fact")  # another kind: another memory
        assert fact.id != tea.id
        lin.update(tea.id, status="inactive")  # no longer held: saying it again is new
        assert lin.remember("Prefers oolong tea", kind="preference").id != tea.id
        lin.forget(zh.id)
        assert lin.remember("喜欢喝乌龙茶", kind="preference").id != zh.id
        assert len(lin.list()) == 3  # the new tea, the fact, the new 乌龙茶

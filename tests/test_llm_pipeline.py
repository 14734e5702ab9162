"""The L3 write path with an LLM: garbage in, the offline scenario state out.

Part (a) points Memory at a real HTTP server on 127.0.0.1 (http.server in a thread)
that answers each extraction call from a script of bad answers — code fences,
confidences of 1e15, wrong enum values, truncated JSON, empty output, Chinese content,
HTTP 500 — and checks that the memory state still passes the offline scenario checks,
that every write says which path produced it, that the daily budget turns the LLM off,
and that each job makes exactly one extraction call. Part (b) does the same end to end
against the real llama.cpp server with SmolLM2-135M (a few calls: each is slow).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memstrata import Memory, Status
from memstrata.errors import JobError
from memstrata.layers.semantic.decide import Neighbor, decide
from memstrata.layers.semantic.extract import Candidate
from memstrata.layers.semantic.llm import llm_candidates, merge_candidates
from memstrata.providers.llm import parse_provider
from memstrata.providers.local import llama_cpp_available
from memstrata.types import Kind, MemoryItem, Message, Role, utcnow

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _items(*items) -> str:
    return json.dumps({"items": list(items)}, ensure_ascii=False)


def _purpose(body: dict) -> str:
    system = body["messages"][0]["content"]
    if "extract long-term memories" in system or "记忆抽取器" in system:
        return "extract"
    if "Judge how" in system or "判断关于同一用户" in system:
        return "conflict"
    return "summary"


class Scripted(BaseHTTPRequestHandler):
    """Answers each call with the next scripted (status, content) for its purpose."""

    script: dict[str, list[tuple[int, str]]] = {}
    calls: list[str] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        purpose = _purpose(body)
        Scripted.calls.append(purpose)
        queue = Scripted.script.get(purpose) or []
        status, content = queue.pop(0) if queue else (200, '{"relation": "maybe"}')
        payload = (json.dumps({"model": "scripted", "choices": [{"index": 0, "finish_reason": "stop",
                   "message": {"role": "assistant", "content": content}}],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 20}})
                   if status == 200 else json.dumps({"error": {"message": "boom"}})).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"openai-compatible:http://127.0.0.1:{httpd.server_address[1]}/v1#scripted"
    httpd.shutdown()


@pytest.fixture()
def script():
    Scripted.script, Scripted.calls = {}, []
    return Scripted.script


def _memory(spec: str, **settings) -> Memory:
    llm = parse_provider(spec, max_retries=0, timeout_s=10)
    return Memory("memory://", embedder="hash:256", llm=llm, worker="off", **settings)


def say(memory: Memory, user: str, session: str, *turns: str) -> None:
    for text in turns:
        memory.add([{"role": "user", "content": text}, {"role": "assistant", "content": "OK."}],
                   user_id=user, session_id=session)
    memory.flush(timeout=120)


def everything(memory: Memory, user: str):
    return memory.list(user, filters={"status": ["active", "superseded", "inactive", "done"]})


def _paths_are_recorded(memory: Memory, user: str) -> dict[str, str]:
    """Each item's source equals the actor of its last version; returns content -> actor."""
    out = {}
    for item in everything(memory, user):
        actor = memory.history(item.id, user)[-1].actor
        assert item.metadata["source"] == actor
        assert actor.startswith(("rule:", "llm:"))
        out[item.content] = actor
    return out


def test_scenarios_survive_a_garbage_llm(server, script) -> None:
    script["extract"] = [
        # Java: fenced, confidence 1e15, plus a copy of the prompt's example (ungrounded)
        (200, "```json\n" + _items(
            {"kind": "fact", "content": "User uses Java at work", "attribute": "programming language",
             "value": "Java", "confidence": 1e15},
            {"kind": "preference", "content": "The user prefers short answers"}) + "\n```\nDone!"),
        # Go: one wrong enum value, one valid item with a string confidence
        (200, _items({"kind": "opinion", "content": "Go is nice"},
                     {"kind": "fact", "content": "User switched from Java to Go", "value": "Go",
                      "confidence": "0.9"})),
        # Mars, twice: a believed joke, then truncated JSON
        (200, _items({"kind": "fact", "content": "User is from Mars", "confidence": 1e15})),
        (200, '{"items": [{"kind": "fact", "content": "用户来自火星", "confid'),
        (200, ""),  # the todo: empty output
        (500, ""),  # I like hiking: the server fails
        (200, _items({"kind": "preference", "content": "用户喜欢爵士乐"})),  # Chinese for English
        (200, _items({"kind": "preference", "content": "用户喜欢爬山", "value": "爬山",
                      "importance": "high"}, {"kind": "preference", "content": "用户喜欢爬山"})),
        (200, _items({"kind": "likes", "content": "User likes chess"})),
    ]
    with _memory(server) as memory:
        say(memory, "u-java", "s1", "I use Java at work every day.")
        say(memory, "u-java", "s2", "I switched from Java to Go last month.")
        say(memory, "u-mars", "s1", "I'm from Mars, haha", "我来自火星哈哈")
        say(memory, "u-todo", "s1", "Remind me to renew my passport next week.")
        say(memory, "u-likes", "s1", "I like hiking.")
        say(memory, "u-likes", "s2", "I like jazz.", "我喜欢爬山")
        say(memory, "u-likes", "s3", "I also like chess.")

        items = everything(memory, "u-java")
        go = next(i for i in items if i.value == "Go")
        java = next(i for i in items if i.value == "Java")
        assert go.status is Status.ACTIVE and go.version == 2 and go.supersedes == java.id
        assert java.status is Status.SUPERSEDED and java.confidence <= 1.0
        assert len(memory.list("u-java")) == 1  # the example copy was not stored
        paths = _paths_are_recorded(memory, "u-java")
        assert paths == {"User uses Java at work": "llm:scripted",
                         "User switched from Java to Go": "llm:scripted"}
        assert memory.history(java.id, "u-java")[-1].reason.startswith("slot.")

        assert memory.list("u-mars") == [] and len(memory.messages("u-mars", "s1")) == 4

        [todo] = memory.list("u-todo", filters={"kind": "todo"})
        assert "passport" in todo.content
        assert memory.history(todo.id, "u-todo")[-1].actor.startswith("rule:")

        likes = [i for i in memory.list("u-likes") if i.attribute == "likes"]
        assert {i.value for i in likes} >= {"hiking", "jazz", "chess", "爬山"}
        assert all(i.status is Status.ACTIVE and i.version == 1 for i in likes)
        paths = _paths_are_recorded(memory, "u-likes")
        assert paths["用户喜欢爬山"] == "llm:scripted"  # the LLM's wording, the rule's slots
        assert all(a.startswith("rule:") for c, a in paths.items() if c != "用户喜欢爬山")

        extract_jobs = [j for j in memory.jobs() if j.kind == "extract"]
        assert all(j.status == "done" for j in extract_jobs)
        assert Scripted.calls.count("extract") == len(extract_jobs) == 9  # one call per job
        report = memory.usage()
        assert report.calls["extract"].calls == 9 and report.calls["extract"].failures == 1
        assert report.calls["extract"].prompt_tokens == 800  # the failed call cost nothing
        assert report.writes["llm"] >= 4 and report.writes["rule"] >= 4
        assert report.skipped == {}


def test_the_assistants_self_introduction_is_never_a_user_fact(server, script) -> None:
    # the response SmolLM2 gave for this window, recorded; the user's turn shares
    # "Lin" and "name" with the item, the assistant's turn says it
    script["extract"] = [(200, _items(
        {"kind": "fact", "content": "User's name is Lin", "subject": "user", "value": "Lin",
         "confidence": 0.9},
        {"kind": "fact", "content": "User has knee pain", "value": "knee pain"}))]
    with _memory(server) as memory:
        memory.add([{"role": "user", "content": "Hi Lin, nice name! My knee hurts."},
                    {"role": "assistant", "content": "Hi! My name is Lin, I'm your physiotherapist. "
                                                     "What brings you to my office today?"}],
                   user_id="u-lin", session_id="s1")
        memory.flush(timeout=120)
        assert [i.content for i in memory.list("u-lin")] == ["User has knee pain"]


def test_daily_budget_turns_the_llm_off_and_is_recorded(server, script) -> None:
    script["extract"] = [(200, _items({"kind": "preference", "content": f"User likes {s}",
                                       "value": s})) for s in ("tea", "chess", "golf")]
    with _memory(server, llm_daily_budget=2) as memory:
        say(memory, "u-b", "s1", "I like tea.", "I like chess.", "I like golf.")
        say(memory, "u-c", "s1", "I like golf.")  # another user: a budget of its own
        report = memory.usage("u-b")
        assert report.calls["extract"].calls == 2 and report.skipped == {"extract": 1}
        actors = {i.value: memory.history(i.id, "u-b")[-1].actor for i in memory.list("u-b")}
        assert actors == {"tea": "llm:scripted", "chess": "llm:scripted", "golf": "rule:like"} \
            or actors["golf"].startswith("rule:")
        assert memory.usage("u-c").calls["extract"].calls == 1
        assert Scripted.calls.count("extract") == 3


def test_llm_summary_every_n_messages_and_offline_makes_no_call(server, script) -> None:
    script["summary"] = [(200, '```json\n{"goal": "Learn Go", "decisions": "' + "x" * 500 + '"}\n```')]
    script["extract"] = [(200, "")] * 4
    with _memory(server, summary_every=4) as memory:
        say(memory, "u-s", "s1", "I want to learn Go.", "Let's use goroutines.")
        state = memory.session("u-s", "s1")
        assert state.summary is not None and state.summary.goal == "Learn Go"
        assert len(state.summary.decisions) <= 200
        assert Scripted.calls.count("summary") == 1
        assert memory.usage("u-s").calls["summary"].calls == 1
    calls = len(Scripted.calls)
    with Memory("memory://", embedder="hash:256", worker="off") as offline:
        say(offline, "u-o", "s1", "I like tea.", "I use Java.")
        assert offline.llm is None and offline.usage().calls == {}
        assert offline.usage().writes["rule"] >= 2
    assert len(Scripted.calls) == calls


def test_provider_string_setting_and_a_dead_server_fall_back_to_rules(script) -> None:
    spec = "openai-compatible:http://127.0.0.1:9/v1#nothing-listens"
    with Memory("memory://", embedder="hash:256", llm=spec, worker="off",
                llm_timeout_s=2) as memory:
        memory.llm.max_retries = 0
        say(memory, "u-d", "s1", "I live in Berlin.")
        [item] = memory.list("u-d")
        assert "Berlin" in item.content and item.metadata["source"].startswith("rule:")
        report = memory.usage("u-d")
        assert report.calls["extract"].failures == 1


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_api_key_is_an_error_the_caller_sees(server, script, caplog, status) -> None:
    """Before, a wrong key made the write path fall back to its rules and the caller saw
    nothing but items written by rules; now the job fails with "<endpoint>: authentication
    failed", flush() raises it, no item is written behind it, usage counts every refused
    call and the log says it once."""
    script["extract"] = [(status, ""), (status, "")]
    with _memory(server, job_max_attempts=2) as memory, caplog.at_level("WARNING", "memstrata.llm"):
        memory.add([{"role": "user", "content": "I live in Berlin."},
                    {"role": "assistant", "content": "OK."}], user_id="u-key", session_id="s1")
        with pytest.raises(JobError, match="authentication failed") as failed:
            memory.flush(timeout=120)
        endpoint = server.split(":", 1)[1].split("#")[0]  # http://127.0.0.1:PORT/v1
        assert f"{endpoint}/chat/completions: authentication failed (HTTP {status})" in str(failed.value)
        assert memory.list("u-key") == []  # nothing written behind the caller's back
        [job] = [j for j in memory.jobs("u-key") if j.kind == "extract"]
        assert job.status == "failed" and "ProviderAuthError" in (job.last_error or "")
        report = memory.usage("u-key")
        assert report.errors == {"ProviderAuthError": 2} and report.calls["extract"].failures == 2
        loud = [r for r in caplog.records if r.levelname == "ERROR" and "authentication failed" in r.message]
        assert len(loud) == 1  # once, not once per call


def test_a_refused_api_key_reaches_the_caller_of_the_metered_llm(server, script) -> None:
    from memstrata.errors import MemstrataError, ProviderAuthError
    from memstrata.providers.metered import MeteredLLM
    from memstrata.types import Scope

    script["extract"] = [(401, "")]
    with _memory(server) as memory:
        metered = MeteredLLM(parse_provider(server, max_retries=0, timeout_s=10), memory.store)
        messages = [{"role": "system", "content": "You extract long-term memories."},
                    {"role": "user", "content": "I live in Berlin."}]
        with pytest.raises(ProviderAuthError, match="authentication failed") as refused:
            metered.call(Scope("u-m"), "extract", messages, None)
        assert isinstance(refused.value, MemstrataError) and "127.0.0.1" in str(refused.value)


def test_an_unavailable_endpoint_falls_back_to_the_rules_loudly_and_counted(server, script, caplog) -> None:
    """HTTP 500 (and timeouts, refused connections, 429 after the retries) pass: the rules
    write the turn, the fallback is a WARNING and counted by error class."""
    script["extract"] = [(500, "")]
    with _memory(server) as memory, caplog.at_level("WARNING", "memstrata.llm"):
        say(memory, "u-500", "s1", "I live in Berlin.")
        [item] = memory.list("u-500")
        assert item.metadata["source"].startswith("rule:")
        report = memory.usage("u-500")
        assert report.errors == {"ProviderResponseError": 1} and report.calls["extract"].failures == 1
        said = [r for r in caplog.records if "rules instead" in r.getMessage()]
        assert [r.levelname for r in said] == ["WARNING"] and "HTTP 500" in said[0].getMessage()


class BandEmbedder:
    """Texts about Friday and about Monday sit at cosine 0.8: inside the conflict band."""

    name, dim = "band-test", 3

    def embed(self, texts, *, kind="passage"):
        import numpy as np

        rows = [[0.8, 0.6, 0.0] if "monday" in t.lower() else [1.0, 0.0, 0.0] if "friday"
                in t.lower() else [0.0, 0.0, 1.0] for t in texts]
        return np.asarray(rows, dtype=np.float32)


def test_a_conflict_call_only_in_the_band_and_its_verdict_supersedes(server, script) -> None:
    script["extract"] = [
        (200, _items({"kind": "fact", "content": "User's team ships releases every Friday"})),
        (200, _items({"kind": "fact", "content": "User's team releases on Monday"})),
        (200, _items({"kind": "fact", "content": "User's office has a red door"}))]
    script["conflict"] = [(200, '```json\n{"relation": "contradiction", "confidence": 1e15}\n```')]
    llm = parse_provider(server, max_retries=0, timeout_s=10)
    with Memory("memory://", embedder=BandEmbedder(), llm=llm, worker="off") as memory:
        say(memory, "u-band", "s1", "Our team ships releases every Friday.")
        say(memory, "u-band", "s2", "Our team releases on Monday.", "Our office has a red door.")
        assert Scripted.calls.count("conflict") == 1  # the door is nowhere near the band
        [monday] = [i for i in memory.list("u-band") if "Monday" in i.content]
        assert monday.version == 2 and monday.supersedes
        last = memory.history(monday.supersedes, "u-band")[-1]
        assert (last.op, last.actor, last.reason) == ("supersede", "llm:scripted", "llm")
        assert memory.usage("u-band").calls["conflict"].calls == 1


# -- pure parts --------------------------------------------------------------------------

def _msg(text: str, mid: str = "m1") -> Message:
    return Message(role=Role.USER, content=text, id=mid, seq=0, created_at=utcnow())


def test_grounding_rejects_items_no_user_turn_says() -> None:
    msgs = [_msg("I switched from Java to Go last month.", "m1"), _msg("I like tea.", "m0")]
    items = [{"kind": "fact", "content": "用户现在主要用 Go 写后端", "value": "Go"},
             {"kind": "fact", "content": "User switched to Go", "value": "Go"},
             {"kind": "preference", "content": "User likes tea"}]
    cands, rejected = llm_candidates(items, msgs, own_ids=["m1"], source="llm:x")
    assert [c.content for c in cands] == ["User switched to Go"]
    assert cands[0].source_message_ids == ("m1",) and cands[0].rule == "llm:x"
    assert [r.reason.split(":")[0] for r in rejected] == ["ungrounded", "from an earlier turn (an earlier job's)"]


def test_merge_takes_rule_slots_and_keeps_uncovered_rules() -> None:
    rule = Candidate(Kind.FACT, "User uses Go", attribute="language", value="Go", change=True,
                     replaces="Java", source_message_ids=("m1",), rule="lang")
    other = Candidate(Kind.TODO, "Renew passport", attribute="todo", value="renew passport",
                      source_message_ids=("m1",), rule="todo")
    llm = Candidate(Kind.EVENT, "User switched to Go", attribute="programming language",
                    value="Golang", source_message_ids=("m1",), rule="llm:x", confidence=1.0)
    merged = merge_candidates([llm, llm], [rule, other])
    assert [c.content for c in merged] == ["User switched to Go", "Renew passport"]
    assert merged[0].attribute == "language" and merged[0].kind is Kind.FACT
    assert merged[0].replaces == "Java" and merged[0].rule == "llm:x"


def test_a_judge_without_a_verdict_leaves_the_decision_to_the_rules() -> None:
    now = utcnow()
    old = MemoryItem(id="a", user_id="u", kind=Kind.FACT, content="User enjoys long walks",
                     created_at=now, updated_at=now)
    cand = Candidate(Kind.FACT, "User enjoys long walks now", change=True)
    band = [Neighbor(old, 0.8)]
    asked = []
    rules = decide(cand, band, judge=lambda c, i: asked.append(i.id))
    assert asked == ["a"] and rules.reason == "sim.change"
    assert decide(cand, band, judge=lambda c, i: "duplicate").reason == "llm"


# -- (b) the real llama.cpp server ---------------------------------------------------------


@pytest.mark.skipif(not llama_cpp_available(), reason="llama-cpp-python is not installed: "
                    "pip install 'memstrata[local-llm]'")
def test_end_to_end_with_smollm2(tmp_path) -> None:
    from memstrata.providers.local import LocalLLMServer

    with LocalLLMServer(n_ctx=2048, extra_args=("--n_threads", "2")) as server:
        llm = server.llm(timeout_s=240, max_retries=0)
        with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", llm=llm,
                    worker="off", llm_max_tokens=96) as memory:
            memory.add([{"role": "user", "content": "I use Java at work every day."},
                        {"role": "assistant", "content": "Hi! My name is Lin. What brings you "
                                                         "to my office today?"},
                        {"role": "user", "content": "I'm from Mars, haha"},
                        {"role": "assistant", "content": "Ha."}], user_id="u", session_id="s1")
            memory.add([{"role": "user", "content": "I switched from Java to Go last month."},
                        {"role": "assistant", "content": "OK."}], user_id="u", session_id="s2")
            memory.flush(timeout=900)
            items = everything(memory, "u")
            go = next(i for i in items if i.value == "Go")
            java = next(i for i in items if i.value == "Java")
            assert go.status is Status.ACTIVE and go.version == 2 and java.status is Status.SUPERSEDED
            assert all("mars" not in i.content.lower() for i in memory.list("u"))
            assert all("lin" not in i.content.lower().split() for i in memory.list("u"))
            for item in items:
                assert 0.0 <= item.confidence <= 1.0 and 0.0 <= item.importance <= 1.0
            _paths_are_recorded(memory, "u")
            report = memory.usage("u")
            extract = report.calls["extract"]
            assert extract.calls == 2  # one per job, whatever the model said
            print(f"\nsmollm2: {extract.calls} calls, {extract.prompt_tokens} prompt + "
                  f"{extract.completion_tokens} completion tokens, {extract.latency_s:.1f}s; "
                  f"conflict calls: {report.calls.get('conflict')}; writes {report.actors}")
    assert not server.running

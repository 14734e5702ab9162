"""The recommended agent loop: ``context()`` before every reply, ``add()`` after it.

Run a local model first (any OpenAI-compatible server works the same way)::

    memstrata llm serve --port 8080 &
    python scripts/agent_loop.py                    # or --llm openai-compatible:URL#MODEL

Each turn: pass ``context()`` what you would send (your system prompt, the conversation
so far, the new user message); it returns those messages trimmed to the budget with the
profile, the session summary and the memories relevant to this turn in front (recalled on
every call; ``report.reasons`` says why each memory line is there). Send them to the
model, then ``add()`` the user message *and* the reply, in one call: the reply says
whether recalled knowledge was used, and the assistant's words are stored as the
assistant's (searched with lower trust than the user's, never outranking the user's own
statements).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from memstrata import Memory
from memstrata.providers.llm import parse_provider

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer in one sentence."}


def reply(memory: Memory, llm, user: str, session: str, history: list[dict], text: str) -> str:
    said = {"role": "user", "content": text}
    built = memory.context(user, session, [SYSTEM, *history, said], budget=2000)
    for line_id, why in built.report.reasons.items():
        print(f"    recalled {line_id}: {why}")
    answer = llm.complete(built.messages, max_tokens=64).text.strip() or "OK."
    memory.add([said, {"role": "assistant", "content": answer}], user, session)
    history += [said, {"role": "assistant", "content": answer}]
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="openai-compatible:http://127.0.0.1:8080/v1#smollm2")
    parser.add_argument("--store", default=None, help="default: a temporary SQLite file")
    args = parser.parse_args()
    llm = parse_provider(args.llm)
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or f"sqlite:///{Path(tmp) / 'agent.db'}"
        with Memory(store, embed_on_add="inline") as memory:
            first: list[dict] = []
            for text in ("I live in Hangzhou and I work as a nurse.", "我对花生过敏。"):
                print(f"user: {text}\nbot:  {reply(memory, llm, 'lin', 'monday', first, text)}")
            memory.flush()  # the extraction job has turned the statements into items
            later: list[dict] = []  # a new session days later: nothing of Monday in the window
            for text in ("Where do I live?", "Can you suggest a snack for me?"):
                print(f"user: {text}\nbot:  {reply(memory, llm, 'lin', 'friday', later, text)}")
    llm.close()


if __name__ == "__main__":
    main()

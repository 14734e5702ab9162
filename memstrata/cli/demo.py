"""``memstrata demo``: a scripted bilingual, multi-session conversation on a temporary store."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from ..memory import Memory

__all__ = ["run_demo", "SCRIPT", "QUERIES"]

_T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)

# (session id, days after the first session, [(role, content), ...])
SCRIPT: list[tuple[str, int, list[tuple[str, str]]]] = [
    ("s1-onboarding", 0, [
        ("user", "Hi! I'm Lin, a backend engineer at a logistics startup in Shenzhen."),
        ("assistant", "Nice to meet you, Lin. What are you working on?"),
        ("user", "I use Java and Spring at work, and I'm evaluating Go for our routing service."),
        ("assistant", "Go is a good fit for network services. What matters most to you?"),
        ("user", "Latency. Also please keep answers short, I read them on my phone."),
    ]),
    ("s2-中文", 9, [
        ("user", "我周末一般去爬山，最喜欢的是梧桐山。"),
        ("assistant", "梧桐山很不错！你一般和谁一起去？"),
        ("user", "和我女儿一起，她今年八岁。我不吃辣，出去吃饭要选清淡的。"),
        ("assistant", "好的，我记住了：清淡口味。"),
        ("user", "提醒我下周三之前续签护照。"),
    ]),
    ("s3-switch", 30, [
        ("user", "Update: I switched from Java to Go last week, for the routing service."),
        ("assistant", "How did the migration go?"),
        ("user", "p99 latency dropped from 120 ms to 35 ms. Next I want to learn Rust."),
    ]),
]

QUERIES = [
    "which programming language does Lin use now?",
    "她周末喜欢做什么？",
    "what should I remember about food when booking a dinner?",
    "护照的事情",
]


def run_demo(keep: str | None, embedder: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="memstrata-demo-") as tmp:
        path = Path(keep) if keep else Path(tmp) / "demo.db"
        click.echo(f"store: sqlite:///{path}")
        with Memory(f"sqlite:///{path}", embedder=embedder) as memory:
            click.echo(f"embedder: {memory.embedder.name}\n")
            for session_id, day, turns in SCRIPT:
                when = _T0 + timedelta(days=day)
                messages = [{"role": role, "content": text,
                             "created_at": when + timedelta(minutes=i)}
                            for i, (role, text) in enumerate(turns)]
                memory.add(messages, "lin", session_id)
                click.echo(f"session {session_id} ({when:%Y-%m-%d}): stored {len(messages)} messages")
            item = memory.remember("Lin prefers short answers (reads on the phone)", "lin",
                                   kind="preference", importance=0.8, session_id="s1-onboarding")
            click.echo(f"remembered [{item.kind.value}] {item.content}  ({item.id})")
            flush = getattr(memory, "flush", None)
            if callable(flush):
                flush()
            items = memory.list("lin")
            sessions = memory.sessions("lin")
            click.echo(f"\nstored for lin: {len(sessions)} sessions, "
                       f"{sum(s.message_count for s in sessions)} raw messages, {len(items)} memory items")
            for it in items:
                click.echo(f"  [{it.kind.value}] v{it.version} conf={it.confidence:.2f}  {it.content}")
                if it.supersedes:
                    old = memory.get(it.supersedes, "lin")
                    click.echo(f"      supersedes v{old.version} ({old.status.value}): {old.content}")
            for query in QUERIES:
                click.echo(f"\nquery: {query}")
                for rank, hit in enumerate(memory.search(query, "lin", k=3), 1):
                    p = hit.parts
                    click.echo(f"  {rank}. score={hit.score:.3f} (similarity={p.similarity:.3f}, "
                               f"recency={p.recency:.3f}, bm25 rank={p.lexical_rank}, "
                               f"vector rank={p.dense_rank}) [{hit.layer.value}] {hit.text}")
        if keep:
            click.echo(f"\nthe demo store is kept at {path}; try: memstrata search --store "
                       f"sqlite:///{path} --user lin \"Rust\"")

"""Text analysis at the bottom of the house: tokens for the lexical index, and language.

Everything above (the index, the extraction rules, prompts, summaries, the profile)
asks this module which language a text is in (:func:`detect_language`, one rule) and
how it splits into index tokens (:func:`analyze` / :func:`tokenize`).

Text is split into runs of CJK characters and runs of Latin letters/digits. CJK runs
are segmented with jieba in search mode (overlapping words, so "自然语言处理" also
yields "自然", "语言", "处理"); Latin runs are lower-cased, stop words dropped and the
rest stemmed with Snowball (PyStemmer). The same analyser runs at index time and at
query time, so the lexical backends (SQLite FTS5, PostgreSQL) only ever see
space-separated tokens.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Literal

Language = Literal["zh", "en"]

__all__ = ["tokenize", "analyze", "is_cjk_text", "pos_tags", "detect_language", "Language", "STOP_WORDS",
           "clip"]

_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[0-9A-Za-z\u00c0-\u024f]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# English stop words (the usual IR list) plus chat fillers; question words are kept
# out of the index and the query alike, which is what we want for "what did X say".
# "may" is deliberately absent: as a month it matters to temporal questions.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
don't down during each few for from further had hadn't has hasn't have haven't having he he'd
he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
or other ought our ours ourselves out over own same shan't she she'd she'll she's should
shouldn't so some such than that that's the their theirs them themselves then there there's
these they they'd they'll they're they've this those through to too under until up very was
wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours
yourself yourselves also just really yeah yes oh ok okay hey hi hello wow lol haha hmm um uh
will would shall might must s t d ll re ve m
""".split())

# Chinese function words and particles that carry no topic.
_ZH_STOP = frozenset("""
的 了 和 是 就 都 而 及 与 着 或 一个 没有 我们 你们 他们 她们 它们 我 你 他 她 它 这 那 这个 那个
吗 呢 吧 啊 呀 嘛 哦 哈 嗯 在 有 也 很 还 又 把 被 让 给 对 从 向 到 上 下 里 中 之 其 所 以 为
什么 怎么 哪 哪里 哪个 多少 几 么 啥 谁 吗 呐 呗 啦 哟 喔 一下 一些 这些 那些 自己 已经 可以 会 能 要
""".split())

_stemmer_lock = threading.Lock()
_jieba_lock = threading.Lock()
_jieba = None


def _get_jieba() -> Any:
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def pos_tags(text: str) -> list[tuple[str, str]]:
    """Chinese words with jieba's part-of-speech tags (``ns`` a place, ``nr`` a person's
    name, ``n`` a noun…), jieba set up once for all threads."""
    _get_jieba()
    import jieba.posseg

    return [(w, f) for w, f in jieba.posseg.cut(text)]


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    with _stemmer_lock:  # PyStemmer objects are not thread-safe
        return _stemmer().stemWord(word)


def _latin(run: str) -> str | None:
    word = run.lower()
    if word in STOP_WORDS:
        return None
    if word.endswith("'s"):
        word = word[:-2]
    word = word.replace("'", "")
    if not word or word in STOP_WORDS:
        return None
    return _stem(word)


def analyze(text: str) -> list[str]:
    """Tokens of ``text`` for the lexical index, in order (duplicates kept)."""
    if not text:
        return []
    out: list[str] = []
    for match in _RUN.finditer(text):
        run = match.group(0)
        if _CJK.match(run):
            if len(run) == 1:
                if run not in _ZH_STOP:
                    out.append(run)
                continue
            for word in _get_jieba().cut_for_search(run):
                if word and word not in _ZH_STOP:
                    out.append(word)
        else:
            token = _latin(run)
            if token:
                out.append(token)
    return out


def tokenize(text: str) -> str:
    """``analyze`` joined with spaces: what the lexical backends store and match."""
    return " ".join(analyze(text))


# Han, kana and hangul: the scripts the Chinese prompts and rules are for.
_CJK_LETTER = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")


def detect_language(*texts: "str | Iterable[str] | None") -> Language:
    """``"zh"`` when CJK characters are at least as many as Latin words, else ``"en"``.

    One Han character carries about as much as one English word, hence the comparison:
    "帮我 review 这个 PR" is Chinese, "My favourite dish is 麻婆豆腐" is English. Takes
    strings or iterables of strings; None and empty strings are skipped.
    """
    parts: list[str] = []
    for text in texts:
        if isinstance(text, str):
            parts.append(text)
        elif text is not None:
            parts.extend(t for t in text if t)
    joined = " ".join(parts)
    cjk = len(_CJK_LETTER.findall(joined))
    return "zh" if cjk and cjk >= len(_LATIN_WORD.findall(joined)) else "en"


def is_cjk_text(text: str) -> bool:
    """True when :func:`detect_language` says ``"zh"``."""
    return detect_language(text) == "zh"


def clip(text: str, limit: int) -> str:
    """``text`` with its whitespace folded, cut to ``limit`` characters ending in "…"."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"

"""What gets indexed for a turn or a memory item, and how a query is built (pure).

A raw turn is indexed with two lexical fields: its own text (speaker name included) and
its context — the two previous and two next turns of the same session said within 30
minutes of it, and the day it was said — weighted lower at search time. Context is what
lets "when did Caroline go to the support group?" find the turn that only says "I went
yesterday": the date and the
neighbouring turns carry the words the turn itself lacks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..text import is_cjk_text, tokenize
from ..types import MemoryItem, Message, Role

__all__ = ["date_words", "message_texts", "window_texts", "speaker_tags", "turn_tags", "item_texts",
           "chunk_texts", "build_query", "split_question", "is_low_information", "is_question",
           "asks_about_assistant", "strip_implicit_subject", "dialogue_query", "dialogue_context",
           "dense_text", "clip_words", "ROLE_TAG", "REPLY_TAG",
           "SOURCE_TAG", "RESTATES_TAG"]

_MONTHS = ("January February March April May June July August September October "
           "November December").split()


def date_words(when: datetime, chinese: bool = False) -> str:
    """The day a turn was said, in words a question uses: '8 May 2023' or '2023年5月8日'."""
    if chinese:
        return f"{when.year}年{when.month}月{when.day}日"
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}"


# FTS5-style field weights for a turn (LoCoMo dev, leave-one-conversation-out stable):
# own text 3, previous turn 1.5, the one before 1, next two turns 0.5 each, date 2.
# The store scores two fields, body and context (settings ``body_weight`` 3 and
# ``context_weight`` 0.5); the context field holds each neighbour repeated so that
# REPEAT × context_weight gives its weight.
REPEAT = {"prev1": 3, "prev2": 2, "next1": 1, "next2": 1, "date": 4}


# Turns further apart than this are not each other's context: a statement made hours
# later is a new conversation, not the answer to this one (MemDaily's day-apart notes
# lost 0.02–0.06 recall@5 per question type when their neighbours were counted).
CONTEXT_GAP = timedelta(minutes=30)


def _turns(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is not Role.SYSTEM]


def _near(message: Message, others: Sequence[Message], gap: timedelta) -> list[Message]:
    return [m for m in _turns(others) if abs(m.created_at - message.created_at) <= gap]


def message_texts(message: Message, before: Sequence[Message] = (),
                  after: Sequence[Message] = (), *,
                  gap: timedelta = CONTEXT_GAP) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for one raw turn.

    ``before``/``after`` are the turns around it in its session (oldest first); up to
    two on each side are used, if said within ``gap`` of it. The dense text is the
    previous turn and this one: it only looks back, so a turn's vector is final when
    the turn is stored.
    """
    display = message.text
    extra = " ".join(str(v) for v in message.metadata.get("index_extra", ()))
    body = tokenize(f"{display} {extra}")
    prior, later = _near(message, before, gap)[-2:], _near(message, after, gap)[:2]
    fields = {"prev1": prior[-1] if prior else None, "prev2": prior[-2] if len(prior) > 1 else None,
              "next1": later[0] if later else None, "next2": later[1] if len(later) > 1 else None}
    parts = []
    for name, turn in fields.items():
        if turn is not None:
            parts += [tokenize(turn.text)] * REPEAT[name]
    parts += [tokenize(date_words(message.created_at, is_cjk_text(display)))] * REPEAT["date"]
    context = " ".join(p for p in parts if p)
    return display, body, context, dense_text(message, prior[-1] if prior else None)


#: A turn's vector reads the turn before it when that one is at most PRIOR_DENSE_CHARS
#: long, and an assistant turn's own text up to ASSISTANT_DENSE_CHARS (the words of
#: both are indexed in full). The embedder reads a prefix (e5: 512 tokens, about 2,000
#: English characters), so on LongMemEval, where 38 of the 91 user turns holding an
#: answer come right after the assistant's answer of 1,000–3,600 characters, those
#: turns were embedded as that answer and not at all as what the user said. A short
#: prior stays: conversation needs it ("I went yesterday"; LoCoMo dev dense-only
#: recall@10 0.652 with it, 0.545 without it for turns of 120 characters and more). An
#: assistant's long answer is embedded by its opening, which says what it is about:
#: e5-small takes 0.50 s for 2,000 characters and 0.11 s for 600 on two cores.
PRIOR_DENSE_CHARS, ASSISTANT_DENSE_CHARS = 600, 600


def clip_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at a word boundary when one is in
    the last fifth (Chinese has none to find: it is cut at ``limit``)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit * 4 // 5 else cut


def dense_text(turn: Message, prior: Message | None) -> str:
    """What a turn's vector is embedded from: the turn before it, unless that one is
    longer than :data:`PRIOR_DENSE_CHARS`, and the turn itself (an assistant's own text
    cut to :data:`ASSISTANT_DENSE_CHARS`). It only looks back, so a turn's vector is
    final when the turn is stored."""
    own = clip_words(turn.text, ASSISTANT_DENSE_CHARS) if turn.role is Role.ASSISTANT else turn.text
    if prior is None or len(prior.text) > PRIOR_DENSE_CHARS:
        return own
    return f"{prior.text}\n{own}"


def window_dense_text(turns: Sequence[Message], index: int) -> str:
    """The dense text of ``turns[index]`` (the last item of :func:`window_texts`),
    without analysing any words: what a turn whose words are indexed is embedded from."""
    turn = turns[index]
    prior = _near(turn, turns[max(0, index - 2):index], CONTEXT_GAP)
    return dense_text(turn, prior[-1] if prior else None)


def speaker_tags(message: Message) -> tuple[str, ...]:
    """Tags of a turn's index document: ``speaker:<name>`` when the message has a name
    (filterable with ``tags=["speaker:Caroline"]``, and used by the speaker boost)."""
    return (f"speaker:{message.name}",) if message.name else ()


# Tags of an index document that say who said a turn, which turn a low-information turn
# answers, and which turns an item was extracted from (read back by the retriever).
ROLE_TAG, REPLY_TAG, SOURCE_TAG = "role:", "reply_to:", "source:"
#: The tag of an item whose text is the extractor's restatement of its source turns (not
#: a text a person wrote or corrected): it may be shown in the speaker's own words.
RESTATES_TAG = "restates"

# Words that make up acknowledgements, fillers and bare follow-ups ("OK.", "Nice!", "Got
# it, thanks!", "Why?"): a turn of nothing else says nothing of its own.
_FILLER_WORDS = frozenset("""
ok okay k kk sure great nice cool sweet awesome thanks thank thx ty you yes yeah yep yup no nope
right got it see sounds sound good perfect wonderful amazing lovely haha lol wow hmm oh ah why
really indeed true exactly absolutely agreed alright fine welcome glad hear that that's so much
very to me a the is i i'm will do what how interesting noted understood makes sense love too
poor thing sorry oh no aw aww congrats congratulations happy for glad good luck enjoy
""".split())
_ZH_FILLERS = sorted("""好的 好吧 好 嗯嗯 嗯 哦 噢 谢谢你 谢谢 多谢 收到 明白了 明白 知道了 懂了 了解 行
可以 没问题 太好了 不错 真棒 好棒 棒 为什么 真的吗 真的 是吗 是的 对的 对 哈哈 厉害
原来如此 这样啊 好耶 好可怜 可怜 抱歉 真遗憾 遗憾 恭喜 祝贺 加油 啊 呀 啦 呢 吧 了
""".split(), key=len, reverse=True)
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)


def is_low_information(text: str | None) -> bool:
    """True for a turn that carries nothing without the turn it answers: an
    acknowledgement, filler or bare follow-up ("OK.", "Sweet!", "好的", "为什么？")."""
    if not text or not text.strip():
        return True
    words = re.findall(r"[a-z']+", text.lower())
    rest = _PUNCT.sub("", re.sub(r"[A-Za-z']+", "", text))
    if rest:  # Chinese (or digits): peel known fillers off; anything left is content
        if re.search(r"\d", rest) or len(rest) > 12:
            return False
        for filler in _ZH_FILLERS:
            rest = rest.replace(filler, "")
        if rest:
            return False
    return len(words) <= 6 and all(w in _FILLER_WORDS for w in words)


_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")
_EN_ASK = re.compile(r"^(?:what|where|when|which|who|whom|whose|how|why|do|does|did|is|are|was|"
                     r"were|can|could|will|would|should|have|has|any)\b", re.IGNORECASE)
_ZH_ASK = re.compile(r"(?:吗|呢|么)[？?]?$|什么|哪|几|多少|谁|怎么|是否|是不是")


def is_question(text: str | None) -> bool:
    """True when every sentence of ``text`` asks something ("Which language do I use?",
    "我住在哪里？"); a statement followed by a question is not a question."""
    sentences = [m.group(0).strip() for m in _SENTENCE.finditer(text or "") if m.group(0).strip()]
    if not sentences:
        return False
    return all(s.endswith(("?", "？")) or bool(_EN_ASK.match(s)) or bool(_ZH_ASK.search(s))
               for s in sentences)


#: the pieces of a chat message that are said apart: sentences, and in chat also the parts
#: an emoji, a dash, a semicolon or (in Chinese) a comma sets apart — "ugh it's been raining
#: in Leeds for 9 days 🙃 can you give me a packing list?" states where the user is before
#: it asks, though it ends in one question mark
_PIECE = re.compile(r"[^.!?。！？;；，—\u2014\u2600-\u27bf\U0001f000-\U0001faff]+[.!?。！？]*")


def states_something(text: str | None) -> bool:
    """Whether a message states something besides what it asks: it is not a question
    (:func:`is_question`), or a piece of it (:data:`_PIECE`) of at least three words, or
    four Chinese characters, is not one. "Hi, where do I live now?" and "我住在哪里？"
    state nothing; "我家狗狗豆豆最近老是掉毛，有什么办法吗？" states that the user has a dog."""
    if not is_question(text):
        return bool((text or "").strip())
    # an English comma does not set a statement apart: split there ("I'm driving a Mazda 3,
    # any tips for insurance?"), more first messages competed, and on 170 pairs where the
    # later statement replaces nothing, 12 earlier values were labelled as past instead of 5
    for piece in _PIECE.findall(text or ""):
        piece = piece.strip()
        long_enough = len(re.findall(r"[\u4e00-\u9fff]", piece)) >= 4 or len(piece.split()) >= 3
        if long_enough and not is_question(piece):
            return True
    return False


_ASKS_ASSISTANT = re.compile(
    # what the assistant said — not a request for something new: "Can you suggest…" and
    # "你推荐一下…" ask for an answer now, "what did you suggest" and "你之前推荐的" for one
    # already given
    r"\byou (?:said|told|mentioned|recommended|suggested|gave|listed|provided|wrote|answered|"
    r"replied|explained|described|shared|came up with)\b|"
    r"\bdid you (?:just |already |ever )?(?:say|tell|mention|recommend|suggest|give|list|"
    r"provide|write|answer|reply|explain|describe|share|come up with)\b|"
    r"\byour (?:answer|reply|recommendation|suggestion|advice|list)\b|"
    r"\bwe (?:talked|chatted|spoke|discussed|went over)\b|"
    r"\bour (?:previous|last|earlier|past|prior|recent) (?:chat|conversation|discussion|talk|session)\b|"
    r"你(?:刚才|之前|上次|以前)(?:说|讲|推荐|建议|提到|告诉|回答|列出|给)|"
    r"你(?:说|讲|推荐|建议|提到|告诉|回答|列出|给)(?:过|的)|"
    r"我们(?:刚才|之前|上次|以前)?(?:聊|谈|讨论|说)(?:过|到|起)",
    re.IGNORECASE)


def asks_about_assistant(query: str) -> bool:
    """True when the query asks what the assistant itself said ("what did you
    recommend…", "你之前推荐的…") or what was said in a conversation the two had ("the
    dessert shop we talked about", "in our previous chat", "我们上次聊到的…"): then the
    assistant's turns are not discounted. On LongMemEval_S dev, two of the seven
    questions about the assistant's own answers were read as the user's ("…that dessert
    shop with the giant milkshakes we talked about last time?") and the answer was
    discounted out of the top 10."""
    return bool(_ASKS_ASSISTANT.search(query))


def turn_tags(turns: Sequence[Message], index: int, *, gap: timedelta = CONTEXT_GAP) -> tuple[str, ...]:
    """Tags of ``turns[index]``'s index document: its speaker, its role, and for a
    low-information turn the id of the turn it answers (the previous turn, if said
    within ``gap``)."""
    turn = turns[index]
    tags = [*speaker_tags(turn), f"{ROLE_TAG}{turn.role.value}"]
    if is_low_information(turn.text):
        prior = _near(turn, turns[max(0, index - 1):index], gap)
        if prior and prior[-1].id:
            tags.append(f"{REPLY_TAG}{prior[-1].id}")
    return tuple(tags)


def window_texts(turns: Sequence[Message], index: int) -> tuple[str, str, str, str]:
    """:func:`message_texts` for ``turns[index]`` with its neighbours in ``turns``."""
    return message_texts(turns[index], turns[max(0, index - 2):index], turns[index + 1:index + 3])


_IMPLICIT_SUBJECT = re.compile(r"^\s*(?:the\s+)?user(?:'s)?\b|^\s*用户(?:的)?", re.IGNORECASE)
_IMPLICIT_SUBJECTS = frozenset({"user", "the user", "用户", "me", "i", "我"})


def strip_implicit_subject(content: str) -> str:
    """An item's text without its implicit subject ("User uses Go" → "uses Go",
    "用户住在杭州" → "住在杭州"): every item is about the user, so that word must not
    make every item match a query that says "the user"."""
    return _IMPLICIT_SUBJECT.sub("", content, count=1)


def item_texts(item: MemoryItem) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for one memory item; the
    implicit subject gets no lexical credit (:func:`strip_implicit_subject`)."""
    subject = item.subject if item.subject and item.subject.lower() not in _IMPLICIT_SUBJECTS else None
    slots = " ".join(v for v in (subject, item.attribute, item.value) if v)
    return (item.content, tokenize(strip_implicit_subject(item.content)),
            tokenize(slots + " " + " ".join(item.tags)), item.content)


def chunk_texts(text: str, title: str, heading_path: Sequence[str]) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for a knowledge-base chunk.

    The context field is the document's title and the chunk's heading path: a chunk in
    the middle of a report says "the company", its title names it. The dense text puts
    the same header before the chunk.
    """
    header = " › ".join(h for h in (*([title] if title not in heading_path[:1] else []),
                                     *heading_path) if h)
    return text, tokenize(text), tokenize(header), f"{header}\n{text}" if header else text


def build_query(query: str, recent: Sequence[str] = (), turns: int = 3) -> tuple[str, str]:
    """``(lexical_tokens, dense_text)`` from the current message and the last ``turns`` turns.

    The lexical query is the union of their tokens (not only the last message's: a follow-up
    question leans on the turns before it);
    the dense text puts the current message last, nearest the end of the embedding input.
    """
    recent = [r for r in recent if r and r.strip()][-turns:] if turns > 0 else []
    lexical = " ".join([tokenize(query), *(tokenize(r) for r in recent)]).strip()
    dense = " ".join([*recent, query]).strip() if recent else query
    return lexical, dense


#: What the turns before the current message may add to a dialogue query, in characters:
#: each turn at most TURN_CHARS, all of them at most CONTEXT_CHARS (e5 reads 512 tokens
#: and the current message comes last, so a long history must not push it out).
TURN_CHARS, CONTEXT_CHARS = 240, 720


def dialogue_context(turns: Sequence[tuple[str, str]], *, user_turns: int = 8,
                     assistant_turns: int = 1) -> list[str]:
    """What a stretch of conversation before the current message adds to the query, as
    ``recent`` (oldest first): the user's last ``user_turns - 1`` turns that say something
    — acknowledgements and fillers skipped — after the assistant's last
    ``assistant_turns`` (first, so farthest from the end of the embedding input, where the
    current message goes). Each turn is clipped to :data:`TURN_CHARS`; the oldest user
    turns go first when all of them pass :data:`CONTEXT_CHARS`."""
    said = [(role, " ".join(text.split())[:TURN_CHARS]) for role, text in turns
            if text and text.strip() and not is_low_information(text)]
    users = [text for role, text in said if role == "user"][-(user_turns - 1):] \
        if user_turns > 1 else []
    theirs = [text for role, text in said if role == "assistant"][-assistant_turns:] \
        if assistant_turns > 0 else []
    while users and sum(map(len, theirs + users)) > CONTEXT_CHARS:
        users.pop(0)
    return [*theirs, *users]


def dialogue_query(turns: Sequence[tuple[str, str]], *, user_turns: int = 8,
                   assistant_turns: int = 1) -> tuple[str, list[str]]:
    """``(query, recent)`` for a stretch of conversation given as ``(role, text)`` pairs,
    oldest first — the everyday case, where nobody asks "what did I say about X?".

    Built the way a person listens: the user's last turn that says something is the
    query; :func:`dialogue_context` of the turns before it is ``recent`` — the user's
    earlier turns, fillers skipped, and the assistant's last turn, weighted lower by
    coming first. On MADial dev (e5-small) recall@5 zh / en: the last user turn alone
    0.451 / 0.481; with 2 earlier user turns 0.530 / 0.555; with every earlier user turn
    0.593 / 0.592; and the assistant's last turn 0.618 / 0.630; every turn of both
    roles in order 0.564 / 0.607. About fifty other variants (chit-chat tokens dropped or
    down-weighted, an IDF floor, e5's passage prefix, the user turns alone, pseudo-relevance
    feedback, hubness correction, other fusion weights) lifted zh by 0.006 at most and
    en by 0.03 at most, within the noise of ±0.02 or at a cost in zh
    (docs/benchmarks.md, MADial section).
    """
    last = next((i for i in range(len(turns) - 1, -1, -1) if turns[i][0] == "user"
                 and turns[i][1] and turns[i][1].strip()
                 and not is_low_information(turns[i][1])), None)
    if last is None:
        return "", []
    return turns[last][1], dialogue_context(turns[:last], user_turns=user_turns,
                                            assistant_turns=assistant_turns)


# A new question starts where a sentence ends and the next one opens with "also":
# "我上司的电话是多少？另外，我住的小区叫什么？" / "Where does she work? Also, when…".
# Only this marked case is split; a question that is long, or wrapped in small talk,
# stays whole.
_NEXT_QUESTION = re.compile(
    r"(?<=[？?！!。.；;])[\s\"'”’」』]*"
    r"(?:另外|此外|还有|再者|顺便问(?:一?下)?|also|additionally|and also|one more thing)"
    r"\s*[，,、:：]\s*", re.IGNORECASE)


# A choice between two things, after the question it asks: "Which did I do first, the
# volleyball league or the charity run?", "哪个先发生，A还是B？". Only the form with a comma
# before the choice: without one, where the question ends and the first option starts
# is a guess.
_CHOICE_EN = re.compile(r"^(?P<stem>[^,?]+?),\s*(?P<a>[^,?]+?)\s+or\s+(?P<b>[^,?]+?)\s*\?*$",
                        re.IGNORECASE)
_CHOICE_ZH = re.compile(r"^(?P<stem>[^，,？?]+?)[，,]\s*(?P<a>[^，,？?]+?)还是(?P<b>[^，,？?]+?)[？?]*$")


def _options(question: str) -> list[str]:
    """A choice question as one question per option ("Which first, A or B?" →
    ["Which first A?", "Which first B?"]), else ``[question]``."""
    for pattern, ask in ((_CHOICE_EN, "?"), (_CHOICE_ZH, "？")):
        m = pattern.match(question.strip())
        if m and tokenize(m["a"]) and tokenize(m["b"]):
            return [f"{m['stem']} {m['a']}{ask}", f"{m['stem']} {m['b']}{ask}"]
    return [question]


def split_question(query: str) -> list[str]:
    """The questions a compound query asks, in order ("X? Also, Y?" → ["X?", "Y?"]).

    A query is split where a sentence ends and the next begins with a connective such
    as 另外 / 此外 / also (a part without a single index token, a bare "Also,", joins
    the part before it), and a choice between two things is one question per option
    ("Which did I do first, the volleyball league or the 5K run?" → "Which did I do
    first the volleyball league?", "… the 5K run?"): the answer needs both, and the
    better-matched option must not crowd the other out. A query with one question
    comes back as ``[query]``.
    """
    parts: list[str] = []
    for piece in _NEXT_QUESTION.split(query):
        piece = piece.strip()
        if parts and not tokenize(piece):
            parts[-1] = f"{parts[-1]} {piece}".rstrip()
        elif piece:
            parts.append(piece)
    return [option for part in parts for option in _options(part)] or [query]

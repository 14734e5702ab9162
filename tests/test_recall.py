"""Conversation-grade recall, through the public API on the real default
embedder (multilingual-e5-small): what an agent loop gets back from search() and
context() after ordinary user/assistant chats, in English and Chinese."""

from __future__ import annotations

import pytest

from memstrata import Memory, ValidationError
from memstrata.retrieval.documents import dialogue_query


@pytest.fixture(scope="module")
def e5(tmp_path_factory):
    """One e5 Memory for the module; each test uses users of its own."""
    path = tmp_path_factory.mktemp("recall") / "m.db"
    with Memory(f"sqlite:///{path}", embed_on_add="inline") as memory:
        yield memory


def chat(memory, user, *exchanges, session="s"):
    """Each (user text, assistant reply) pair in a session of its own."""
    for n, (said, reply) in enumerate(exchanges):
        memory.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
                   user, f"{session}{n}")
    memory.flush()


ACK = [("en", "I live in Hangzhou.", "OK.", "where do I live", "Hangzhou"),
       ("zh", "我住在杭州。", "好的", "我住在哪里？", "杭州")]


@pytest.mark.parametrize("lang, fact, ack, query, word", ACK)
def test_an_acknowledgement_is_found_with_the_turn_it_answers(e5, lang, fact, ack, query, word):
    chat(e5, f"ack-{lang}", (fact, ack))
    hits = e5.search(query, f"ack-{lang}", filters={"layer": "episodic"})
    assert hits and word in hits[0].text, [h.text for h in hits]
    assert all(h.text != ack for h in hits)  # never a bare "OK." in the prompt
    turns = {m.content: m.id for m in e5.messages(f"ack-{lang}", "s0")}
    assert hits[0].id == turns[fact] and hits[0].role == "user"
    assert set(hits[0].ids) == {turns[fact], turns[ack]}  # the exchange: both turns
    assert len({i for h in hits for i in h.ids}) == sum(len(h.ids) for h in hits)  # one slot each
    # the items extracted from the fact come first; its turn takes no second slot
    every = e5.search(query, f"ack-{lang}")
    assert every[0].layer.value == "semantic" and word in every[0].text
    assert turns[fact] in every[0].merged_ids
    assert not any(h.id == turns[fact] for h in every[1:])


LANGUAGE = {
    "en": [("I use Java at work.", "Nice!"),
           ("I switched our routing service from Java to Go.", "Sweet!"),
           ("Which language do I use now?", "Your main language was Java.")],
    "zh": [("我平时工作用Java。", "不错！"),
           ("我把我们的路由服务从Java换成了Go。", "太好了！"),
           ("我现在用什么编程语言？", "你的主要语言是Java。")],
}
QUESTION = {"en": "Which language do I use now?", "zh": "我现在用什么编程语言？"}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_assistants_wrong_guess_and_the_repeated_question_do_not_outrank_the_users_fact(e5, lang):
    user = f"lang-{lang}"
    chat(e5, user, *LANGUAGE[lang])
    said = {m.content: m for s in ("s0", "s1", "s2") for m in e5.messages(user, s)}
    switched, question = LANGUAGE[lang][1][0], LANGUAGE[lang][2][0]
    wrong = LANGUAGE[lang][2][1]
    hits = e5.search(QUESTION[lang], user, filters={"layer": "episodic"})
    rank = {i: n for n, h in enumerate(hits) for i in h.ids}
    assert hits[0].role == "user" and said[switched].id in rank
    assert rank[said[switched].id] < rank[said[wrong].id]
    assert rank[said[switched].id] < rank.get(said[question].id, len(hits))
    assert next(h for h in hits if h.id == said[wrong].id).parts.role_weight == 0.5
    # with items: the item saying Go ranks above the assistant's "…Java."
    every = e5.search(QUESTION[lang], user)
    order = [h.text for h in every]
    go_item = next(i for i, h in enumerate(every) if h.layer.value == "semantic" and "Go" in h.text)
    assert go_item < order.index(wrong)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_roles_filter_and_questions_about_the_assistant(e5, lang):
    user = f"roles-{lang}"
    chat(e5, user, *LANGUAGE[lang])
    mine = e5.search(QUESTION[lang], user, roles=["user"], filters={"layer": "episodic"})
    assert mine and all(h.role == "user" for h in mine)
    theirs = e5.search(QUESTION[lang], user, roles=["assistant"])
    assert theirs and all(h.role == "assistant" and h.layer.value == "episodic" for h in theirs)
    asked = {"en": "What did you say my main language was?", "zh": "你之前说我的主要语言是什么？"}[lang]
    hit = e5.search(asked, user, roles=["assistant"])[0]
    assert hit.parts.role_weight == 1.0  # asked what the assistant said: not discounted
    with pytest.raises(ValidationError, match="roles"):
        e5.search(QUESTION[lang], user, roles=["bot"])
    with pytest.raises(ValidationError, match="roles"):
        e5.search(QUESTION[lang], user, roles="user")


@pytest.mark.parametrize("lang, texts, query", [
    ("en", ["I love hiking in the mountains.", "I enjoy hiking in the hills."], "do I like hiking?"),
    ("zh", ["我很喜欢去山里徒步。", "我喜欢在山上徒步。"], "我喜欢徒步吗？"),
])
def test_near_ties_stay_near_ties_and_a_score_does_not_depend_on_the_other_candidates(e5, lang, texts,
                                                                                      query):
    user = f"tie-{lang}"
    for n, text in enumerate(texts):
        e5.add(text, user, f"s{n}")
    e5.flush()
    hits = e5.search(query, user, filters={"layer": "episodic"}, mode="dense")
    assert len(hits) == 2
    dense = [h.parts.dense for h in hits]
    assert min(dense) > 0.3 and max(dense) - min(dense) < 0.3  # min-max made them 1 and 0
    before = {h.id: h.parts.dense for h in hits}
    e5.add({"en": "My car is a blue Volvo.", "zh": "我的车是一辆蓝色的沃尔沃。"}[lang], user, "s9")
    e5.flush()
    after = {h.id: h.parts.dense for h in e5.search(query, user, filters={"layer": "episodic"},
                                                    mode="dense")}
    assert all(after[i] == pytest.approx(before[i]) for i in before)


@pytest.mark.parametrize("lang, facts, query", [
    ("en", ["User uses Go", "User lives in Hangzhou", "User likes hiking"], "what does the user do"),
    ("zh", ["用户使用Go", "用户住在杭州", "用户喜欢爬山"], "用户做什么"),
])
def test_the_implicit_subject_gives_no_lexical_credit(e5, lang, facts, query):
    user = f"subject-{lang}"
    for fact in facts:
        e5.remember(fact, user, kind="fact")
    assert e5.search(query, user, mode="lexical") == []
    word = {"en": "Hangzhou", "zh": "杭州"}[lang]
    assert [h.text for h in e5.search(word, user, mode="lexical")] == [facts[1]]


def test_min_score_on_search(e5):
    chat(e5, "floor", ("I live in Hangzhou.", "OK."), ("My sister is a nurse.", "Nice!"))
    hits = e5.search("where do I live", "floor")
    assert len(hits) >= 2
    cut = (hits[0].score + hits[-1].score) / 2
    kept = e5.search("where do I live", "floor", min_score=cut)
    assert kept and all(h.score >= cut for h in kept) and len(kept) < len(hits)
    assert e5.search("where do I live", "floor", min_score=5.0) == []
    for bad in (-1, "high", True):
        with pytest.raises(ValidationError, match="min_score"):
            e5.search("where do I live", "floor", min_score=bad)


CONTEXT = [("en", "My dog Biscuit is afraid of thunderstorms.", "Poor thing!",
             "How can I calm my dog during a storm?", "Biscuit", "What's the capital of France?"),
           ("zh", "我家的狗饼干很怕打雷。", "好可怜！", "打雷的时候我怎么安抚我的狗？", "饼干",
            "法国的首都是哪里？")]


@pytest.mark.parametrize("lang, fact, ack, ask, word, unrelated", CONTEXT)
def test_context_recalls_memories_without_trigger_words(e5, lang, fact, ack, ask, word, unrelated):
    user = f"ctx-{lang}"
    chat(e5, user, (fact, ack), session="old")
    result = e5.context(user, "now", [{"role": "user", "content": ask}], budget=2000)
    report = result.report
    assert report.trigger is None and report.recall in ("semantic", "deep")
    assert report.layers["memories"] > 0 and report.kept_ids
    memories = next(m["content"] for m in result.messages if "memories recalled" in m["content"])
    lines = [line for line in memories.splitlines() if line.startswith("- ")]
    assert any(word in line for line in lines)
    assert all(line.split("] ", 1)[-1] != ack for line in lines)  # never a bare acknowledgement
    assert set(report.reasons) == set(report.kept_ids)
    assert all("score" in why for why in report.reasons.values())
    # a turn that has nothing to do with the memory does not bring it in
    other = e5.context(user, "now", [{"role": "user", "content": unrelated}], budget=2000)
    assert other.report.layers["memories"] == 0, other.report.reasons
    # min_score, filters and roles narrow what is recalled
    none = e5.context(user, "now", [{"role": "user", "content": ask}], budget=2000, min_score=5.0)
    assert none.report.layers["memories"] == 0
    turns = e5.context(user, "now", [{"role": "user", "content": ask}], budget=2000,
                       filters={"layer": "episodic"}, recall="deep")
    assert turns.report.kept_ids and all("turn of session old" in why
                                         for why in turns.report.reasons.values())
    theirs = e5.context(user, "now", [{"role": "user", "content": ask}], budget=2000,
                        roles=["assistant"], recall="deep")
    assert all("assistant turn" in why for why in theirs.report.reasons.values())
    light = e5.context(user, "now", [{"role": "user", "content": ask}], budget=2000, recall="light")
    assert light.report.recall == "light" and light.report.layers["memories"] == 0
    with pytest.raises(ValidationError, match="min_score"):
        e5.context(user, "now", [{"role": "user", "content": ask}], min_score="high")


REACTION = [("en", "User went to Seaside Park in Qingdao",
             "Seaside Park was so relaxing: the sea breeze felt wonderful and the sunset was amazing.",
             "I think you told me before: Seaside Park was boring and crowded.",
             "What did I think of Seaside Park?", "sunset"),
            ("zh", "用户去了青岛的海滨公园",
             "海滨公园真让人放松，海风吹着特别舒服，傍晚的日落也超美。",
             "我记得你之前说过：海滨公园又无聊又拥挤。",
             "我觉得海滨公园怎么样？", "日落")]


@pytest.mark.parametrize("lang, item, reaction, wrong, ask, word", REACTION)
def test_context_recalls_the_users_own_turns_beside_a_strong_item(e5, lang, item, reaction, wrong,
                                                                   ask, word):
    """Every turn's recall is items *and* the user's turns of other sessions that no item
    stands for: a strong item ("went to Seaside Park") used to stop recall at the items,
    and the user's reaction — what the question is about — never reached the prompt. The
    assistant's wrong guess stays out (the user's own words unless asked)."""
    user = f"reaction-{lang}"
    e5.remember(item, user, kind="event")
    e5.add([{"role": "user", "content": reaction}, {"role": "assistant", "content": wrong}],
           user, "old")
    e5.flush()
    turns = {m.content: m.id for m in e5.messages(user, "old")}
    result = e5.context(user, "now", [{"role": "user", "content": ask}], budget=2000)
    report = result.report
    assert report.trigger is None
    recalled = {i for i in report.kept_ids}
    items = {i.id for i in e5.list(user, limit=100) if turns[reaction] in i.source_message_ids}
    assert turns[reaction] in recalled or items & recalled, report.reasons
    block = next(m["content"] for m in result.messages if "memories recalled" in m["content"])
    assert word in block and item.split()[-1] in block or item[-4:] in block
    assert turns[wrong] not in recalled and wrong not in block
    # asked what the assistant said, its turns come back
    about = {"en": "What did you say about Seaside Park?", "zh": "你之前说海滨公园怎么样？"}[lang]
    theirs = e5.context(user, "now", [{"role": "user", "content": about}], budget=2000,
                        recall="deep")
    assert turns[wrong] in theirs.report.kept_ids, theirs.report.reasons


DIALOGUE = {
    "en": ("Bart danced at the Christmas party and felt very happy.",
           ["Bart's dog is called Max.", "Bart is allergic to peanuts.",
            "Bart lives in Springfield.", "Bart started guitar lessons in May."],
           [("user", "I'm going to perform a magic trick at the New Year's Eve party!"),
            ("assistant", "That's fantastic!"),
            ("user", "I get a bit nervous too. Do you have any tips to relax?"),
            ("assistant", "Take a deep breath before you start."),
            ("user", "By the way, what should I wear?"),
            ("assistant", "Your favourite outfit, the one you feel confident in."),
            ("user", "Do you think I can pull it off? I want everyone to remember it!")]),
    "zh": ("小明在圣诞派对上跳了舞，感觉非常开心。",
           ["小明家的狗叫旺财。", "小明对花生过敏。", "小明住在成都。", "小明五月开始学吉他。"],
           [("user", "我要在新年派对上表演魔术了！"),
            ("assistant", "太棒了！"),
            ("user", "我也有点紧张，你有什么放松的办法吗？"),
            ("assistant", "上台前深呼吸几次。"),
            ("user", "对了，我该穿什么呢？"),
            ("assistant", "穿你最喜欢、最自信的那套衣服。"),
            ("user", "你觉得我能做好吗？我想让大家都记住！")]),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_dialogue_is_the_query(e5, lang):
    """The user talks, nobody asks: the last turn alone ("Can I pull it off?") says
    nothing of a party; the user's earlier turns do. The dialogue query (every earlier
    user turn, the assistant's last turn first) finds the memory better than the last
    turn or the last three messages of both roles (which no longer reach the party) — what
    context() used to add to the current message."""
    memory_text, others, turns = DIALOGUE[lang]
    user = f"dialogue-{lang}"
    target = e5.remember(memory_text, user, kind="event")
    for other in others:
        e5.remember(other, user, kind="fact")

    def score(query, recent=()):
        return next((h.score for h in e5.search(query, user, recent=list(recent))
                     if h.id == target.id), 0.0)

    query, recent = dialogue_query(turns)
    assert query == turns[-1][1] and recent[0] == turns[-2][1]  # the assistant's last turn first
    assert [t for r, t in turns if r == "user"][:-1] == recent[1:]
    window = [t for _, t in turns[-4:-1]]
    found = score(query, recent)
    assert found > max(score(query), score(query, window)) + 0.03, (found, score(query),
                                                                     score(query, window))


# A user's statement after the assistant's long answer: its vector must read the
# statement, not only the answer before it (the embedder reads a prefix of ~2,000
# characters; LongMemEval's assistant answers average 1,700).
LONG_ANSWER = {
    "en": ("Can you suggest some ideas for a weekend in the mountains?",
           " ".join(f"Idea {n}: take the scenic cable car, pack a picnic with local cheese, "
                    f"and watch the sunset from the ridge trail before heading back."
                    for n in range(1, 30)),
           "By the way, I graduated with a degree in marine biology, so tide pools excite me.",
           "What degree did I graduate with?", "marine biology"),
    "zh": ("你能推荐一些周末去山里玩的点子吗？",
           "".join(f"点子{n}：坐观光缆车上山，带上当地的奶酪野餐，在山脊步道上看日落后再下山。"
                   for n in range(1, 60)),
           "顺便说一下，我大学读的是海洋生物专业，所以特别喜欢潮间带。",
           "我大学学的是什么专业？", "海洋生物"),
}


@pytest.mark.parametrize("lang", LONG_ANSWER)
def test_a_statement_after_a_long_answer_is_embedded_by_its_own_words(e5, lang):
    ask, answer, fact, query, word = LONG_ANSWER[lang]
    assert len(answer) > 2000
    user = f"long-{lang}"
    e5.add([{"role": "user", "content": ask}, {"role": "assistant", "content": answer},
            {"role": "user", "content": fact}], user, "s0")
    e5.flush()
    hits = e5.search(query, user, mode="dense", filters={"layer": "episodic"})
    assert hits and word in hits[0].text, [h.text[:60] for h in hits]
    # a match on its own, not the answer's (embedded with the answer, it scored 0.002)
    assert hits[0].parts.dense > 0.2, hits[0].parts


# What the two said in a conversation ("the shop we talked about") is the assistant's
# answer as much as the user's words: its turns are not discounted then. A request
# ("Can you recommend…") is not such a reference.
SHOP = {
    "en": ("We're in Orlando with the kids. Any dessert spots for after dinner?",
           "Here are some fun dessert spots: 1. The Sugar Factory at Icon Park, famous for its "
           "giant milkshakes. 2. Gideon's Bakehouse for cookies. 3. Kelly's Homemade Ice Cream.",
           "Can you remind me of that dessert shop with the giant milkshakes we talked about?",
           "Sugar Factory"),
    "zh": ("我们带孩子在成都玩，晚饭后有什么甜品店推荐吗？",
           "推荐几家：1. 春熙路的糖工厂，招牌是超大杯奶昔。2. 太古里的饼干烘焙坊。3. 宽窄巷子的手工冰淇淋。",
           "我们上次聊到的那家有超大杯奶昔的甜品店叫什么？", "糖工厂"),
}


@pytest.mark.parametrize("lang", SHOP)
def test_a_question_about_what_we_talked_about_finds_the_assistants_answer(e5, lang):
    ask, answer, query, word = SHOP[lang]
    user = f"shop-{lang}"
    chat(e5, user, (ask, answer))
    hits = e5.search(query, user, filters={"layer": "episodic"})
    assert hits and word in hits[0].text and hits[0].role == "assistant", [h.text for h in hits]
    assert hits[0].parts.role_weight == 1.0
    request = {"en": "Can you recommend a dessert shop?", "zh": "你推荐一下甜品店"}[lang]
    assert all(h.parts.role_weight < 1.0 for h in e5.search(request, user) if h.role == "assistant")

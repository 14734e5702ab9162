"""Restating an English clause about its subject: "I barely write Java anymore" →
"User barely writes Java anymore" — the one conjugation table of the write path, and the
check that a restatement reads as a person would write it (:func:`reads_as_statement`).
"""

from __future__ import annotations

import re

__all__ = ["third_person", "reads_as_statement", "PRONOUNS"]

_IRREGULAR = {"am": "is", "are": "is", "'m": "is", "be": "is", "have": "has", "do": "does",
              "go": "goes", "was": "was", "were": "was"}
_KEEP_VERB = {"will", "would", "can", "could", "should", "must", "might", "may", "shall",
              "usually", "always", "often", "never", "normally", "typically", "regularly",
              "sometimes", "also", "really", "just", "still", "now", "recently", "finally",
              "mostly", "generally", "rarely", "don't", "didn't", "can't", "won't", "already",
              "actually", "basically", "currently", "totally", "even", "only", "both"}
_PAST = {"went", "got", "made", "took", "ran", "began", "won", "lost", "read", "wrote", "met",
         "bought", "saw", "did", "had", "was", "were", "felt", "found", "gave", "came", "left",
         "kept", "told", "thought", "brought", "sent", "spent", "built", "to", "sang", "drew",
         # the rest of the common irregular past forms: "I sold the Corolla" is not "solds"
         "sold", "paid", "said", "heard", "held", "taught", "caught", "fought", "sought", "became",
         "forgot", "understood", "stood", "sat", "slept", "swam", "drove", "rode", "flew", "grew",
         "knew", "threw", "broke", "chose", "spoke", "woke", "froze", "wore", "tore", "stole",
         "ate", "fell", "hid", "bit", "shook", "quit", "put", "cut", "set", "let", "hurt", "hit",
         "shut", "lent", "bent", "meant", "dealt", "led", "fed", "fled", "bled", "sped", "fit",
         "dug", "hung", "stuck", "struck", "swung", "lit", "laid", "overslept", "moved", "drank",
         "sank", "rang", "slid", "spun", "wept", "sprang", "shrank", "stank"}
#: adverbs that come between "I" and the verb and do not end in -ly ("kind of", "sort
#: of": both words are read through)
_ADVERBS = frozenset("ever seldom hardly almost soon later once twice again no longer kind sort of "
                     "pretty quite rather still yet".split())
#: modal verbs: what follows them keeps its base form ("should start", "can't believe")
_MODALS = frozenset("will would can could should must might may shall can't cannot won't wouldn't "
                    "couldn't shouldn't mustn't didn't don't gotta".split())
#: colloquial forms with their third-person equivalents
_COLLOQUIAL = {"wanna": "wants to", "gonna": "is going to", "gotta": "has to"}
#: words that cannot be the verb of a statement: a predicate that reaches one of them
#: before any verb is not restated (it would read "User thes act of serving…")
_NOT_VERBS = frozenset("the a an and or but to of in on at for with it this that these those so as "
                       "if then than from by about into over after before while because".split())
PRONOUNS = {"i": "they", "me": "them", "my": "their", "mine": "theirs", "myself": "themselves",
             "i'm": "they're", "i've": "they've", "i'll": "they'll", "i'd": "they'd",
             "i’m": "they're"}


def third_person(predicate: str, conjugate: bool = True) -> str:
    """"go to the gym every day with my wife" → "goes to the gym every day with their wife".

    The first verb is found by reading through adverbs ("barely write" → "barely writes",
    "sort of made" stays); after a modal nothing is conjugated ("really should start",
    "still can't believe"); punctuation and hyphens belong to their word ("hiked, swam and
    made", "color-code"). A predicate whose first word is a function word is returned
    as it is: :func:`reads_as_statement` then refuses what it makes."""
    words = predicate.split()
    out, conjugated = [], not conjugate
    for word in words:
        core = word.strip(",.;:!?\"()")
        low = core.lower()
        if low in PRONOUNS:
            out.append(word.replace(core, PRONOUNS[low]) if core else word)
            continue
        if not conjugated and core:
            if low in ("don't", "do not"):
                out.append(word.replace(core, "doesn't"))
                conjugated = True
                continue
            if low in _MODALS:  # "really should start", "still can't believe"
                out.append(word)
                conjugated = True
                continue
            if low in _KEEP_VERB or (low.endswith("ly") and len(low) > 4) or low in _ADVERBS:
                out.append(word)  # "I barely write Java" → "barely writes", never "barelies write"
                continue
            conjugated = True
            if low in _NOT_VERBS or not low.replace("-", "").isalpha():
                out.append(word)  # no verb here: left as it is (and refused by the check)
                continue
            if low in _COLLOQUIAL:
                out.append(word.replace(core, _COLLOQUIAL[low]))
                continue
            verb = core
            if low in _IRREGULAR:
                verb = _IRREGULAR[low]
            elif not low.endswith(("ed", "ing")) and low not in _PAST:
                if low.endswith(("s", "sh", "ch", "x", "z", "o")):
                    verb += "es"
                elif low.endswith("y") and low[-2:-1] not in "aeiou":
                    verb = verb[:-1] + "ies"
                else:
                    verb += "s"
            word = word.replace(core, verb, 1)
        out.append(word)
    # "I am"/"I was" inside the predicate: "they am" reads "they are"
    return re.sub(r"\bthey (am|was)\b", lambda m: "they " + {"am": "are", "was": "were"}[m[1]],
                  " ".join(out))


#: what a restated English statement must not contain: a function word or a base form
#: given a verb ending ("thes", "ands", "ofs", "wannas"), a capital after the subject
#: ("User Got any tips"), a doubled subject, a verb after a modal that took an "-s"
_BROKEN_EN = re.compile(
    r"\b(?:thes|ands|ofs|ors|tos|ats|ins|ons|fors|withs|buts|ifs|froms|wannas|gonnas)\b"
    r"|^User [A-Z]|\bUser (?:User|user)\b|\b(?:their|User's) (?:their|User's)\b"
    r"|\b(?:will|would|can|could|should|must|might|may|can't|won't|didn't|don't|cannot) "
    r"(?:\w+ly )?\w+[^s'’]s\b(?<!\bis)(?<!\bthis)(?<!\bhas)(?<!\bwas)(?<!\bdoes)(?<!\bus)"
    r"|\w+(?:ment|tion|ness)ses\b")


def reads_as_statement(text: str) -> bool:
    """Whether a restated English statement reads as a person would write it (the
    generator's own check: a restatement that fails it is not stored)."""
    return not _BROKEN_EN.search(text)

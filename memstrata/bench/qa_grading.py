"""The pure half of ``memstrata bench qa``: reader prompts, the published judge prompts,
answer parsing and grading, and the full-context row's truncation.

No I/O here: everything takes and returns values, so each rule is tested on its own
(``tests/test_bench_qa.py``).

Judge prompts are quoted verbatim from the evaluations the published numbers come from,
so a score here can be set beside theirs:

* LoCoMo — the ``ACCURACY_PROMPT`` of Mem0's evaluation (mem0ai/mem0,
  ``evaluation/metrics/llm_judge.py``, Apache-2.0), which Mem0's paper (arXiv 2504.19413,
  Table 2, the "J" score) and the Zep/LangMem/OpenAI rows beside it were judged with.
  Like that evaluation, category 5 (adversarial, no gold answer) is left out and the label
  is read from a JSON ``{"label": ...}``.
* LongMemEval — ``get_anscheck_prompt`` of the benchmark's own evaluation
  (xiaowu0162/LongMemEval, ``src/evaluation/evaluate_qa.py``, MIT; Wu et al., ICLR 2025):
  one template per question type and one for abstention (``_abs``) questions; the label is
  ``'yes' in response.lower()``, judged with ``max_tokens=10`` at temperature 0.
* MemDaily needs no judge: the reader picks one of four choices and the letter is compared
  with ``ground_truth`` (exact choice match, :func:`parse_choice`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["LOCOMO_JUDGE_PROMPT", "LONGMEMEVAL_JUDGE_PROMPTS", "locomo_judge_messages",
           "longmemeval_judge_messages", "parse_locomo_label", "parse_longmemeval_label",
           "parse_choice", "choice_prompt", "reader_system", "fit_conversation",
           "JUDGE_MAX_TOKENS"]

# mem0ai/mem0 evaluation/metrics/llm_judge.py, ACCURACY_PROMPT (verbatim, curly quotes
# and trailing spaces included).
LOCOMO_JUDGE_PROMPT = "\n".join([
    '',
    'Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be '
    'given the following data:',
    '    (1) a question (posed by one user to another user), ',
    '    (2) a ’gold’ (ground truth) answer, ',
    '    (3) a generated answer',
    'which you will score as CORRECT/WRONG.',
    '',
    'The point of the question is to ask about something one user should know about the '
    'other user based on their prior conversations.',
    'The gold answer will usually be a concise and short answer that includes the referenced '
    'topic, for example:',
    'Question: Do you remember what I got the last time I went to Hawaii?',
    'Gold answer: A shell necklace',
    'The generated answer might be much longer, but you should be generous with your grading '
    '- as long as it touches on the same topic as the gold answer, it should be counted as '
    'CORRECT. ',
    '',
    'For time related questions, the gold answer will be a specific date, month, year, etc. '
    'The generated answer might be much longer or use relative time references (like "last '
    'Tuesday" or "next month"), but you should be generous with your grading - as long as it '
    'refers to the same date or time period as the gold answer, it should be counted as '
    'CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT '
    "if it's the same date.",
    '',
    "Now it's time for the real question:",
    'Question: {question}',
    'Gold answer: {gold_answer}',
    'Generated answer: {generated_answer}',
    '',
    'First, provide a short (one sentence) explanation of your reasoning, then finish with '
    'CORRECT or WRONG. ',
    'Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation '
    'script.',
    '',
    'Just return the label CORRECT or WRONG in a json format with the key as "label".',
    '',
])

# xiaowu0162/LongMemEval src/evaluation/evaluate_qa.py, get_anscheck_prompt (verbatim);
# the key "abstention" is its template for the ``_abs`` questions.
_LME_PLAIN = ("I will give you a question, a correct answer, and a response from a model. "
              "Please answer yes if the response contains the correct answer. Otherwise, answer "
              "no. If the response is equivalent to the correct answer or contains all the "
              "intermediate steps to get the correct answer, you should also answer yes. If the "
              "response only contains a subset of the information required by the answer, answer "
              "no. ")
LONGMEMEVAL_JUDGE_PROMPTS: dict[str, str] = {
    "single-session-user": _LME_PLAIN + "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}"
    "\n\nIs the model response correct? Answer yes or no only.",
    "temporal-reasoning": _LME_PLAIN + "In addition, do not penalize off-by-one errors for the "
    "number of days. If the question asks for the number of days/weeks/months, etc., and the "
    "model makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's "
    "response is still correct. \n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}"
    "\n\nIs the model response correct? Answer yes or no only.",
    "knowledge-update": "I will give you a question, a correct answer, and a response from a "
    "model. Please answer yes if the response contains the correct answer. Otherwise, answer no. "
    "If the response contains some previous information along with an updated answer, the "
    "response should be considered as correct as long as the updated answer is the required "
    "answer.\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response "
    "correct? Answer yes or no only.",
    "single-session-preference": "I will give you a question, a rubric for desired personalized "
    "response, and a response from a model. Please answer yes if the response satisfies the "
    "desired response. Otherwise, answer no. The model does not need to reflect all the points "
    "in the rubric. The response is correct as long as it recalls and utilizes the user's "
    "personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\nIs "
    "the model response correct? Answer yes or no only.",
    "abstention": "I will give you an unanswerable question, an explanation, and a response from "
    "a model. Please answer yes if the model correctly identifies the question as unanswerable. "
    "The model could say that the information is incomplete, or some other information is given "
    "but the asked information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}"
    "\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only.",
}
for _same in ("single-session-assistant", "multi-session"):
    LONGMEMEVAL_JUDGE_PROMPTS[_same] = LONGMEMEVAL_JUDGE_PROMPTS["single-session-user"]

#: max_tokens of the judge per dataset: LongMemEval's evaluation asks for 10; Mem0's sets
#: none and wants a sentence and a JSON label, 128 is ample for it.
JUDGE_MAX_TOKENS = {"locomo": 128, "longmemeval": 10}


def locomo_judge_messages(question: str, gold: str, answer: str) -> list[dict[str, str]]:
    """The judge request of Mem0's LoCoMo evaluation (one user message)."""
    return [{"role": "user", "content": LOCOMO_JUDGE_PROMPT.format(
        question=question, gold_answer=gold, generated_answer=answer)}]


def longmemeval_judge_messages(question_type: str, question: str, gold: str, answer: str, *,
                               abstention: bool = False) -> list[dict[str, str]]:
    """LongMemEval's judge request for a question of ``question_type``."""
    key = "abstention" if abstention else question_type
    if key not in LONGMEMEVAL_JUDGE_PROMPTS:
        raise ValueError(f"no LongMemEval judge prompt for question type {question_type!r}")
    return [{"role": "user", "content": LONGMEMEVAL_JUDGE_PROMPTS[key].format(question, gold, answer)}]


def parse_locomo_label(text: str) -> bool | None:
    """Mem0's judge label: the ``"label"`` of a JSON object in ``text`` (``CORRECT`` → True);
    without one, the one of CORRECT / WRONG the text names; None when it names both or
    neither (graded wrong, and counted)."""
    for match in re.finditer(r"\{[^{}]*\}", text):
        try:
            value = json.loads(match.group(0))
        except ValueError:
            continue
        label = str(value.get("label", "")).strip().upper() if isinstance(value, dict) else ""
        if label in ("CORRECT", "WRONG"):
            return label == "CORRECT"
    words = set(re.findall(r"\b(CORRECT|WRONG)\b", text.upper()))
    return words.pop() == "CORRECT" if len(words) == 1 else None


def parse_longmemeval_label(text: str) -> bool:
    """LongMemEval's rule, as its evaluation applies it: ``'yes' in response.lower()``."""
    return "yes" in text.lower()


_LETTERS = "ABCD"
# "A" followed by a lowercase word is the English article ("A good choice is C"), not a choice
_ARTICLE = r"(?!\s+(?!is\b|was\b|or\b|and\b)[a-z])"
_LEAD = re.compile(r"^\W*(?:(?:答案|选项|answer|option)\s*(?:是|为|is|:|：)?\s*)?[(（]?"
                   r"(A(?![A-Za-z'’])" + _ARTICLE + r"|[B-D](?![A-Za-z'’]))"
                   r"(?!\s*(?:and|or|和|或|/|,|、)\s*[(（]?[A-D](?![A-Za-z]))", re.IGNORECASE)
_NAMED = re.compile(r"(?:答案|选项|answer|option)\s*(?:是|为|is|:|：)?\s*[(（]?([A-D])(?![A-Za-z])",
                    re.IGNORECASE)
_ALONE = re.compile(r"(?<![A-Za-z])([A-D])(?![A-Za-z'’])")


def parse_choice(text: str, choices: Mapping[str, str]) -> str | None:
    """The letter the reader chose, or None.

    In order: a letter the answer starts with ("B", "B. 本科", "(C)", "答案：D"); a letter
    named after "答案/选项/answer/option" anywhere; the only standalone letter A-D in the text
    (an English "A" followed by a lowercase word is the article, not a choice); the only
    choice whose text the answer contains. Anything else — two letters, no letter, two
    choices' texts — is None: graded wrong, and counted as unparsed.
    """
    text = text.strip()
    if m := _LEAD.match(text):
        return m.group(1).upper()
    if m := _NAMED.search(text):
        return m.group(1).upper()
    alone = {m.group(1) for m in _ALONE.finditer(text)
             if not (m.group(1) == "A" and re.match(_ARTICLE.replace("?!", "?=", 1), text[m.end():]))}
    if len(alone) == 1:
        return alone.pop()
    if alone:
        return None
    named = [k for k, v in choices.items() if str(v).strip() and str(v).strip() in text]
    if len(named) == 1:
        return named[0]
    # a choice whose text contains another's (e.g. "高中" in "高中以上"): the longest wins
    named.sort(key=lambda k: len(str(choices[k])), reverse=True)
    if len(named) > 1 and all(str(choices[k]) in str(choices[named[0]]) for k in named[1:]):
        return named[0]
    return None


def choice_prompt(question: str, choices: Mapping[str, str]) -> str:
    """A MemDaily question with its four choices, asking for the letter only."""
    lines = [question, *(f"{k}. {choices[k]}" for k in _LETTERS if k in choices)]
    return "\n".join(lines) + "\n请只回答选项字母（A、B、C 或 D）。Answer with the letter only."


def reader_system(dataset: str, when: str | None) -> str:
    """The reader's own system message (before any memory), per dataset."""
    if dataset == "memdaily":
        text = ("你是用户的私人助理。根据你记得的关于用户的信息，回答用户的选择题。"
                "You are the user's assistant; answer the multiple-choice question from what you "
                "remember about the user.")
    else:
        text = ("You answer questions about past conversations from what you remember of them. "
                "Answer in a short phrase. If you do not know, say so.")
    return f"{text}\nCurrent date: {when}" if when else text


def fit_conversation(lines: Sequence[str], room: int, count: Callable[[str], int],
                     ) -> tuple[list[str], int]:
    """The newest ``lines`` whose tokens (by ``count``, one per line for the line break) fit
    in ``room``, oldest first, and how many of the oldest were cut."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = count(line) + 1
        if used + cost > room:
            break
        kept.append(line)
        used += cost
    kept.reverse()
    return kept, len(lines) - len(kept)


def as_text(value: Any) -> str:
    """A gold answer as text (LoCoMo has some as numbers)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

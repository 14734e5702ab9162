"""The one quoting function for memory-derived text in a prompt: memory
is data, never instructions.

Everything :meth:`memstrata.Memory.context` puts in front of the LLM from memory —
profile fields, session summaries, memory items, recalled turns, person names,
knowledge chunks and their labels, stored system turns — goes through
:func:`quote_data` before it is placed inside a ``<memory>`` / ``<knowledge>`` block
after a line saying the block is data. A pure function over a string:

* line breaks of every kind (``\\n``, ``\\r``, U+2028/2029, NEL, vertical tab…) fold
  into single spaces, so a value is one line and cannot start a line of its own;
* invisible controls are removed: bidi embeddings, overrides and isolates
  (U+202A–202E, U+2066–2069, U+200E/200F, U+061C), zero-width characters
  (U+200B–200D, U+2060, U+FEFF) and every other format or control character;
* role-like markers are neutralised into ``⟦…⟧``: ``system:``, ``assistant:``,
  ``user:``, ``developer:``, ``tool:``, ``human:``… (ASCII or fullwidth letters, ``:``
  or ``：``), ``### Instruction``-style headings, chat-template tokens
  (``<|im_start|>``, ``<|system|>``), ``[INST]``, ``<<SYS>>``, and the Chinese
  ``系统：``, ``用户：``, ``助手：``, ``指令：``…;
* angle brackets and their look-alikes (fullwidth ＜＞, ﹤﹥, 〈〉, ⟨⟩, ˂˃, ❮❯…) become
  ‹ ›, so no text can open or close a tag — ``</memory>`` only ever comes from us.

Idempotent (quoting quoted text changes nothing) and otherwise content-preserving:
ordinary Chinese and English text, punctuation included, comes out as it went in.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["quote_data", "ROLE_MARKER"]

#: every angle bracket and look-alike → the single guillemets
_ANGLES = str.maketrans({c: "‹" for c in "<＜﹤〈〈⟨˂ᐸ❮❬⧼‹"} | {c: "›" for c in ">＞﹥〉〉⟩˃ᐳ❯❭⧽›"})
#: fullwidth ASCII letters, digits and the marks role markers are spelled with → ASCII,
#: so "ｓｙｓｔｅｍ：" is caught like "system:" (other fullwidth punctuation — ，！？ — stays)
_FULLWIDTH = str.maketrans({chr(0xFF01 + i): chr(0x21 + i) for i in range(0x5E)
                            if chr(0x21 + i).isalnum() or chr(0x21 + i) in "#|[]/"})

#: the chat roles of the common APIs and templates (OpenAI, Anthropic, Gemini, Llama…)
_ROLES_EN = ("system", "assistant", "user", "developer", "tool", "function", "human", "ai",
             "bot", "model", "instruction", "instructions", "sys", "inst")
_ROLES_ZH = ("系统", "用户", "助手", "助理", "指令", "人类", "机器人", "系统提示")
_HEADINGS = ("instruction", "instructions", "response", "system", "assistant", "user", "input",
             "output", "human")

_SPECIAL = re.compile(r"‹\|\s*([^|‹›]{1,40}?)\s*\|›")  # <|im_start|>, <|system|>, <|eot_id|>
_INST = re.compile(r"\[\s*/?\s*(INST|SYS)\s*\]|‹‹\s*/?\s*(SYS|INST)\s*››", re.IGNORECASE)
_HEADING = re.compile(r"#{1,6}\s*(" + "|".join(_HEADINGS) + r")(?![A-Za-z])\s*:?", re.IGNORECASE)
_ROLE = re.compile(r"(?<![A-Za-z0-9_⟦])(" + "|".join(sorted(_ROLES_EN, key=len, reverse=True)) +
                   r")\s*[:：﹕]", re.IGNORECASE)
_ROLE_ZH = re.compile(r"(?<!⟦)(" + "|".join(sorted(_ROLES_ZH, key=len, reverse=True)) +
                      r")\s*[:：﹕]")
#: what a role-like marker looks like after quoting (for tests and callers)
ROLE_MARKER = re.compile(r"⟦[^⟦⟧]{1,40}⟧")


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cf", "Cc", "Cs", "Co") and not ch.isspace()


def quote_data(text: str) -> str:
    """``text`` made safe inside a quoted data block of a prompt: one line, no
    invisible controls, role-like markers neutralised, no angle brackets (see the
    module docstring)."""
    if not text:
        return ""
    text = "".join(" " if ch.isspace() else ch for ch in text if not _invisible(ch))
    text = text.translate(_FULLWIDTH).translate(_ANGLES)
    text = _SPECIAL.sub(lambda m: f" ⟦{m.group(1).strip()}⟧ ", text)
    text = _INST.sub(lambda m: f" ⟦{(m.group(1) or m.group(2)).upper()}⟧ ", text)
    text = _HEADING.sub(lambda m: f"⟦{m.group(1)}⟧", text)
    text = _ROLE.sub(lambda m: f"⟦{m.group(1)}⟧", text)
    text = _ROLE_ZH.sub(lambda m: f"⟦{m.group(1)}⟧", text)
    return " ".join(text.split())

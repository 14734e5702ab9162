"""The known values of the write path's slots: programming-language names and the
canonical spelling of common values ("golang" → "Go", "英语" → "English", "mum" → "mother").

Pure data and two look-ups, below every reader of a statement (the rule table in
:mod:`.extract`, the statement patterns in :mod:`.statements`).
"""

from __future__ import annotations

__all__ = ["canonical_value", "is_programming_language"]

_PROGRAMMING = {
    "python": "Python", "java": "Java", "go": "Go", "golang": "Go", "rust": "Rust",
    "c++": "C++", "cpp": "C++", "c#": "C#", "javascript": "JavaScript", "js": "JavaScript",
    "typescript": "TypeScript", "ts": "TypeScript", "kotlin": "Kotlin", "swift": "Swift",
    "ruby": "Ruby", "php": "PHP", "scala": "Scala", "haskell": "Haskell", "elixir": "Elixir",
    "c": "C", "r": "R", "julia": "Julia", "lua": "Lua", "perl": "Perl", "dart": "Dart",
    "clojure": "Clojure", "erlang": "Erlang", "zig": "Zig", "ocaml": "OCaml", "f#": "F#",
    "objective-c": "Objective-C", "matlab": "MATLAB", "sql": "SQL", "bash": "Bash",
}
_ALIASES = {**_PROGRAMMING, "中文": "Chinese", "汉语": "Chinese", "chinese": "Chinese",
            "mandarin": "Chinese", "英文": "English", "英语": "English", "english": "English",
            "mom": "mother", "mum": "mother", "dad": "father", "妈妈": "mother", "母亲": "mother",
            "爸爸": "father", "父亲": "father", "老婆": "wife", "妻子": "wife", "老公": "husband",
            "丈夫": "husband", "儿子": "son", "女儿": "daughter", "孩子": "kids", "kid": "kids",
            "children": "kids", "女朋友": "girlfriend", "男朋友": "boyfriend", "狗": "dog", "猫": "cat",
            "哥哥": "brother", "弟弟": "brother", "姐姐": "sister", "妹妹": "sister"}


def canonical_value(value: str) -> str:
    """The canonical spelling of a known value ("golang" → "Go", "英语" → "English")."""
    return _ALIASES.get(value.strip().casefold(), value.strip())


def is_programming_language(value: str | None) -> bool:
    """True for a known programming language name."""
    return value is not None and value.strip().casefold() in _PROGRAMMING

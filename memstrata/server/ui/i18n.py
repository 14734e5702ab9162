"""The inspector's words in English and Chinese, and how a request picks its language:
the ``lang`` cookie the switch sets, else the browser's ``Accept-Language``.

The words live in gettext catalogues, ``locale/<lang>/LC_MESSAGES/memstrata.po`` (compiled
to the ``.mo`` beside each by ``python -m memstrata.server.ui.msgfmt``), read with the
standard library's :class:`gettext.GNUTranslations`. A msgid is a key (``about_title``;
``kind.fact`` for a value of a fixed vocabulary), so the English catalogue holds the
English words too and a key missing from both shows as itself, not as an empty label."""

from __future__ import annotations

import gettext
from collections.abc import Callable, Mapping

from fastapi import Request

from .msgfmt import LOCALE, read_mo

__all__ = ["LANGUAGES", "DOMAIN", "language", "translations", "translator", "value_translator",
           "WORDS"]

LANGUAGES = ("en", "zh")
DOMAIN = "memstrata"


def _load(lang: str) -> gettext.GNUTranslations:
    with (LOCALE / lang / "LC_MESSAGES" / f"{DOMAIN}.mo").open("rb") as fp:
        return gettext.GNUTranslations(fp)


_TRANSLATIONS = {lang: _load(lang) for lang in LANGUAGES}


def _words() -> dict[str, tuple[str, ...]]:
    ids = sorted({key for lang in LANGUAGES
                  for key in read_mo((LOCALE / lang / "LC_MESSAGES" / f"{DOMAIN}.mo").read_bytes())
                  if key and "\0" not in key})
    return {key: tuple(_TRANSLATIONS[lang].gettext(key) for lang in LANGUAGES) for key in ids}


#: key -> (English, Chinese), read from the catalogues (for checks and listings; pages use
#: :func:`translator`)
WORDS: Mapping[str, tuple[str, ...]] = _words()


def translations(lang: str) -> gettext.GNUTranslations:
    """The catalogue of ``lang`` (one of :data:`LANGUAGES`)."""
    return _TRANSLATIONS[lang]


def language(request: Request) -> str:
    """``zh`` or ``en``: the switch's cookie, else the first supported language the
    browser's ``Accept-Language`` asks for (by q-value), else English."""
    chosen = request.cookies.get("lang")
    if chosen in LANGUAGES:
        return chosen
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate(request.headers.get("accept-language", "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        base = tag.strip().lower().split("-")[0]
        if base in LANGUAGES and q > 0:
            ranked.append((-q, i, base))
    return min(ranked)[2] if ranked else "en"


def translator(lang: str) -> Callable[[str], str]:
    """``t(key)``: the word in ``lang`` (the key itself when there is none, so a missing
    word shows, not an empty label)."""
    return _TRANSLATIONS[lang].gettext


def value_translator(lang: str) -> Callable[[str, object], str]:
    """``v(group, value)``: a value from a fixed vocabulary (an item's kind or status, a
    layer, a role, a profile field…) in ``lang``; any other value — stored text, an id —
    as it is."""
    gettext_ = _TRANSLATIONS[lang].gettext

    def v(group: str, value: object) -> str:
        key = f"{group}.{value}"
        word = gettext_(key)
        return word if word != key else "" if value is None else str(value)
    return v

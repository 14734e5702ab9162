"""Numbers and relative dates in what the user said, resolved (pure functions).

* :func:`parse_number` reads digits, English number words ("five", "twenty-one") and
  Chinese numerals ("五", "十二", "四十五", "两") as an int.
* :func:`resolve_date` turns a relative time expression ("yesterday", "last Friday",
  "3 days ago", "next week", "明天", "上周三", "三天前", "5月3日") into the calendar
  date it names, counted from the message's own time — not from when the job runs.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

__all__ = ["parse_number", "resolve_date"]

_EN_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_EN_TENS = {w: 10 * (i + 2) for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())}
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
              "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}


def _zh_number(text: str) -> int | None:
    if not text or any(c not in _ZH_DIGITS and c not in _ZH_UNITS for c in text):
        return None
    total, current = 0, 0
    for ch in text:
        if ch in _ZH_DIGITS:
            current = _ZH_DIGITS[ch]
        else:
            total += (current or 1) * _ZH_UNITS[ch]
            current = 0
    return total + current


def parse_number(text: str | None) -> int | None:
    """``"5"``, ``"five"``, ``"twenty-one"``, ``"四十五"``, ``"两"`` → int; else None."""
    if not text:
        return None
    t = text.strip().casefold().replace("-", " ")
    if t.isdigit():
        return int(t)
    if t in _EN_UNITS:
        return _EN_UNITS[t]
    parts = t.split()
    if parts and parts[0] in _EN_TENS and (len(parts) == 1 or (len(parts) == 2 and parts[1] in _EN_UNITS)):
        return _EN_TENS[parts[0]] + (_EN_UNITS[parts[1]] if len(parts) == 2 else 0)
    return _zh_number(t)


_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_ZH = "一二三四五六日"
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_NUM = r"(\d+|[a-z]+(?:-[a-z]+)?|[零〇一二两三四五六七八九十百]+)"
_AGO_EN = re.compile(_NUM + r" (day|week|month|year)s? ago", re.I)
_IN_EN = re.compile(r"in " + _NUM + r" (day|week|month|year)s?", re.I)
_AGO_ZH = re.compile(_NUM + r"(天|周|个?星期|个月|年)(前|之前|以前|后|以后|之后)")
_MD_ZH = re.compile(r"(\d{1,2})月(\d{1,2})[日号]")
_MD_EN = re.compile(r"(?:on )?(" + "|".join(_MONTHS) + r") (\d{1,2})(?:st|nd|rd|th)?", re.I)
_SIMPLE = {"today": 0, "tonight": 0, "this morning": 0, "this evening": 0, "tomorrow": 1,
           "yesterday": -1, "今天": 0, "今晚": 0, "明天": 1, "后天": 2, "昨天": -1, "前天": -2,
           "大后天": 3}


def _shift(day: date, n: int, unit: str) -> date:
    if unit in ("day", "天"):
        return day + timedelta(days=n)
    if unit in ("week", "周", "星期", "个星期"):
        return day + timedelta(weeks=n)
    months = n * (12 if unit in ("year", "年") else 1)
    y, m = divmod(day.month - 1 + months, 12)
    return date(day.year + y, m + 1, min(day.day, 28))


def _weekday(day: date, target: int, which: int) -> date:
    """The ``target`` weekday of this (0), next (1) or last (-1) week of ``day``."""
    monday = day - timedelta(days=day.weekday())
    return monday + timedelta(weeks=which, days=target)


def resolve_date(expression: str | None, at: datetime | None) -> date | None:
    """The date a time expression names, seen from ``at`` (the message's time); None
    when it names no single day ("every week") or ``at`` is unknown."""
    if not expression or at is None:
        return None
    text = expression.strip().casefold()
    day = at.date()
    if text in _SIMPLE:
        return day + timedelta(days=_SIMPLE[text])
    for pattern, sign in ((_AGO_EN, -1), (_IN_EN, 1)):
        m = pattern.fullmatch(text)
        if m and (n := parse_number(m.group(1))) is not None:
            return _shift(day, sign * n, m.group(2))
    m = _AGO_ZH.fullmatch(text)
    if m and (n := parse_number(m.group(1))) is not None:
        return _shift(day, -n if m.group(3) in ("前", "之前", "以前") else n, m.group(2).lstrip("个"))
    m = re.fullmatch(r"(?:(next|last|this|on|by|before|until) )?(" + "|".join(_WEEKDAYS_EN) + ")", text)
    if m:
        which = {"next": 1, "last": -1}.get(m.group(1) or "", 0)
        return _weekday(day, _WEEKDAYS_EN.index(m.group(2)), which)
    m = re.fullmatch(r"(上|下|这|本)?(?:周|个?星期|个?礼拜)([一二三四五六日天])", text)
    if m:
        which = {"上": -1, "下": 1}.get(m.group(1) or "", 0)
        return _weekday(day, _WEEKDAYS_ZH.index(m.group(2).replace("天", "日")), which)
    m = re.fullmatch(r"(next|last) (week|month|year)", text)
    if m:
        return _shift(day, 1 if m.group(1) == "next" else -1, m.group(2))
    m = re.fullmatch(r"(上|下)(?:个)?(周|星期|月)|(明|去)年", text)
    if m:
        if m.group(3):
            return _shift(day, 1 if m.group(3) == "明" else -1, "年")
        return _shift(day, -1 if m.group(1) == "上" else 1, "月" if m.group(2) == "月" else "周")
    for pattern, month_first in ((_MD_ZH, True), (_MD_EN, False)):
        m = pattern.fullmatch(text)
        if m:
            month = int(m.group(1)) if month_first else _MONTHS.index(m.group(1)) + 1
            try:
                return date(day.year, month, int(m.group(2)))
            except ValueError:
                return None
    return None

"""Inline SVG bar charts for the operations page: pure functions from numbers to markup
(every label escaped), so the page needs no chart library and no script."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from html import escape

from ...types import UsageRecord

__all__ = ["bar_chart", "usage_series"]


def bar_chart(title: str, points: Sequence[tuple[str, float]], *, width: int = 520,
              height: int = 150, digits: int = 0, empty: str = "no data") -> str:
    """A bar chart of ``(label, value)`` points as an ``<svg>`` element with a title
    and a ``<desc>`` listing every value (read by screen readers)."""
    pad_l, pad_b, pad_t = 8, 28, 22
    n = max(1, len(points))
    top = max((v for _, v in points), default=0.0) or 1.0
    slot = (width - pad_l * 2) / n
    bar_w = max(1.0, slot * 0.7)
    chart_h = height - pad_b - pad_t
    fmt = f"{{:.{digits}f}}"
    desc = "; ".join(f"{label}: {fmt.format(v)}" for label, v in points) or empty
    out = [f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title><desc>{escape(desc)}</desc>',
           f'<text x="{pad_l}" y="14">{escape(title)}'
           + (f' (max {escape(fmt.format(top))})' if points else "") + '</text>']
    if not points:
        out.append(f'<text x="{width // 2 - 30}" y="{height // 2}">{escape(empty)}</text>')
    every = max(1, n // 8)  # at most ~8 axis labels
    for i, (label, value) in enumerate(points):
        h = 0.0 if top <= 0 else chart_h * value / top
        x = pad_l + i * slot + (slot - bar_w) / 2
        y = pad_t + chart_h - h
        out.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}">'
                   f'<title>{escape(label)}: {escape(fmt.format(value))}</title></rect>')
        if i % every == 0:
            out.append(f'<text x="{x:.1f}" y="{height - 10}">{escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def usage_series(records: Iterable[UsageRecord], *, buckets: int = 24
                 ) -> dict[str, list[tuple[str, float]]]:
    """LLM calls, tokens and mean latency per time bucket (hours, or days when the
    records span more than two days), oldest first, empty buckets included."""
    rows = sorted(records, key=lambda r: r.at)
    if not rows:
        return {"calls": [], "tokens": [], "latency": []}
    span = rows[-1].at - rows[0].at
    step = timedelta(days=1) if span > timedelta(days=2) else timedelta(hours=1)

    def floor(t: datetime) -> datetime:
        t = t.replace(minute=0, second=0, microsecond=0)
        return t.replace(hour=0) if step == timedelta(days=1) else t

    end = floor(rows[-1].at)
    starts = [end - step * i for i in range(buckets - 1, -1, -1)]
    calls = dict.fromkeys(starts, 0)
    tokens = dict.fromkeys(starts, 0)
    latency: dict[datetime, list[float]] = {s: [] for s in starts}
    for r in rows:
        key = floor(r.at)
        if key in calls:
            calls[key] += 1
            tokens[key] += r.prompt_tokens + r.completion_tokens
            latency[key].append(r.latency_s)
    label = "%m-%d" if step == timedelta(days=1) else "%H:00"
    return {"calls": [(s.strftime(label), float(calls[s])) for s in starts],
            "tokens": [(s.strftime(label), float(tokens[s])) for s in starts],
            "latency": [(s.strftime(label), sum(latency[s]) / len(latency[s]) if latency[s] else 0.0)
                        for s in starts]}

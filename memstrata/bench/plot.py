"""``memstrata bench plot``: the benchmark charts of the docs, drawn from the JSON reports
in ``docs/results/``.

Each chart is a :class:`Chart` built by one function from named results files and
written as a standalone SVG by :func:`render_svg`, a pure function from numbers to
markup. It writes SVG directly: the charts are grouped bars with a legend and an axis,
about 150 lines, and the lock has no plotting library (matplotlib would be a new
dependency of ~40 MB for six bar charts). The output is deterministic (no dates, fixed
number formats), so a test regenerates the files and compares them with the committed
ones. Every bar carries its number (``data-value``) and the ``<desc>`` lists them all for
screen readers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ..errors import ValidationError

__all__ = ["CHARTS", "Chart", "Series", "build_charts", "plot", "render_svg"]

PUBLISHED = "published.json"
# Okabe-Ito colours (distinct for the common colour-vision deficiencies), in series order
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#7F7F7F", "#CC79A7")
SYSTEM_LABELS = {"memstrata": "memstrata", "bm25": "BM25 only (same index)",
                 "dense": "dense only (same vectors)"}


@dataclass(frozen=True)
class Series:
    """One coloured set of bars: a value (or ``None``: no bar) per category."""

    name: str
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class Chart:
    """A grouped bar chart and the results files it was drawn from."""

    name: str  # file stem under the output folder
    title: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    unit: str = ""  # "" for a share in [0, 1], else e.g. "ms"
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())


class _Results:
    """The results folder, read file by file; a missing file or key is a clear error."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cache: dict[str, Any] = {}

    def has(self, *names: str) -> bool:
        return all((self.folder / n).is_file() for n in names)

    def get(self, name: str, *keys: str) -> Any:
        if name not in self._cache:
            path = self.folder / name
            try:
                self._cache[name] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ValidationError(f"cannot read results file {path}: {exc}") from exc
        value = self._cache[name]
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                raise ValidationError(f"{self.folder / name} has no {'/'.join(keys)} "
                                      f"(missing {key!r}); was it written by this bench?")
            value = value[key]
        return value


def _systems(r: _Results, name: str, path: Sequence[str], categories: Sequence[str],
             metric: str) -> list[Series]:
    """memstrata, BM25 and dense over ``categories`` (``"overall"`` or a category)."""
    out = []
    for system in ("memstrata", "bm25", "dense"):
        rows = r.get(name, *path, system)
        values = tuple(float(rows["overall"][metric]) if c == "overall"
                       else float(rows["by_category"][c][metric]) for c in categories)
        out.append(Series(SYSTEM_LABELS[system], values))
    return out


def _recall_overview(r: _Results) -> Chart:
    loc, md, chat = "locomo_dev.json", "memdaily_dev.json", "chat_memdaily100.json"
    mad, lme = "madial_dev.json", "longmemeval_s_dev.json"
    pub = r.get(PUBLISHED)
    series = []
    for system in ("memstrata", "bm25", "dense"):
        madial = r.get(mad, "madial", "systems", system, "by_category")
        series.append(Series(SYSTEM_LABELS[system], (
            float(r.get(loc, "systems", system, "overall", "recall@5")),
            float(r.get(md, "systems", system, "overall", "recall@5")),
            float(r.get(chat, "memdaily_chat", "systems", system, "overall", "recall@5")),
            float(madial["zh"]["recall@5"]), float(madial["en"]["recall@5"]),
            float(r.get(lme, "systems", system, "overall", "turn_recall@5")))))
    series.append(Series("published retriever", (
        float(pub["locomo"]["recall@5"]), None, None,
        float(pub["madial"]["zh"]["recall@5"]), float(pub["madial"]["en"]["recall@5"]), None)))
    return Chart(
        "bench-recall", "Recall@5 on each dataset: memstrata beside BM25, dense and published figures",
        ("LoCoMo dev (en)", "MemDaily dev (zh)", "MemDaily-chat (zh)", "MADial zh",
         "MADial en", "LongMemEval_S turns (en)"), tuple(series),
        notes=(f"published: LoCoMo {pub['locomo']['name']} (paper, all 10 conversations); "
               f"MADial zh {pub['madial']['zh']['name']}, en {pub['madial']['en']['name']} "
               "(the benchmark's own top-20 files, user 1).",
               "No comparable published retrieval figure for MemDaily, MemDaily-chat or "
               "LongMemEval_S turns."),
        sources=(loc, md, chat, mad, lme, PUBLISHED))


def _locomo(r: _Results) -> Chart:
    name = "locomo_dev.json"
    cats = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
    pub = r.get(PUBLISHED, "locomo")
    series = _systems(r, name, ("systems",), ("overall", *cats), "recall@10")
    series.append(Series(f"{pub['name']} (published)", (
        float(pub["recall@10"]), *(float(pub["by_category_recall@10"][c]) for c in cats))))
    return Chart("bench-locomo", "LoCoMo dev: recall@10 by question category",
                 ("all", *cats), tuple(series),
                 notes=(f"{pub['name']}: {pub['source']}.",),
                 sources=(name, PUBLISHED))


def _memdaily(r: _Results) -> Chart:
    name = "memdaily_dev.json"
    cats = ("simple", "conditional", "comparative", "aggregative", "post_processing", "noisy")
    pub = r.get(PUBLISHED, "memdaily")
    series = _systems(r, name, ("systems",), ("overall", *cats), "recall@5")
    series.append(Series(pub["name"], (None, *(float(pub["by_category_recall@5"][c])
                                               for c in cats))))
    return Chart("bench-memdaily", "MemDaily dev (Chinese): recall@5 by question type",
                 ("all", *(c.replace("_", "-") for c in cats)), tuple(series),
                 notes=(f"{pub['name']}: {pub['source']}.",), sources=(name, PUBLISHED))


def _kb(r: _Results) -> Chart:
    name = "kb_dev_neighbour.json"
    pub = r.get(PUBLISHED, "kb")
    runs = {run["data"]: run for run in r.get(name, "runs")}
    corpora = ("dragonball_dev_zh", "dragonball_dev_en", "covid-qa_dev")
    missing = [c for c in corpora if c not in runs]
    if missing:
        raise ValidationError(f"{r.folder / name} has no run of {', '.join(missing)}")
    series = [Series(SYSTEM_LABELS[s], tuple(float(runs[c]["systems"][s]["overall"]["hit@5"])
                                             for c in corpora))
              for s in ("memstrata", "bm25", "dense")]
    series.append(Series(pub["name"], tuple(float(pub["hit@5"][c]) for c in corpora)))
    return Chart("bench-kb", "Knowledge base: chunk Hit@5 per corpus (default settings)",
                 ("DragonBall zh", "DragonBall en", "COVID-QA"), tuple(series),
                 notes=(f"{pub['name']}: {pub['source']}.",), sources=(name, PUBLISHED))


def _latency(r: _Results) -> Chart:
    name = "latency_final_pg.json"
    runs = {run["backend"]: run for run in r.get(name, "runs")}
    if not {"SQLite", "Postgres"} <= set(runs):
        raise ValidationError(f"{r.folder / name} needs a SQLite and a Postgres run "
                              "(bench latency --compare-postgres)")
    sizes = sorted(runs["SQLite"]["sizes"], key=int)

    def p95(backend: str, key: str) -> tuple[float | None, ...]:
        return tuple(float(runs[backend]["sizes"][s][key]["p95_ms"])
                     if key in runs[backend]["sizes"].get(s, {}) else None for s in sizes)

    return Chart("bench-latency", "Search p95 latency of one user's memory (query vector given)",
                 tuple(f"{int(s):,} items" for s in sizes),
                 (Series("memstrata on SQLite", p95("SQLite", "search_excluding_embedding")),
                  Series("memstrata on PostgreSQL + pgvector",
                         p95("Postgres", "search_excluding_embedding")),
                  Series("SQLite FTS5 bm25() alone", p95("SQLite", "baseline_fts5_bm25"))),
                 unit="ms", notes=("200 queries per size, k = 10, on the repository's 2-core "
                                   "machine, idle (docs/benchmarks.md, final re-run).",),
                 sources=(name,))


def _updates(r: _Results) -> Chart:
    name = "updates_unseen2.json"
    groups = ("all", "en", "zh", "change", "correction", "cessation", "cross", "other_person")
    series = [Series(SYSTEM_LABELS[s], tuple(float(r.get(name, "table", f"{s}/{g}", "top1"))
                                             for g in groups))
              for s in ("memstrata", "bm25", "dense")]
    return Chart("bench-updates", "Knowledge updates, 240 hand-written unseen cases: the current "
                 "value ranked first", groups, tuple(series),
                 notes=("Cases written apart from the rules and measured once on the final code "
                        "(the BM25 and dense rows share the final ordering passes; "
                        "docs/benchmarks.md).",),
                 sources=(name,))


#: chart builders in the order they are drawn; each names the files it reads first
CHARTS: tuple[tuple[tuple[str, ...], Callable[[_Results], Chart]], ...] = (
    (("locomo_dev.json", "memdaily_dev.json", "chat_memdaily100.json", "madial_dev.json",
      "longmemeval_s_dev.json", PUBLISHED), _recall_overview),
    (("locomo_dev.json", PUBLISHED), _locomo),
    (("memdaily_dev.json", PUBLISHED), _memdaily),
    (("kb_dev_neighbour.json", PUBLISHED), _kb),
    (("latency_final_pg.json",), _latency),
    (("updates_unseen2.json",), _updates),
)


def build_charts(results: Path) -> tuple[list[Chart], list[str]]:
    """The charts whose results files are all in ``results``, and a line for each chart
    skipped because a file is missing."""
    r = _Results(Path(results))
    charts, skipped = [], []
    for needs, build in CHARTS:
        if r.has(*needs):
            charts.append(build(r))
        else:
            absent = ", ".join(n for n in needs if not (r.folder / n).is_file())
            skipped.append(f"{build.__name__.lstrip('_')}: no {absent}")
    return charts, skipped


def plot(results: Path, out: Path,
         progress: Callable[[str], None] = lambda _line: None) -> list[Path]:
    """Write every chart the results files allow as ``out/<name>.svg``; the paths written."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise ValidationError(f"no results folder {results}")
    charts, skipped = build_charts(results)
    for line in skipped:
        progress(f"skipped {line}")
    if not charts:
        raise ValidationError(f"no chart can be drawn from {results}: "
                              + "; ".join(skipped))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for chart in charts:
        path = out / f"{chart.name}.svg"
        path.write_text(render_svg(chart), encoding="utf-8")
        progress(f"wrote {path} from {', '.join(chart.sources)}")
        written.append(path)
    return written


# ---- the SVG writer: pure, numbers in, markup out ----

_LEFT, _RIGHT, _BAR, _GAP, _MIN_WIDTH = 64, 16, 30, 26, 680
_PLOT_H, _FONT = 300, "DejaVu Sans, Helvetica, Arial, sans-serif"


def _ticks(top: float, unit: str) -> list[float]:
    if not unit:
        return [i / 5 for i in range(6)]
    raw = max(top, 1e-9) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def _fmt(value: float, unit: str) -> str:
    if not unit:
        return f"{value:.3f}"
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def _tick_label(value: float, unit: str) -> str:
    return f"{value:g}" if unit else f"{value:.1f}"


def _wrap(label: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in label.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _check_chart(chart: Chart) -> None:
    if not chart.categories or not chart.series:
        raise ValidationError(f"chart {chart.name} has no categories or no series")
    for s in chart.series:
        if len(s.values) != len(chart.categories):
            raise ValidationError(f"chart {chart.name}: series {s.name!r} has "
                                  f"{len(s.values)} values for {len(chart.categories)} categories")


def _legend(chart: Chart, width: int) -> tuple[list[str], int]:
    """The legend's markup, left to right with a new row when it would overflow, and the
    y of its last row."""
    legend, lx, ly = [], _LEFT, 32
    for i, s in enumerate(chart.series):
        item_w = 17 + 7 * len(s.name) + 22
        if lx > _LEFT and lx + item_w > width - _RIGHT:
            lx, ly = _LEFT, ly + 18
        legend.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{COLOURS[i]}"/>'
                      f'<text x="{lx + 17}" y="{ly + 10}" fill="#111">{escape(s.name)}</text>')
        lx += item_w
    return legend, ly


def _description(chart: Chart) -> str:
    """Every value in words, for ``<desc>`` (what a screen reader reads)."""
    return "; ".join(
        f"{c}: " + ", ".join(f"{s.name} {_fmt(v, chart.unit)}{chart.unit}" for s in chart.series
                            if (v := s.values[i]) is not None)
        for i, c in enumerate(chart.categories))


def _axis(chart: Chart, ticks: list[float], plot_w: int, top_y: int,
          y: Callable[[float], float]) -> list[str]:
    """Grid lines with their tick labels, and the unit along the axis."""
    out = []
    for t in ticks:
        ty = y(t)
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}" '
                   f'stroke="{"#444" if t == 0 else "#ddd"}"/>'
                   f'<text x="{_LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end" fill="#333">'
                   f'{_tick_label(t, chart.unit)}</text>')
    if chart.unit:
        out.append(f'<text x="14" y="{top_y + _PLOT_H / 2:.0f}" fill="#333" '
                   f'transform="rotate(-90 14 {top_y + _PLOT_H / 2:.0f})" text-anchor="middle">'
                   f'{escape(chart.unit)}</text>')
    return out


def _bars(chart: Chart, group_w: int, top_y: int, y: Callable[[float], float],
          label_lines: list[list[str]]) -> list[str]:
    """Each category's bars with their value labels, then the category's label."""
    n_series = len(chart.series)
    out = []
    for ci, category in enumerate(chart.categories):
        gx = _LEFT + ci * group_w + (group_w - n_series * _BAR) / 2
        for si, s in enumerate(chart.series):
            v = s.values[ci]
            if v is None:
                continue
            bx, by = gx + si * _BAR, y(v)
            text = _fmt(v, chart.unit)
            out.append(f'<rect class="bar" x="{bx + 2:.1f}" y="{by:.1f}" width="{_BAR - 4}" '
                       f'height="{top_y + _PLOT_H - by:.1f}" fill="{COLOURS[si]}" '
                       f'data-series="{escape(s.name)}" data-category="{escape(category)}" '
                       f'data-value="{v!r}"><title>{escape(s.name)}, {escape(category)}: '
                       f'{text}{escape(chart.unit)}</title></rect>'
                       f'<text x="{bx + _BAR / 2:.1f}" y="{by - 4:.1f}" font-size="9.5" '
                       f'text-anchor="middle" fill="#111">{text}</text>')
        cx = gx + n_series * _BAR / 2
        for li, line in enumerate(label_lines[ci]):
            out.append(f'<text x="{cx:.1f}" y="{top_y + _PLOT_H + 16 + 14 * li}" '
                       f'text-anchor="middle" fill="#111">{escape(line)}</text>')
    return out


def render_svg(chart: Chart) -> str:
    """``chart`` as a standalone SVG document: grouped bars, value labels, an axis, the
    legend above and the notes below; ``<title>`` and ``<desc>`` for screen readers."""
    _check_chart(chart)
    group_w = max(len(chart.series) * _BAR + _GAP, (_MIN_WIDTH - _LEFT - _RIGHT) // len(chart.categories))
    plot_w = group_w * len(chart.categories)
    width = _LEFT + plot_w + _RIGHT
    legend, ly = _legend(chart, width)
    top_y = ly + 32
    label_lines = [_wrap(c, max(8, group_w // 7)) for c in chart.categories]
    axis_h = 14 * max(len(lines) for lines in label_lines) + 10
    notes = [line for note in chart.notes for line in _wrap(note, (width - _LEFT) // 6)]
    notes_y = top_y + _PLOT_H + axis_h + 14
    height = notes_y + 15 * len(notes) + 6
    values = [v for s in chart.series for v in s.values if v is not None]
    ticks = _ticks(max(values, default=1.0), chart.unit)
    top = ticks[-1] or 1.0

    def y(v: float) -> float:
        return top_y + _PLOT_H - _PLOT_H * v / top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-labelledby="title desc" '
           f'font-family="{_FONT}" font-size="12">',
           f'<title id="title">{escape(chart.title)}</title>',
           f'<desc id="desc">{escape(_description(chart))}</desc>',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{_LEFT}" y="20" font-size="15" font-weight="bold" fill="#111">'
           f'{escape(chart.title)}</text>', *legend]
    out += _axis(chart, ticks, plot_w, top_y, y)
    out += _bars(chart, group_w, top_y, y, label_lines)
    for ni, line in enumerate(notes):
        out.append(f'<text x="{_LEFT}" y="{notes_y + 15 * ni}" font-size="11" fill="#333">'
                   f'{escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"

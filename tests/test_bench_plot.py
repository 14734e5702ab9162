"""``memstrata bench plot`` draws the docs' benchmark charts from docs/results/: the files
it writes are the ones committed under docs/images/ (byte for byte), every bar carries a
number of a results file, every chart is shown in the docs, and missing or malformed
results are clear errors."""

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata.bench.plot import Chart, Series, render_svg
from memstrata.errors import ValidationError
from memstrata.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
RESULTS, IMAGES = ROOT / "docs" / "results", ROOT / "docs" / "images"
SVG = "{http://www.w3.org/2000/svg}"


def _plot(results, out):
    return CliRunner().invoke(cli, ["bench", "plot", "--results", str(results), "--out", str(out)])


def _bars(svg):
    root = svg if isinstance(svg, ET.Element) else ET.parse(svg).getroot()
    return {(r.get("data-series"), r.get("data-category")): float(r.get("data-value"))
            for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("charts")
    result = _plot(RESULTS, out)
    assert result.exit_code == 0, result.output
    return out, result.output


def test_bench_plot_regenerates_the_committed_charts(drawn):
    out, output = drawn
    made = sorted(p.name for p in out.glob("*.svg"))
    committed = sorted(p.name for p in IMAGES.glob("bench-*.svg"))
    assert made == committed and len(made) == 6, (made, committed)
    stale = [n for n in made if (out / n).read_text() != (IMAGES / n).read_text()]
    assert not stale, f"run `memstrata bench plot` and commit docs/images/: {stale} differ"
    assert "6 charts written" in output and output.count("wrote ") == 6


def test_the_bars_are_the_numbers_of_the_results_files(drawn):
    out, _ = drawn
    locomo = json.loads((RESULTS / "locomo_dev.json").read_text())["systems"]
    published = json.loads((RESULTS / "published.json").read_text())
    recall = _bars(out / "bench-recall.svg")
    assert recall[("memstrata", "LoCoMo dev (en)")] == locomo["memstrata"]["overall"]["recall@5"]
    assert recall[("BM25 only (same index)", "LoCoMo dev (en)")] == \
        locomo["bm25"]["overall"]["recall@5"]
    assert recall[("published retriever", "LoCoMo dev (en)")] == published["locomo"]["recall@5"]
    # no published figure for MemDaily: no bar, not a zero
    assert ("published retriever", "MemDaily dev (zh)") not in recall
    assert len(recall) == 3 * 6 + 3
    by_cat = _bars(out / "bench-locomo.svg")
    assert by_cat[("memstrata", "multi-hop")] == \
        locomo["memstrata"]["by_category"]["multi-hop"]["recall@10"]
    assert by_cat[("DRAGON (published)", "multi-hop")] == \
        published["locomo"]["by_category_recall@10"]["multi-hop"]
    pg = json.loads((RESULTS / "latency_final_pg.json").read_text())["runs"]
    latency = _bars(out / "bench-latency.svg")
    assert latency[("memstrata on PostgreSQL + pgvector", "100,000 items")] == \
        next(r for r in pg if r["backend"] == "Postgres")["sizes"]["100000"][
            "search_excluding_embedding"]["p95_ms"]
    for path in out.glob("*.svg"):  # every chart: a title and a desc for screen readers
        root = ET.parse(path).getroot()
        assert root.get("role") == "img" and root.find(f"{SVG}title").text
        assert root.find(f"{SVG}desc").text.count(":") >= 2


def test_every_chart_is_shown_in_the_docs():
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    shown = set(re.findall(r"!\[[^\]]+\]\((?:docs/)?images/(bench-[a-z-]+\.svg)\)", docs))
    assert shown == {p.name for p in IMAGES.glob("bench-*.svg")}
    readme = (ROOT / "README.md").read_text()
    assert "docs/images/bench-recall.svg" in readme


def test_missing_results_skip_their_charts_and_none_is_an_error(tmp_path):
    some = tmp_path / "some"
    some.mkdir()
    shutil.copy(RESULTS / "latency_final_pg.json", some)
    result = _plot(some, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert [p.name for p in (tmp_path / "out").glob("*.svg")] == ["bench-latency.svg"]
    assert "skipped locomo: no locomo_dev.json, published.json" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _plot(empty, tmp_path / "out2")
    assert result.exit_code == 1 and "error: no chart can be drawn from" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out2").exists()


def test_a_malformed_results_file_is_named(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "updates_unseen2.json").write_text(json.dumps({"benchmark": "updates"}))
    result = _plot(bad, tmp_path / "out")
    assert result.exit_code == 1 and "updates_unseen2.json has no table" in result.output
    (bad / "updates_unseen2.json").write_text("{not json")
    result = _plot(bad, tmp_path / "out")
    assert result.exit_code == 1 and "cannot read results file" in result.output


def test_render_svg_escapes_and_checks_its_input():
    chart = Chart("x", "a <b> & c", ("one & two", "three"),
                  (Series("s<1>", (0.5, None)), Series("s2", (1.0, 0.25))))
    svg = render_svg(chart)
    root = ET.fromstring(svg)  # well-formed despite the markup in the labels
    assert root.find(f"{SVG}title").text == "a <b> & c"
    assert _bars(root) == {("s<1>", "one & two"): 0.5, ("s2", "one & two"): 1.0,
                              ("s2", "three"): 0.25}
    with pytest.raises(ValidationError, match="has 1 values for 2 categories"):
        render_svg(Chart("y", "t", ("a", "b"), (Series("s", (1.0,)),)))

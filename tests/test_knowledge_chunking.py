"""Parsing, cleaning, chunking and duplicate detection of the knowledge base (pure).

The chunking properties run under hypothesis on generated Chinese and English
documents: no text lost or duplicated, chunk boundaries only at sentence ends and
never across a heading, sizes within bounds.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.errors import ValidationError
from memstrata.knowledge.chunking import ChunkSpec, chunk, sentence_spans
from memstrata.knowledge.dedup import signature, similarity, text_hash
from memstrata.knowledge.parse import detect_format, parse
from memstrata.knowledge.usage import draws_on

# ---------------------------------------------------------------- generated documents

_EN_WORDS = st.sampled_from("router reset button light warranty month refund policy label "
                            "password network cable customer order shipping".split())
_ZH_CHARS = st.sampled_from(list("退货政策运费质量问题买家承担商品包装完好七天内无理由路由器重置按钮"))


@st.composite
def _sentence(draw, lang: str) -> str:
    if lang == "zh":
        body = "".join(draw(st.lists(_ZH_CHARS, min_size=4, max_size=40)))
        mid = draw(st.sampled_from(["", "，", "、"]))
        tail = "".join(draw(st.lists(_ZH_CHARS, min_size=0, max_size=30)))
        return body + (mid + tail if tail else "") + draw(st.sampled_from(["。", "！", "？"]))
    words = draw(st.lists(_EN_WORDS, min_size=2, max_size=14))
    return words[0].capitalize() + " " + " ".join(words[1:]) + draw(st.sampled_from([".", "!", "?"]))


@st.composite
def _document(draw) -> tuple[str, str]:
    """A Markdown document of sections, paragraphs and sentences (each under 300 chars)."""
    lang = draw(st.sampled_from(["zh", "en"]))
    joiner = "" if lang == "zh" else " "
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        level = draw(st.integers(1, 3))
        title = "".join(draw(st.lists(_ZH_CHARS, min_size=2, max_size=6))) if lang == "zh" \
            else " ".join(draw(st.lists(_EN_WORDS, min_size=1, max_size=3))).title()
        if draw(st.booleans()):
            parts.append("#" * level + " " + title)
        for _ in range(draw(st.integers(0, 5))):
            sentences = draw(st.lists(_sentence(lang), min_size=1, max_size=8))
            parts.append(joiner.join(sentences))
    if not parts:
        parts.append(draw(_sentence(lang)))
    return lang, "\n\n".join(parts)


def _compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _boundaries(parsed) -> tuple[set[int], set[int]]:
    """Sentence starts and ends of every block (a heading is one sentence)."""
    starts, ends = set(), set()
    for block in parsed.blocks:
        spans = [(block.start, block.end)] if block.kind == "heading" else \
            sentence_spans(parsed.text, block.start, block.end)
        starts |= {s for s, _ in spans}
        ends |= {e for _, e in spans}
    return starts, ends


SPECS = [ChunkSpec(), ChunkSpec(max_chars=200, min_chars=100), ChunkSpec(max_chars=120, min_chars=40),
         ChunkSpec(max_chars=300, min_chars=150, cjk_weight=2.0)]


@settings(max_examples=80, deadline=None)
@given(doc=_document(), spec=st.sampled_from(SPECS))
def test_chunks_keep_every_character_once_and_respect_boundaries(doc, spec) -> None:
    lang, markdown = doc
    parsed = parse(markdown, "markdown")
    pieces = chunk(parsed, spec)
    assert pieces
    # no text lost or duplicated: the chunks, in order, are the document
    assert "".join(_compact(parsed.text[p.start:p.end]) for p in pieces) == _compact(parsed.text)
    assert all(a.end <= b.start for a, b in zip(pieces, pieces[1:]))
    starts, ends = _boundaries(parsed)
    heading_starts = {b.start for b in parsed.blocks if b.kind == "heading"}
    max_sentence = max(e - s for b in parsed.blocks for s, e in
                       ([(b.start, b.end)] if b.kind == "heading" else sentence_spans(parsed.text, b.start, b.end)))
    for p in pieces:
        weighted = sum(spec.cjk_weight if "\u4e00" <= c <= "\u9fff" else 1.0
                       for c in parsed.text[p.start:p.end])
        if max_sentence * max(1.0, spec.cjk_weight) <= spec.max_chars:
            # boundaries respected: chunks start and end where sentences do
            assert p.start in starts and p.end in ends, (lang, parsed.text[p.start:p.end])
            assert weighted <= spec.max_chars + 1e-9
        # never across a heading, except headings carried into their section's first chunk
        inside = [h for h in heading_starts if p.start < h < p.end]
        for h in inside:
            assert not _compact(parsed.text[p.start:h]) or all(
                b.kind == "heading" for b in parsed.blocks if p.start <= b.start < h)
    # sizes: a chunk under min_chars is the only one of its section, or could not be
    # joined to a neighbour of its section without passing max_chars
    for i, p in enumerate(pieces):
        size = p.end - p.start
        if spec.cjk_weight != 1.0 or size >= spec.min_chars:
            continue
        same = [q for q in pieces if q.section == p.section]
        if len(same) == 1:
            continue
        neighbours = [pieces[j] for j in (i - 1, i + 1) if 0 <= j < len(pieces)
                      and pieces[j].section == p.section]
        assert all(max(q.end, p.end) - min(q.start, p.start) > spec.max_chars for q in neighbours)


def test_a_sentence_longer_than_the_limit_is_cut_at_a_clause_mark() -> None:
    text = "，".join(["退货需要在七天之内提出申请"] * 12) + "。"
    parsed = parse(text, "text")
    pieces = chunk(parsed, ChunkSpec(max_chars=60, min_chars=20))
    assert all(p.end - p.start <= 60 for p in pieces) and len(pieces) > 1
    assert all(parsed.text[p.end - 1] in "，。" for p in pieces)


def test_sentence_ends_in_chinese_and_english() -> None:
    text = "Dr. Smith reset it, e.g. twice. It took 3.5 s! 然后灯闪了两次。“好！”他说。Done?"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Dr. Smith reset it, e.g. twice.", "It took 3.5 s!", "然后灯闪了两次。", "“好！”", "他说。",
        "Done?"]


def test_heading_paths_and_headings_without_text() -> None:
    parsed = parse("# Guide\n\n## Install\n\n### Linux\n\nRun the installer.\n\n## Use\n\nOpen it.",
                   "markdown")
    pieces = chunk(parsed)
    assert [p.heading_path for p in pieces] == [("Guide", "Install", "Linux"), ("Guide", "Use")]
    assert parsed.text[pieces[0].start:pieces[0].end].startswith("Guide")  # carried headings


def test_a_long_paragraph_is_split_evenly_and_marked_as_continuing() -> None:
    para = " ".join(f"Sentence number {i} says something about routers." for i in range(30))
    parsed = parse(para, "text")
    pieces = chunk(parsed)
    sizes = [p.end - p.start for p in pieces]
    assert len(pieces) == 3 and max(sizes) - min(sizes) < 120
    assert [p.joins_next for p in pieces] == [True, True, False]


def test_spec_is_validated() -> None:
    with pytest.raises(ValidationError, match="min_chars"):
        ChunkSpec(max_chars=100, min_chars=200)
    with pytest.raises(ValidationError, match="max_chars"):
        ChunkSpec(max_chars=5)


# ---------------------------------------------------------------- parsing and cleaning


def test_markdown_structure_code_tables_and_inline_markup() -> None:
    md = ("---\ntitle: x\n---\n# Guide\n\nIntro *text* with [a link](http://x) and `code`.\n\n"
          "- step one\n- step two\n  continues\n\n```\n# not a heading\n```\n\n| a | b |\n|---|---|\n"
          "| 1 | 2 |\n\nSetext\n------\nbody\n")
    parsed = parse(md, name="guide.md")
    kinds = [(b.kind, parsed.text[b.start:b.end]) for b in parsed.blocks]
    assert kinds == [("heading", "Guide"), ("paragraph", "Intro text with a link and code."),
                     ("item", "step one"), ("item", "step two continues"), ("code", "# not a heading"),
                     ("row", "a | b"), ("row", "1 | 2"), ("heading", "Setext"), ("paragraph", "body")]
    assert parsed.title == "Guide" and parsed.format == "markdown"


def test_html_boilerplate_is_dropped_and_main_kept() -> None:
    html = ("<html><head><title>Returns</title><style>p{}</style></head><body>"
            "<nav>Home | Shop</nav><div class='cookie-banner'>Accept cookies</div>"
            "<main><h1>退货</h1><p>七天内&nbsp;可以退货。</p><ul><li>保持包装</li></ul>"
            "<table><tr><th>天数</th><td>7</td></tr></table><script>track()</script></main>"
            "<footer>© shop</footer></body></html>")
    parsed = parse(html)
    assert parsed.format == "html" and parsed.title == "Returns"
    assert parsed.text == "退货\n\n七天内 可以退货。\n\n保持包装\n\n天数 | 7"
    assert [b.kind for b in parsed.blocks] == ["heading", "paragraph", "item", "row"]


def test_plain_text_whitespace_and_offsets_back_to_the_raw_text() -> None:
    raw = "Title\n\nFirst line\nwrapped   here.\u200b\n\n\n第二段\n中文换行。\n"
    parsed = parse(raw, "text")
    assert parsed.text == "Title\n\nFirst line wrapped here.\n\n第二段中文换行。"
    assert parsed.origin is not None
    for i, c in enumerate(parsed.text):
        if not c.isspace():
            assert raw[parsed.origin[i]] == c


def test_running_headers_of_paged_text_are_removed() -> None:
    topics = ["routers", "cables", "refunds", "labels"]
    pages = ["ACME Manual — confidential\n" + "".join(
        f"Body line {j} of the chapter on {topic}.\n" for j in range(6)) + f"Page {i} of 4\n"
        for i, topic in enumerate(topics, 1)]
    parsed = parse("\f".join(pages), "text")
    assert "confidential" not in parsed.text and "Page" not in parsed.text
    assert parsed.text.count("Body line") == 24


def test_format_detection_and_errors() -> None:
    assert detect_format("a.MD") == "markdown" and detect_format("x", b"%PDF-1.4") == "pdf"
    assert detect_format("", "<!doctype html><p>x") == "html"
    assert detect_format("", "plain words") == "text"
    with pytest.raises(ValidationError, match="unknown document format"):
        parse("x", "docx")
    with pytest.raises(ValidationError, match="bytes"):
        parse("%PDF-1.4", "pdf")
    assert parse("caf\xe9 ol\xe9".encode("latin-1"), "text").text.startswith("caf")


def _minimal_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with the given lines of text (Helvetica), offsets computed."""
    stream = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({t}) Tj T*" for t in lines) + " ET"
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               "/Resources << /Font << /F1 5 0 R >> >> >>",
               f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def test_pdf_text_through_pypdf() -> None:
    pytest.importorskip("pypdf")
    parsed = parse(_minimal_pdf(["Hold the reset button for ten seconds.", "The lights blink twice."]))
    assert parsed.format == "pdf"
    assert "Hold the reset button for ten seconds." in parsed.text and "blink twice" in parsed.text
    with pytest.raises(ValidationError, match="cannot be read"):
        parse(b"%PDF-1.4\nnot really a pdf")


# ---------------------------------------------------------------- duplicates and usage


def test_exact_and_near_duplicate_signatures() -> None:
    base = ("退货政策：自收货之日起七天内可以无理由退货，商品需保持完好，包装齐全。质量问题由我们承担运费，"
            "非质量问题由买家承担。退款在收到退货后三个工作日内原路返回。" +
            " ".join(f"Section {w}: the warranty covers {w} parts for twenty-four months from the "
                     f"date of purchase, labour included, when the {w} is used as intended."
                     for w in ("router", "modem", "cable", "switch", "antenna", "adapter")))
    assert text_hash(base) == text_hash("  " + base.upper().lower() + "\n")
    edited = base.replace("twenty-four", "thirty-six", 1)
    assert similarity(signature(base), signature(edited)) >= 0.85
    other = "Completely different text about shipping cables to customers overseas. " * 10
    assert similarity(signature(base), signature(other)) < 0.2
    assert signature("") == () and similarity((), signature(base)) == 0.0


def test_a_reply_draws_on_a_chunk_by_its_own_words() -> None:
    chunk_text = "The warranty lasts 24 months from the date of purchase and covers parts and labour."
    query = "How long is the warranty?"
    assert draws_on("It lasts 24 months from purchase, parts and labour included.", chunk_text, query)
    assert not draws_on("The warranty? Please ask our support team.", chunk_text, query)
    zh = "自收货之日起七天内可以无理由退货，商品需保持完好。"
    assert draws_on("您可以在收货七天内无理由退货，但商品要保持完好。", zh, "怎么退货？")
    assert not draws_on("好的，我帮您查一下。", zh, "怎么退货？")

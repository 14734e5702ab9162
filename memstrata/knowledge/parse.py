"""Documents in, clean blocks out: plain text, Markdown, HTML and PDF (pure, no I/O).

:func:`parse` turns the raw content of one document into a :class:`Parsed`: its title,
its *cleaned* text and the blocks of that text (headings with their level, paragraphs,
list items, code, table rows), each an offset range into the text. Chunking
(:mod:`memstrata.knowledge.chunking`) only ever sees that shape.

Cleaning, for every format:

* whitespace: line breaks normalised, runs of spaces folded, zero-width and control
  characters dropped, blank lines between blocks only;
* boilerplate: in HTML, ``script``/``style``/``nav``/``footer``/``aside``/forms and
  elements whose class or id names navigation, cookies, breadcrumbs or ads; only the
  ``<main>``/``<article>`` part when a page has one;
* repeated headers: on paged input (PDF pages, form feeds in text) a line that opens or
  closes at least half of the pages (digits ignored: "Page 3 of 9") is a running header
  or footer and is dropped.

Plain text keeps, besides, where each cleaned character came from (``Parsed.origin``),
so spans given against the raw text (a benchmark's gold answers) can be located.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from io import BytesIO

from ..errors import ConfigError, ValidationError, shown

__all__ = ["Block", "Parsed", "parse", "FORMATS", "detect_format"]

#: The formats :func:`parse` reads (``auto`` picks one from the name and the content).
FORMATS = ("text", "markdown", "html", "pdf")


@dataclass(frozen=True, slots=True)
class Block:
    """A range of :attr:`Parsed.text`: a heading (``level`` 1–6), a paragraph, a list
    item, a code block or a table row. Blocks never overlap and are in text order."""

    kind: str  # heading | paragraph | item | code | row
    start: int
    end: int
    level: int = 0


@dataclass(frozen=True, slots=True)
class Parsed:
    """One cleaned document: ``text`` is the blocks joined by blank lines."""

    format: str
    title: str
    text: str
    blocks: tuple[Block, ...]
    origin: tuple[int, ...] | None = None  # plain text: raw offset of each character


def detect_format(name: str = "", raw: "str | bytes" = "") -> str:
    """The format of a document from its file name, else from its first bytes."""
    low = name.lower()
    for suffix, fmt in ((".md", "markdown"), (".markdown", "markdown"), (".mdx", "markdown"),
                        (".html", "html"), (".htm", "html"), (".xhtml", "html"), (".pdf", "pdf"),
                        (".txt", "text"), (".text", "text"), (".rst", "text")):
        if low.endswith(suffix):
            return fmt
    head = raw[:1024]
    if isinstance(head, bytes):
        if head.startswith(b"%PDF-"):
            return "pdf"
        head = head.decode("utf-8", "replace")
    probe = head.lstrip().lower()
    if probe.startswith(("<!doctype html", "<html")) or re.search(r"<(p|div|h[1-6]|body)\b", probe):
        return "html"
    if re.search(r"(?m)^#{1,6} \S", head) or re.search(r"(?m)^```", head):
        return "markdown"
    return "text"


# ---------------------------------------------------------------- whitespace and blocks

_DROP_CHARS = dict.fromkeys(
    [c for c in range(32) if c not in (9, 10, 12, 13)] + [0x7f, 0x200b, 0x200c, 0x200d, 0x2060,
                                                          0xfeff, 0x00ad])
_SPACE = re.compile(r"[ \t\u00a0\u3000\u2000-\u200a\u202f\u205f]+")
_CJK_END = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _fold(text: str) -> str:
    """One line of text: dropped characters gone, whitespace runs one space, stripped."""
    return _SPACE.sub(" ", text.translate(_DROP_CHARS)).strip()


def _join_lines(lines: Sequence[str]) -> str:
    """Soft-wrapped lines of one paragraph as one line (no space between CJK lines)."""
    out = ""
    for line in lines:
        if not line:
            continue
        if out and not (_CJK_END.match(out[-1]) and _CJK_END.match(line[0])):
            out += " "
        out += line
    return out


class _Builder:
    """Accumulates blocks into one text, blank line between blocks."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.blocks: list[Block] = []
        self.size = 0

    def add(self, kind: str, text: str, level: int = 0) -> None:
        text = text.strip()
        if not text:
            return
        if self.parts:
            self.parts.append("\n\n")
            self.size += 2
        self.blocks.append(Block(kind, self.size, self.size + len(text), level))
        self.parts.append(text)
        self.size += len(text)

    def done(self, fmt: str, title: str) -> Parsed:
        text = "".join(self.parts)
        if not title:
            heads = [b for b in self.blocks if b.kind == "heading"]
            first = min(heads, key=lambda b: (b.level, b.start)) if heads else None
            title = text[first.start:first.end] if first else ""
        return Parsed(fmt, title, text, tuple(self.blocks))


# ---------------------------------------------------------------- repeated headers

_DIGITS = re.compile(r"\d+")


def _running_lines(pages: Sequence[Sequence[str]]) -> set[str]:
    """Lines that open or close at least half of the pages (3 pages or more): running
    headers and footers. Compared with digits folded, so page numbers do not matter."""
    if len(pages) < 3:
        return set()
    seen: Counter[str] = Counter()
    for page in pages:
        lines = [x for x in (_fold(line) for line in page) if x]
        k = min(2, len(lines) // 3)  # a short page has no room for running lines
        edge = {_DIGITS.sub("#", x) for x in lines[:k] + lines[len(lines) - k:] if len(x) <= 120}
        seen.update(edge)
    return {key for key, n in seen.items() if n >= max(3, (len(pages) + 1) // 2)}


def _strip_running(pages: Sequence[Sequence[str]]) -> list[list[str]]:
    running = _running_lines(pages)
    out = []
    for page in pages:
        lines = list(page)
        if running:
            kept_idx = [i for i, x in enumerate(lines) if x.strip()]
            k = min(2, len(kept_idx) // 3)
            edges = set(kept_idx[:k] + kept_idx[len(kept_idx) - k:])
            lines = [x for i, x in enumerate(lines)
                     if not (i in edges and _DIGITS.sub("#", _fold(x)) in running)]
        out.append(lines)
    return out


# ---------------------------------------------------------------- plain text


def _parse_text(raw: str, title: str) -> Parsed:
    """Paragraphs split at blank lines — or at every line break when the text has no
    blank line at all (one paragraph per line). Keeps each character's raw offset."""
    pages = raw.split("\f")
    if len(pages) >= 3:
        stripped = _strip_running([p.split("\n") for p in pages])
        raw = "\f".join("\n".join(p) for p in stripped)  # offsets are then of this text
    text_chars: list[str] = []
    origin: list[int] = []
    blocks: list[Block] = []
    para_break = re.compile(r"\n[ \t\u3000\r]*\n" if re.search(r"\n[ \t\u3000\r]*\n", raw)
                            else r"\n")
    pos = 0
    for match in re.finditer(rf"{para_break.pattern}|\f|\Z", raw):
        chunk_start, chunk_end = pos, match.start()
        pos = match.end()
        start_len = len(text_chars)
        pending_space = -1  # where the whitespace run before the next character began
        prev_char = ""
        for i in range(chunk_start, chunk_end):
            c = raw[i]
            if c in "\r":
                continue
            if c == "\n" or _SPACE.match(c):
                if c == "\n" and prev_char and _CJK_END.match(prev_char) and i + 1 < chunk_end \
                        and _CJK_END.match(raw[i + 1]):
                    continue  # a CJK soft wrap: no space
                if len(text_chars) > start_len and pending_space < 0:
                    pending_space = i
                continue
            if ord(c) in _DROP_CHARS:
                continue
            if pending_space >= 0:
                text_chars.append(" ")
                origin.append(pending_space)
                pending_space = -1
            text_chars.append(c)
            origin.append(i)
            prev_char = c
        if len(text_chars) > start_len:
            blocks.append(Block("paragraph", start_len, len(text_chars)))
            text_chars += ["\n", "\n"]
            origin += [chunk_end, chunk_end]
        if match.end() == len(raw) and match.start() == len(raw):
            break
    if blocks:
        del text_chars[blocks[-1].end:]
        del origin[blocks[-1].end:]
    text = "".join(text_chars)
    if not title and blocks:
        first = text[blocks[0].start:blocks[0].end]
        title = first if len(first) <= 120 else ""
    return Parsed("text", title, text, tuple(blocks), tuple(origin))


# ---------------------------------------------------------------- Markdown

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)
_INLINE = [(re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),      # images: their alt text
           (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),       # links: their text
           (re.compile(r"<[^>\n]+>"), ""),                       # inline HTML tags
           (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
           (re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])"), r"\1"),
           (re.compile(r"`([^`]+)`"), r"\1")]


def _inline(text: str) -> str:
    for pattern, repl in _INLINE:
        text = pattern.sub(repl, text)
    return _fold(text)


class _MarkdownReader:
    """What :func:`_parse_markdown` holds between lines: the blocks so far, the open
    paragraph or list item (``item``: the lines in ``para`` are a list item with its
    continuation lines) and the open code fence."""

    def __init__(self) -> None:
        self.out = _Builder()
        self.para: list[str] = []
        self.item = False
        self.fence: str | None = None
        self.code: list[str] = []

    def flush(self) -> None:
        if self.para:
            self.out.add("item" if self.item else "paragraph", _join_lines([_inline(x) for x in self.para]))
            self.para.clear()
        self.item = False

    def feed(self, line: str) -> None:
        if self.fence is not None:
            if line.strip().startswith(self.fence):
                self.out.add("code", "\n".join(x.rstrip() for x in self.code).strip("\n"))
                self.fence, self.code = None, []
            else:
                self.code.append(line.translate(_DROP_CHARS))
        elif self._block(line):
            pass
        elif _ITEM.match(line):
            self.flush()
            self.para.append(_ITEM.sub("", line, count=1))
            self.item = True
        else:
            self.para.append(re.sub(r"^\s*>\s?", "", line))

    def _block(self, line: str) -> bool:
        """Whether ``line`` is a block of its own or ends one: a fence, a heading, a rule
        or a blank line, a table row."""
        opened = _FENCE.match(line)
        if opened:
            self.flush()
            self.fence = opened.group(1)[0] * 3
            return True
        atx = _ATX.match(line)
        if atx:
            self.flush()
            self.out.add("heading", _inline(atx.group(2)), len(atx.group(1)))
            return True
        setext = _SETEXT.match(line)
        if setext and len(self.para) == 1 and not _ITEM.match(self.para[0]):
            heading = self.para.pop()
            self.out.add("heading", _inline(heading), 1 if setext.group(1)[0] == "=" else 2)
            return True
        stripped = line.strip()
        if not stripped or re.fullmatch(r"(\*\s*){3,}|(-\s*){3,}|(_\s*){3,}", stripped):
            self.flush()
            return True
        if stripped.startswith("|"):
            self.flush()
            if not re.fullmatch(r"\|?[\s:|-]+\|?", stripped):  # not the separator row of a table
                cells = [_inline(c) for c in stripped.strip("|").split("|")]
                self.out.add("row", " | ".join(c for c in cells if c))
            return True
        return False

    def done(self, title: str) -> Parsed:
        if self.fence is not None and self.code:
            self.out.add("code", "\n".join(self.code).strip("\n"))
        self.flush()
        return self.out.done("markdown", title)


def _parse_markdown(raw: str, title: str) -> Parsed:
    """ATX and setext headings, fenced code, list items, tables, quotes and paragraphs;
    inline markup reduced to its text. ``#`` inside a code fence is code."""
    raw = _FRONT.sub("", raw.replace("\r\n", "\n").replace("\r", "\n"))
    reader = _MarkdownReader()
    for line in raw.split("\n"):
        reader.feed(line)
    return reader.done(title)


# ---------------------------------------------------------------- HTML

_SKIP_TAGS = {"script", "style", "noscript", "nav", "footer", "aside", "form", "template", "svg",
              "iframe", "button", "select", "menu", "dialog", "canvas", "object"}
_BOILER = re.compile(r"(?:^|[\s_-])(nav|navbar|menu|footer|sidebar|cookie|consent|breadcrumbs?|"
                     r"banner|advert|ads?|share|social|skip-link|toc)(?:$|[\s_-])", re.I)
_BOILER_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
_BLOCK_TAGS = {"p", "div", "section", "article", "main", "blockquote", "header", "figure",
               "figcaption", "dd", "dt", "dl", "address", "details", "summary", "body", "table",
               "ul", "ol", "hr", "br"}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source",
         "track", "wbr"}


class _HTMLText(HTMLParser):
    """Collects blocks from HTML: headings, paragraphs, list items, table rows, code."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str, int]] = []  # (kind, text, level)
        self.title = ""
        self._in_title = False
        self._skip: list[str] = []  # the open tags being skipped (boilerplate)
        self._buf: list[str] = []
        self._kind = "paragraph"
        self._level = 0
        self._pre = 0
        self._cells: list[str] | None = None
        self.main_depth = 0
        self.has_main = False
        self.main_blocks: list[tuple[str, str, int]] = []

    def _emit(self) -> None:
        text = "".join(self._buf)
        self._buf = []
        text = "\n".join(x.rstrip() for x in text.split("\n")).strip("\n") if self._kind == "code" \
            else _fold(text)
        if text:
            block = (self._kind, text, self._level)
            self.blocks.append(block)
            if self.main_depth:
                self.main_blocks.append(block)
        self._kind, self._level = "paragraph", 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag not in _VOID:
                self._skip.append(tag)
            return
        values = dict(attrs)
        marks = " ".join(v or "" for k, v in values.items() if k in ("class", "id"))
        if tag in _SKIP_TAGS or (values.get("role") or "") in _BOILER_ROLES \
                or (tag not in ("main", "article", "body", "html") and marks and _BOILER.search(marks)) \
                or "hidden" in values or values.get("aria-hidden") == "true":
            if tag not in _VOID:
                self._skip.append(tag)
            return
        if tag == "title":
            self._in_title = True
        elif tag in ("main", "article"):
            self._emit()
            self.main_depth += 1
            self.has_main = True
        elif re.fullmatch(r"h[1-6]", tag):
            self._emit()
            self._kind, self._level = "heading", int(tag[1])
        elif tag == "li":
            self._emit()
            self._kind = "item"
        elif tag == "pre":
            self._emit()
            self._kind = "code"
            self._pre += 1
        elif tag == "tr":
            self._emit()
            self._cells = []
        elif tag in ("td", "th") and self._cells is not None:
            self._buf = []
        elif tag in _BLOCK_TAGS:
            if tag == "br" and not self._pre:
                self._buf.append(" ")
            else:
                self._emit()

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            elif tag in self._skip:
                while self._skip and self._skip.pop() != tag:
                    pass
            return
        if tag == "title":
            self._in_title = False
        elif tag in ("td", "th") and self._cells is not None:
            self._cells.append(_fold("".join(self._buf)))
            self._buf = []
        elif tag == "tr" and self._cells is not None:
            cells = [c for c in self._cells if c]
            self._cells = None
            if cells:
                self._kind = "row"
                self._buf = [" | ".join(cells)]
                self._emit()
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self._emit()
        elif tag in ("main", "article"):
            self._emit()
            self.main_depth = max(0, self.main_depth - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag == "li" or tag in _BLOCK_TAGS:
            self._emit()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip:
            return
        self._buf.append(data if self._pre else data.replace("\n", " "))

    def close(self) -> None:
        super().close()
        self._emit()


def _parse_html(raw: str, title: str) -> Parsed:
    reader = _HTMLText()
    reader.feed(raw)
    reader.close()
    blocks = reader.main_blocks if reader.has_main and reader.main_blocks else reader.blocks
    out = _Builder()
    for kind, text, level in blocks:
        out.add(kind, text, level)
    return out.done("html", title or _fold(reader.title))


# ---------------------------------------------------------------- PDF


def _parse_pdf(raw: bytes, title: str) -> Parsed:
    """Text of each page through pypdf (the ``pdf`` extra); running headers and footers
    dropped, lines joined into paragraphs at blank lines and sentence ends."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:
        raise ConfigError("reading PDF needs pypdf: pip install 'memstrata[pdf]'") from exc
    try:
        reader = PdfReader(BytesIO(raw))
        pages = [(page.extract_text() or "").split("\n") for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata and reader.metadata.title else "")
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ValidationError(f"this PDF cannot be read ({exc}); is it encrypted or damaged?") from exc
    out = _Builder()
    para: list[str] = []
    for page in _strip_running(pages):
        for line in page:
            line = _fold(line)
            if not line:
                if para:
                    out.add("paragraph", _join_lines(para))
                    para = []
                continue
            para.append(line)
            if re.search(r"[.!?。！？]\W*$", line) and len(line) < 60:
                out.add("paragraph", _join_lines(para))  # a short line ending a sentence
                para = []
    if para:
        out.add("paragraph", _join_lines(para))
    return out.done("pdf", title or _fold(str(meta_title)))


# ---------------------------------------------------------------- entry point


def _decode(raw: "str | bytes") -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(raw).best()
        if best is None:
            raise ValidationError("the document is not text in any encoding memstrata can "
                                  "recognise; pass it as str or as UTF-8 bytes") from None
        return str(best)


def parse(raw: "str | bytes", format: str = "auto", *, name: str = "", title: str = "") -> Parsed:
    """Parse and clean one document. ``format``: ``auto`` (from ``name`` and the content)
    or one of :data:`FORMATS`. ``title`` overrides the title found in the document (the
    first top-level heading, the HTML ``<title>``, the PDF's metadata, or a short first
    line of plain text)."""
    fmt = detect_format(name, raw) if format == "auto" else format
    if fmt not in FORMATS:
        raise ValidationError(f"unknown document format {shown(format)}; use auto, {', '.join(FORMATS)}")
    if fmt == "pdf":
        if isinstance(raw, str):
            raise ValidationError("a PDF must be passed as bytes (open the file with 'rb')")
        parsed = _parse_pdf(raw, title)
    else:
        text = _decode(raw)
        if fmt == "text":  # no normalisation: every character keeps its raw offset
            return _parse_text(text, title)
        text = unicodedata.normalize("NFC", text)
        parsed = _parse_markdown(text, title) if fmt == "markdown" else _parse_html(text, title)
    return parsed

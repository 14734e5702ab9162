"""Chunking on heading, paragraph and sentence boundaries (pure).

A document (:class:`~memstrata.knowledge.parse.Parsed`) is cut into sections at its
headings; each section into chunks of about ``min_chars``–``max_chars`` characters
(300–500 by default). The rules, in order:

1. A chunk never spans two sections, so every chunk has one heading path
   ("Guide › Install › Linux"). A heading with no text of its own before the next
   heading joins the next section's first chunk.
2. Inside a section, chunks end at paragraph ends where they can, else at sentence ends
   — never inside a sentence. A section longer than ``max_chars`` is cut into ``n`` chunks
   of about ``length / n`` each (``n`` the fewest that fit), so no chunk is a stub.
3. Sentences end at 。！？!? (and …) with their closing quotes, and at ". " when the
   word before is not an abbreviation ("e.g.", "Dr.") or an initial. Code and table rows
   are cut at line ends. Only a single sentence longer than ``max_chars`` is cut inside —
   at a clause mark (，、；,;:) if it has one, else at a space, else where it must.
4. Sizes are in characters with CJK characters counted ``cjk_weight`` times (1 by
   default: the limits are plain characters).

Chunks are offset ranges into the cleaned text: together they hold every non-space
character exactly once (the tests check it with hypothesis).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from ..errors import ValidationError, shown
from .parse import Block, Parsed

__all__ = ["ChunkSpec", "Piece", "chunk", "sentence_spans", "CHUNKER_VERSION"]

#: Bumped when the rules change, so adding a stored document again re-chunks it (chunks
#: whose text did not change keep their ids and vectors).
CHUNKER_VERSION = 2


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    """How to cut: the size window and how a CJK character counts."""

    max_chars: int = 500
    min_chars: int = 300
    cjk_weight: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 20:
            raise ValidationError(f"max_chars must be an integer of at least 20, not {shown(self.max_chars)}")
        if isinstance(self.min_chars, bool) or not isinstance(self.min_chars, int) \
                or not 0 <= self.min_chars <= self.max_chars:
            raise ValidationError(f"min_chars must be an integer between 0 and max_chars "
                                  f"({self.max_chars}), not {shown(self.min_chars)}")
        if not isinstance(self.cjk_weight, (int, float)) or not 0.1 <= self.cjk_weight <= 10:
            raise ValidationError("cjk_weight must be a number between 0.1 and 10, not "
                                  f"{shown(self.cjk_weight)}")


@dataclass(frozen=True, slots=True)
class Piece:
    """One chunk: ``text[start:end]`` under ``heading_path``. ``joins_next`` says the
    paragraph it ends in goes on in the next chunk (a hit on it is cut mid-thought)."""

    start: int
    end: int
    heading_path: tuple[str, ...]
    joins_next: bool = False
    section: int = 0  # which section of the document (two sections can share a path)


# ---------------------------------------------------------------- sentences

_ABBREV = frozenset("""mr mrs ms dr prof sr jr st vs etc e.g i.e eg ie al fig figs no nos vol
inc ltd co corp dept approx est cf resp ref refs eq eqs ch sec p pp ca u.s u.k jan feb mar
apr jun jul aug sep sept oct nov dec mt ave""".split())
_END_CJK = re.compile(r"[。！？!?…]+[”’\"'）)\]」』】]*")
_END_DOT = re.compile(r"\.+[”’\"'）)\]」』】]*(?=\s)")
_CLAUSE = re.compile(r"[，、；;：:,]\s*")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


def _is_abbreviation(text: str, dot: int) -> bool:
    match = _WORD_BEFORE.search(text, max(0, dot - 12), dot)
    if not match:
        return False
    word = match.group(1).lower().rstrip(".")
    return word in _ABBREV or len(word) == 1


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` as (start, end) ranges, spaces trimmed."""
    end = len(text) if end is None else end
    cuts: list[int] = []
    for match in _END_CJK.finditer(text, start, end):
        if match.group(0)[0] in "!?" and match.end() < end and not text[match.end()].isspace() \
                and text[match.end()].isascii():
            continue  # "Yahoo!Inc" or "?x" inside a word
        cuts.append(match.end())
    for match in _END_DOT.finditer(text, start, end):
        nxt = re.compile(r"\s*(\S)").match(text, match.end(), end)
        if _is_abbreviation(text, match.start()) or (nxt and nxt.group(1).islower()):
            continue
        cuts.append(match.end())
    spans = []
    pos = start
    for cut in sorted(set(cuts)) + [end]:
        s, e = _trim(text, pos, cut)
        if e > s:
            spans.append((s, e))
        pos = cut
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# ---------------------------------------------------------------- units


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int
    block: int  # index of the block it belongs to
    forced: bool = False  # cut out of a sentence longer than max_chars


def _split_long(text: str, start: int, end: int, block: int, size: "_Sizer",
                limit: int) -> list[_Unit]:
    """A sentence longer than ``limit``: at clause marks, then spaces, then anywhere."""
    out: list[_Unit] = []
    pos = start
    while size(pos, end) > limit:
        best = None
        for pattern in (_CLAUSE, re.compile(r"\s+")):
            for match in pattern.finditer(text, pos, end):
                if match.end() >= end or size(pos, match.end()) > limit:
                    break
                best = match.end()
            if best is not None:
                break
        if best is None:  # no mark: the longest prefix within the limit
            best = pos + 1
            while best < end and size(pos, best + 1) <= limit:
                best += 1
        s, e = _trim(text, pos, best)
        if e > s:
            out.append(_Unit(s, e, block, True))
        pos = best
    s, e = _trim(text, pos, end)
    if e > s:
        out.append(_Unit(s, e, block, True))
    return out


class _Sizer:
    """Weighted length of any range in O(1): prefix sums of per-character weights."""

    _CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")

    def __init__(self, text: str, cjk_weight: float) -> None:
        if cjk_weight == 1.0:
            self.prefix = None
        else:
            self.prefix = [0.0, *accumulate(cjk_weight if self._CJK.match(c) else 1.0 for c in text)]

    def __call__(self, start: int, end: int) -> float:
        if self.prefix is None:
            return float(end - start)
        return self.prefix[end] - self.prefix[start]


def _units(parsed: Parsed, blocks: Sequence[tuple[int, Block]], size: _Sizer,
           limit: int) -> list[_Unit]:
    text = parsed.text
    out: list[_Unit] = []
    for index, block in blocks:
        if block.kind in ("code", "row"):
            spans = []
            pos = block.start
            for line in text[block.start:block.end].split("\n"):
                s, e = _trim(text, pos, pos + len(line))
                if e > s:
                    spans.append((s, e))
                pos += len(line) + 1
        elif block.kind == "heading":
            spans = [(block.start, block.end)]
        else:
            spans = sentence_spans(text, block.start, block.end)
        for s, e in spans:
            if size(s, e) > limit:
                out.extend(_split_long(text, s, e, index, size, limit))
            else:
                out.append(_Unit(s, e, index))
    return out


# ---------------------------------------------------------------- packing


def _pack(units: Sequence[_Unit], block_ends: dict[int, int], size: _Sizer,
          spec: ChunkSpec) -> list[list[_Unit]]:
    """Greedy packing of a section's units, aiming at ``length / n`` per chunk."""
    if not units:
        return []
    total = size(units[0].start, units[-1].end)
    n = max(1, math.ceil(total / spec.max_chars))
    target = total / n
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    for unit in units:
        if current:
            grown = size(current[0].start, unit.end)
            new_block = unit.block != current[-1].block
            rest_of_block = size(current[0].start, block_ends[unit.block])
            if grown > spec.max_chars:
                groups.append(current)
                current = []
            elif new_block and size(current[0].start, current[-1].end) >= min(target, spec.max_chars) * 0.9:
                groups.append(current)
                current = []
            elif new_block and size(current[0].start, current[-1].end) >= spec.min_chars \
                    and rest_of_block > spec.max_chars \
                    and size(unit.start, block_ends[unit.block]) <= spec.max_chars:
                groups.append(current)  # end at this paragraph rather than cut the next
                current = []
        current.append(unit)
    groups.append(current)
    return _merge_small(groups, size, spec)


def _merge_small(groups: list[list[_Unit]], size: _Sizer, spec: ChunkSpec) -> list[list[_Unit]]:
    """Join every chunk under ``min_chars`` to the smaller neighbour it fits with."""
    i = 0
    while i < len(groups):
        group = groups[i]
        if len(groups) > 1 and size(group[0].start, group[-1].end) < spec.min_chars:
            options = [(size(groups[j][0].start, groups[j][-1].end), j) for j in (i - 1, i + 1)
                       if 0 <= j < len(groups)
                       and size(groups[min(i, j)][0].start, groups[max(i, j)][-1].end) <= spec.max_chars]
            if options:
                j = min(options)[1]
                a, b = min(i, j), max(i, j)
                groups[a:b + 1] = [groups[a] + groups[b]]
                i = max(0, a - 1)
                continue
        i += 1
    return groups


def chunk(parsed: Parsed, spec: ChunkSpec | None = None) -> list[Piece]:
    """Cut a parsed document into chunks (see the module docstring for the rules)."""
    spec = spec or ChunkSpec()
    size = _Sizer(parsed.text, spec.cjk_weight)
    stack: list[tuple[int, str]] = []  # (level, heading text)
    sections: list[tuple[tuple[str, ...], list[tuple[int, Block]]]] = []
    carried: list[tuple[int, Block]] = []  # headings with no text of their own yet
    for index, block in enumerate(parsed.blocks):
        if block.kind == "heading":
            if sections and not carried and all(b.kind == "heading" for _, b in sections[-1][1]):
                carried = sections.pop()[1]
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, " ".join(parsed.text[block.start:block.end].split())))
            sections.append((tuple(h for _, h in stack), carried + [(index, block)]))
            carried = []
        elif sections:
            sections[-1][1].append((index, block))
        else:
            sections.append(((), [(index, block)]))
    pieces: list[Piece] = []
    for number, (path, blocks) in enumerate(sections):
        units = _units(parsed, blocks, size, spec.max_chars)
        block_ends = {i: b.end for i, b in blocks}
        groups = _pack(units, block_ends, size, spec)
        for i, group in enumerate(groups):
            joins = i + 1 < len(groups) and groups[i + 1][0].block == group[-1].block
            pieces.append(Piece(group[0].start, group[-1].end, path, joins, number))
    return pieces

"""Compile the inspector's gettext catalogues (``locale/<lang>/LC_MESSAGES/*.po``) into the
``.mo`` files Python's :mod:`gettext` reads, with the standard library only.

``python -m memstrata.server.ui.msgfmt`` rewrites every ``.mo`` beside its ``.po``;
``--check`` only reports the ones that are out of date (exit status 1), as the tests do.
The output is byte-for-byte reproducible: messages sorted, no hash table (GNU ``msgfmt``'s
``--no-hash`` layout, which :class:`gettext.GNUTranslations` reads).

What is understood of the ``.po`` format: comments (``#, fuzzy`` entries are left out,
as ``msgfmt`` does), ``msgid``/``msgstr``, ``msgid_plural``/``msgstr[n]``, strings
continued over several lines, and the escapes ``\\\\ \\" \\n \\t``. Anything else
(``msgctxt``, an unknown keyword or escape) is a :class:`ValidationError` naming the line.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from ...errors import ValidationError

__all__ = ["LOCALE", "read_po", "mo_bytes", "read_mo", "compile_catalogues"]

LOCALE = Path(__file__).parent / "locale"
_MAGIC = 0x950412DE
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}


def _unquote(text: str, where: str) -> str:
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValidationError(f"{where}: expected a quoted string, got {text[:40]!r}")
    out: list[str] = []
    body = iter(text[1:-1])
    for char in body:
        if char == '"':
            raise ValidationError(f"{where}: unescaped quote inside a string")
        if char == "\\":
            escaped = next(body, "")
            if escaped not in _ESCAPES:
                raise ValidationError(f"{where}: unsupported escape \\{escaped}")
            char = _ESCAPES[escaped]
        out.append(char)
    return "".join(out)


def read_po(path: Path) -> dict[str, str]:
    """msgid -> msgstr of a ``.po`` file (plural entries keyed ``msgid\\0msgid_plural``,
    their forms joined by ``\\0``, as in a ``.mo``); the header is the ``""`` entry."""
    messages: dict[str, str] = {}
    entry: dict[str, str] = {}
    fuzzy = False
    field = ""

    def finish() -> None:
        nonlocal entry, fuzzy
        if "msgid" in entry and not fuzzy:
            if "msgid_plural" in entry:
                forms = sorted((k for k in entry if k.startswith("msgstr[")),
                               key=lambda k: int(k[7:-1]))
                key = entry["msgid"] + "\0" + entry["msgid_plural"]
                messages[key] = "\0".join(entry[k] for k in forms)
            else:
                messages[entry["msgid"]] = entry.get("msgstr", "")
        entry, fuzzy = {}, False

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.name}:{number}"
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                if "msgid" in entry:
                    finish()
                fuzzy = True
            continue
        if line.startswith('"'):
            if not field:
                raise ValidationError(f"{where}: a string continues nothing")
            entry[field] += _unquote(line, where)
            continue
        keyword, _, rest = line.partition(" ")
        if keyword == "msgid" and "msgid" in entry:
            finish()
        if keyword not in ("msgid", "msgid_plural", "msgstr") and not (
                keyword.startswith("msgstr[") and keyword.endswith("]") and keyword[7:-1].isdigit()):
            raise ValidationError(f"{where}: unsupported keyword {keyword!r}")
        if keyword in entry:
            raise ValidationError(f"{where}: {keyword} given twice in one entry")
        field = keyword
        entry[field] = _unquote(rest, where)
    finish()
    return messages


def mo_bytes(messages: dict[str, str]) -> bytes:
    """The ``.mo`` file of ``messages`` (GNU layout, little-endian, no hash table)."""
    keys = sorted(messages, key=lambda k: k.encode("utf-8"))
    ids = [k.encode("utf-8") for k in keys]
    strs = [messages[k].encode("utf-8") for k in keys]
    count = len(keys)
    start = 7 * 4 + 16 * count  # header, then the two tables of (length, offset)
    table: list[int] = []
    blob = b""
    for data in ids + strs:
        table += [len(data), start + len(blob)]
        blob += data + b"\0"
    header = struct.pack("<7I", _MAGIC, 0, count, 7 * 4, 7 * 4 + 8 * count, 0, start)
    return header + struct.pack(f"<{len(table)}I", *table) + blob


def read_mo(data: bytes) -> dict[str, str]:
    """msgid -> msgstr of a little-endian ``.mo`` file (what :func:`mo_bytes` writes)."""
    magic, _, count, ids_at, strs_at = struct.unpack_from("<5I", data)
    if magic != _MAGIC:
        raise ValidationError("not a little-endian .mo file")

    def text(table: int, i: int) -> str:
        length, offset = struct.unpack_from("<2I", data, table + 8 * i)
        return data[offset:offset + length].decode("utf-8")
    return {text(ids_at, i): text(strs_at, i) for i in range(count)}


def compile_catalogues(locale: Path = LOCALE, *, check: bool = False) -> list[Path]:
    """Compile every ``.po`` under ``locale``; the ``.mo`` files that were (with ``check``:
    that would be) rewritten."""
    stale: list[Path] = []
    for po in sorted(locale.glob("*/LC_MESSAGES/*.po")):
        mo = po.with_suffix(".mo")
        data = mo_bytes(read_po(po))
        if not mo.is_file() or mo.read_bytes() != data:
            stale.append(mo)
            if not check:
                mo.write_bytes(data)
    return stale


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    stale = compile_catalogues(check=check)
    for mo in stale:
        print(f"{'out of date' if check else 'compiled'}: {mo}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())

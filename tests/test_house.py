"""House rules a reader of the code relies on: comments say why in plain words, and
docs/architecture.md names every method of every seam."""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memstrata"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# A requirement of the specification (R3.5, R4), a planning issue (P18, "issue 5") or a
# seed document ("seed 002 §4.1"): numbers that mean nothing outside this repository.
# R and P only as capitals: "r2" and "p95" are not citations.
NUMBERED = re.compile(r"\bR\d+(?:\.\d+)?\b|\bP\d{1,2}\b")
CITED = re.compile(r"\bissues?\s+#?P?\d+|\bseed\s+\d{3}\b", re.IGNORECASE)


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _citations(path: Path) -> list[str]:
    """``line: citations`` for each comment or string literal (docstrings, help texts)
    of ``path`` that cites a number."""
    out = []
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                found = NUMBERED.findall(tok.string) + CITED.findall(tok.string)
                if found:
                    out.append(f"{tok.start[0]}: {', '.join(found)}")
    return out


def test_comments_and_docstrings_cite_no_requirement_or_issue_numbers():
    found = [f"{path.relative_to(ROOT)}:{line}" for path in _sources() for line in _citations(path)]
    assert not found, ("say the reason in words instead of citing a requirement, issue or "
                       "seed number (../shared/SPEC.md says what each meant):\n" + "\n".join(found))


def test_the_citation_check_sees_what_it_should(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('# keeps tool calls whole (R1.2)\nx = "see issue 5"\n'
                     'def f():\n    """From seed 002 §4.1 and P18."""\n'
                     '    return "p95 of r2, Python 3.11"\n')
    assert _citations(probe) == ["1: R1.2", "2: issue 5", "4: P18, seed 002"]


def _seams() -> dict[str, list[str]]:
    """Every public protocol or abstract base class of the package (the seams a backend
    or a provider implements) -> its own public methods, in source order."""
    seams: dict[str, list[str]] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if not bases & {"Protocol", "ABC"}:
                continue
            assert node.name not in seams, f"two seams named {node.name}"
            seams[node.name] = [f.name for f in node.body
                                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                                and not f.name.startswith("_")]
    return seams


def test_the_seams_are_found():
    seams = _seams()
    for name in ("Lifecycle", "MessageLog", "SessionRows", "ItemStore", "JobQueue", "SearchIndex",
                 "VectorCache", "UsageStore", "MetaStore", "AdminStore", "KnowledgeStore", "Store",
                 "SessionStore", "Embedder", "LLM", "Reranker", "Tokenizer", "Summariser"):
        assert name in seams, name
    assert "append_messages" in seams["MessageLog"] and "embed" in seams["Embedder"]


def test_the_architecture_doc_names_every_method_of_every_seam():
    """Each seam has a row of a table in docs/architecture.md (``| `Name` …``) that names,
    in backticks, every public method the class defines itself."""
    rows = {m.group(1): m.group(0) for m in
            re.finditer(r"^\|\s*`(\w+)`.*$", ARCHITECTURE.read_text(), re.MULTILINE)}
    missing = []
    for seam, methods in _seams().items():
        row = rows.get(seam, "")
        if not row and methods:
            missing.append(f"{seam}: no table row")
            continue
        named = set(re.findall(r"\w+", " ".join(re.findall(r"`([^`]+)`", row))))
        missing += [f"{seam}.{m}" for m in methods if m not in named]
    assert not missing, "name these in docs/architecture.md's seam tables: " + ", ".join(missing)

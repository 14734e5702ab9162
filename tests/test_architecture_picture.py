"""docs/images/architecture.svg stays true: every box names a module that exists, every
top-level module of the package is in the picture, and the rows agree with the layer
ranks tests/test_architecture.py enforces (a box sits above every box it may import)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from test_architecture import RANKS

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "images" / "architecture.svg"
SVG = "{http://www.w3.org/2000/svg}"


def _boxes() -> dict[str, tuple[float, str]]:
    """module path -> (the top of its box, the path printed in it)."""
    out = {}
    for group in ET.parse(PICTURE).getroot().iter(f"{SVG}g"):
        module = group.get("data-module")
        if module is None:
            continue
        rect = group.find(f"{SVG}rect")
        printed = [t.text for t in group.findall(f"{SVG}text") if t.get("class") == "module"]
        assert rect is not None and printed, module
        out[module] = (float(rect.get("y", 0)), printed[0])
    return out


def test_every_box_is_a_module_and_says_so():
    boxes = _boxes()
    assert len(boxes) >= 25
    for module, (_, printed) in boxes.items():
        assert printed == module
        assert (ROOT / module).exists(), f"{module} is in the picture but not in the package"


def test_every_module_of_the_package_is_in_the_picture():
    package = ROOT / "memstrata"
    top = {f"memstrata/{p.name}" for p in package.iterdir()
           if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}
    top -= {"memstrata/layers"}  # drawn as its layers
    layers = {f"memstrata/layers/{p.name}" for p in (package / "layers").iterdir()
              if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    missing = (top | layers) - set(_boxes())
    assert not missing, f"add these to docs/images/architecture.svg: {sorted(missing)}"


def test_rows_follow_the_layer_ranks():
    def rank(module: str) -> float:
        name = module.removesuffix(".py").replace("/", ".")
        return RANKS[max((u for u in RANKS if name == u or name.startswith(u + ".")), key=len)]

    rows: dict[float, list[float]] = {}
    for module, (top, _) in _boxes().items():
        rows.setdefault(top, []).append(rank(module))
    ordered = [rows[y] for y in sorted(rows)]
    for upper, lower in zip(ordered, ordered[1:]):
        assert min(upper) > max(lower), (upper, lower)


def test_the_docs_show_it():
    for doc in ("README.md", "docs/architecture.md", "docs/quickstart.md"):
        assert "images/architecture.svg" in (ROOT / doc).read_text(), doc

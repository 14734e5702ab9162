"""The curated public surface and the settings table stay documented."""

from pathlib import Path

import memstrata
from memstrata.config import SETTINGS, Settings

ROOT = Path(__file__).resolve().parent.parent


def test_all_is_explicit_and_importable():
    assert memstrata.__all__ == sorted(set(memstrata.__all__), key=memstrata.__all__.index)
    for name in memstrata.__all__:
        assert hasattr(memstrata, name), name
    public = {n for n in dir(memstrata) if not n.startswith("_")}
    # sub-packages and modules are importable but not re-exported names
    modules = {"errors", "types", "memory", "config", "retrieval", "stores", "providers", "layers",
               "tokens", "prompts", "cli", "bench", "sessions", "jobs", "text", "user",
               "requests", "usage", "server", "client", "aio", "integrations",
               "knowledge", "quoting", "compat", "ids", "checks", "assembly", "parts", "by_user",
               "priority"}
    assert public - set(memstrata.__all__) - modules == set()


def test_every_public_name_has_a_docstring():
    for name in memstrata.__all__:
        obj = getattr(memstrata, name)
        if callable(obj) and not isinstance(obj, str):
            assert obj.__doc__, f"{name} has no docstring"


def test_the_settings_table_in_the_docs_is_the_generated_one():
    from memstrata.config import markdown_table

    assert markdown_table() in (ROOT / "docs" / "configuration.md").read_text(), \
        "regenerate it: python -m memstrata.config"


def test_every_setting_is_documented_and_in_settings():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    fields = set(Settings.__dataclass_fields__)
    for setting in SETTINGS:
        assert f"`{setting.name}`" in doc and setting.env in doc, setting.name
        assert setting.name in fields
        assert getattr(Settings(), setting.name) == setting.default
    assert fields == {s.name for s in SETTINGS}


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("MEMSTRATA_CANDIDATES", "77")
    assert Settings.load().candidates == 77
    assert Settings.load(candidates=5).candidates == 5

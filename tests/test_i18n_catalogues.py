"""The inspector's gettext catalogues: complete in both languages, compiled (a ``.po``
edited without recompiling its ``.mo`` fails here), and read by the pages' translators
and by jinja2's i18n extension."""

from __future__ import annotations

import gettext
import io

import pytest

from memstrata.errors import ValidationError
from memstrata.server.ui.i18n import LANGUAGES, WORDS, translator, value_translator
from memstrata.server.ui.msgfmt import LOCALE, compile_catalogues, main, mo_bytes, read_mo, read_po


def _po(lang: str) -> dict[str, str]:
    return read_po(LOCALE / lang / "LC_MESSAGES" / "memstrata.po")


def test_every_msgid_has_a_translation_in_both_catalogues():
    en, zh = _po("en"), _po("zh")
    assert set(en) == set(zh), sorted(set(en) ^ set(zh))
    assert len(en) > 200 and "" in en  # the header entry
    empty = [(lang, key) for lang, po in (("en", en), ("zh", zh)) for key, word in po.items()
             if key and not word.strip()]
    assert not empty, empty
    assert "charset=UTF-8" in en[""] and "Plural-Forms" in zh[""]
    # every key is in WORDS (read from the compiled catalogues), in the order en, zh
    assert set(WORDS) == set(en) - {""}
    assert all(WORDS[key] == (en[key], zh[key]) for key in WORDS)


def test_the_compiled_catalogues_are_up_to_date_with_the_po_files(tmp_path, capsys):
    assert compile_catalogues(check=True) == [], "run: python -m memstrata.server.ui.msgfmt"
    for lang in LANGUAGES:
        po = LOCALE / lang / "LC_MESSAGES" / "memstrata.po"
        assert po.with_suffix(".mo").read_bytes() == mo_bytes(read_po(po))
    # a .po edited and not compiled is found, and compiling fixes it
    copy = tmp_path / "zh" / "LC_MESSAGES"
    copy.mkdir(parents=True)
    po = copy / "memstrata.po"
    po.write_text((LOCALE / "zh" / "LC_MESSAGES" / "memstrata.po").read_text(encoding="utf-8")
                  + '\nmsgid "new_word"\nmsgstr "新词"\n', encoding="utf-8")
    (copy / "memstrata.mo").write_bytes((LOCALE / "zh" / "LC_MESSAGES" / "memstrata.mo").read_bytes())
    assert compile_catalogues(tmp_path, check=True) == [copy / "memstrata.mo"]
    assert compile_catalogues(tmp_path) == [copy / "memstrata.mo"]
    assert compile_catalogues(tmp_path, check=True) == []
    with (copy / "memstrata.mo").open("rb") as fp:
        assert gettext.GNUTranslations(fp).gettext("new_word") == "新词"
    assert main(["--check"]) == 0 and capsys.readouterr().out == ""


def test_the_compiler_reads_the_po_format_gettext_understands(tmp_path):
    po = tmp_path / "x.po"
    po.write_text('# a comment\nmsgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n'
                  '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'
                  'msgid "quote"\nmsgstr "say \\"hi\\"\\tthen\\\\ go\\n"\n\n'
                  'msgid "long"\nmsgstr ""\n"two "\n"lines"\n\n'
                  '#, fuzzy\nmsgid "unsure"\nmsgstr "left out"\n\n'
                  'msgid "apple"\nmsgid_plural "apples"\nmsgstr[0] "one apple"\nmsgstr[1] "{n} apples"\n',
                  encoding="utf-8")
    messages = read_po(po)
    assert messages["quote"] == 'say "hi"\tthen\\ go\n' and messages["long"] == "two lines"
    assert "unsure" not in messages
    data = mo_bytes(messages)
    assert read_mo(data) == messages and mo_bytes(read_mo(data)) == data
    t = gettext.GNUTranslations(io.BytesIO(data))
    assert t.gettext("quote") == messages["quote"] and t.gettext("nothing") == "nothing"
    assert (t.ngettext("apple", "apples", 1), t.ngettext("apple", "apples", 3)) == ("one apple", "{n} apples")


@pytest.mark.parametrize("text, message", [
    ('msgctxt "menu"\nmsgid "a"\nmsgstr "b"\n', "unsupported keyword 'msgctxt'"),
    ('msgid "a"\nmsgstr "b\\x"\n', "unsupported escape"),
    ('msgid "a"\nmsgstr b\n', "expected a quoted string"),
    ('"dangling"\n', "continues nothing"),
    ('msgid "a"\nmsgstr "b"\nmsgstr "c"\n', "given twice"),
])
def test_a_malformed_po_file_is_a_clear_error_naming_the_line(tmp_path, text, message):
    po = tmp_path / "bad.po"
    po.write_text(text, encoding="utf-8")
    with pytest.raises(ValidationError, match=message) as raised:
        read_po(po)
    assert "bad.po:" in str(raised.value)


def test_the_pages_and_the_templates_read_the_catalogues():
    from memstrata.server.ui.base import envs

    assert translator("zh")("about_title") == "我记得的关于你的事"
    assert translator("en")("about_title") == "What I remember about you"
    assert translator("zh")("no_such_word") == "no_such_word"  # shows, not an empty label
    assert value_translator("zh")("status", "done") == "已完成"
    assert value_translator("en")("kind", "<b>stored</b>") == "<b>stored</b>"
    source = "{% trans %}forget_now{% endtrans %} · {{ _('cancel') }} · {{ ngettext('x', 'xs', 2) }}"
    assert envs["zh"].from_string(source).render() == "永久忘记 · 取消 · xs"
    assert envs["en"].from_string(source).render() == "Forget for good · Cancel · xs"

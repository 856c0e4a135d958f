"""The message catalogs hold: every message marked in the source (engine/ and channels/, read by
Babel's extractor as `make catalogs` does) is translated in every language, with the same
placeholders; each shipped .mo is its .po compiled; the daemon reads them with gettext alone,
once per language; and platform language codes map to the catalogs."""

from __future__ import annotations

import string
import subprocess
import sys
import typing

import pytest
from babel.messages.catalog import Catalog

from engine import Choice, Command
from engine.i18n import LANGUAGES, language_line, supported, translator
from scripts.catalogs import ROOT, compiled, extracted, po_files, read

CATALOGS = [code for code in LANGUAGES if code != "en"]


def _fields(message: str) -> list[str]:
    return sorted(name for _, name, _, _ in string.Formatter().parse(message) if name is not None)


def _problems(template: Catalog, catalog: Catalog) -> list[str]:
    """What is wrong with `catalog` against the source's messages (empty: nothing)."""
    found = []
    for message in template:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        translated = catalog.get(message.id)
        strings = translated.string if translated is not None else None
        forms = strings if isinstance(strings, tuple | list) else (strings,)
        if translated is None or translated.fuzzy or not all(forms):
            found.append(f"missing: {ids[0]!r}")
            continue
        wanted = [_fields(i) for i in ids]
        for form in forms:
            if _fields(form) not in wanted:
                found.append(f"placeholders of {ids[0]!r} broken in {form!r}")
    return found


@pytest.fixture(scope="module")
def template() -> Catalog:
    return extracted()


def test_the_source_marks_the_messages(template: Catalog) -> None:
    ids = {m.id if isinstance(m.id, str) else m.id[0] for m in template if m.id}
    assert len(ids) > 200
    assert {"Allow once", "What I can do", "Stopped.", "This button no longer works."} <= ids
    assert "Forgot {n} item." in ids  # a plural (ngettext)
    assert set(po_files()) == set(CATALOGS)


@pytest.mark.parametrize("language", CATALOGS)
def test_each_catalog_is_complete_and_keeps_placeholders(template: Catalog, language: str) -> None:
    catalog = read(po_files()[language])
    assert _problems(template, catalog) == []


def test_a_missing_or_broken_message_is_found(template: Catalog) -> None:
    catalog = read(po_files()["de"])
    catalog.delete("Stopped.")
    catalog["Hi {name}! Your user id is {user_id}."].string = "Hallo {name}! ID: {id}."
    assert sorted(_problems(template, catalog)) == [
        "missing: 'Stopped.'",
        "placeholders of 'Hi {name}! Your user id is {user_id}.' broken in "
        "'Hallo {name}! ID: {id}.'",
    ]


@pytest.mark.parametrize("language", CATALOGS)
def test_each_mo_is_its_po_compiled(language: str) -> None:
    po = po_files()[language]
    assert po.with_suffix(".mo").read_bytes() == compiled(read(po)), "run: make catalogs"


def test_languages_from_the_platforms_and_the_cache() -> None:
    assert [supported(c) for c in ("de", "de-DE", "es-419", "fr", "pt-BR", None, "")] == [
        "de",
        "de",
        "es",
        "fr",
        None,
        None,
        None,
    ]
    assert [supported(c) for c in ("zh-CN", "zh-hans", "zh-TW", "zh-Hant", "ru", "en-GB")] == [
        "zh",
        "zh",
        None,
        None,
        "ru",
        "en",
    ]
    assert translator("de-AT") is translator("de")  # read once per language
    assert translator("pt-BR").gettext("Stopped.") == "Stopped."  # no catalog: English
    assert translator("ru").ngettext("Forgot {n} item.", "Forgot {n} items.", 22) == (
        "Забыто {n} записи."
    )
    assert Choice.ONCE.text("es") == "Permitir una vez" and Choice.ONCE.label == "Allow once"
    assert Command.HELP.describe("zh") == "我能做什么"
    assert language_line("en-US") == "" and language_line(None) == ""
    assert language_line("fr-CA") == "The user's language is French (fr)."


def test_the_config_offers_the_languages_there_are_catalogs_for() -> None:
    from bot._sections import EngineConfig

    assert typing.get_args(EngineConfig.model_fields["language"].annotation) == tuple(LANGUAGES)
    with pytest.raises(ValueError, match="'en', 'de', 'es', 'fr', 'ru' or 'zh'"):
        EngineConfig(language="pt")


def test_the_daemon_reads_the_catalogs_without_babel() -> None:
    code = (
        "import sys; import bot.app, channels.telegram, channels.discord; "
        "from engine.i18n import translator; "
        "assert translator('fr').gettext('Stopped.') == 'Arrêté.'; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'babel'], 'babel imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr

"""relaybot's own words in the user's language: a translator per language, and the markers.

Why this mechanism: the standard library's :mod:`gettext` reads compiled ``.mo`` catalogs, so the
daemon needs nothing beyond Python to speak German or Chinese. The sources are the ``.po`` files
under ``engine/i18n/locale/<lang>/LC_MESSAGES/relaybot.po``, which translators edit with any PO
tool; ``make catalogs`` extracts the messages (``relaybot.pot``) and compiles each ``.po`` to its
``.mo`` with Babel, a development tool only (the daemon never imports it). The ``.mo`` files are
committed next to their sources and shipped in the wheel as package data, so an install from a
wheel or a checkout needs no build step; tests/test_i18n_catalogs.py fails when a ``.mo`` is older
than its ``.po``, when a catalog misses a message of the source or breaks a placeholder.

Cheap at run time: a catalog is read once per language and kept (:func:`translator`); choosing one
for a message is a dictionary lookup. Messages take named ``str.format`` placeholders
(``"Hi {name}!"``), filled after translation, so a translation may move them.

Marking: ``_ = translator(language).gettext`` then ``_("Stopped.")``; ``ngettext`` where a count
decides the form; :func:`N_` marks a text kept in a constant and translated where it is shown.
Languages are short codes: ``en`` (the words in the source), ``de``, ``es``, ``fr``, ``ru`` and
``zh`` (Chinese, Simplified). :func:`supported` maps what a platform says (Telegram's
``language_code`` such as ``"de"`` or ``"pt-br"``, Discord's locale such as ``"es-ES"`` or
``"zh-CN"``) to one of them, or None.
"""

from __future__ import annotations

import functools
import gettext
from pathlib import Path

__all__ = [
    "DEFAULT",
    "LANGUAGES",
    "N_",
    "language_line",
    "supported",
    "translator",
]

DOMAIN = "relaybot"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DEFAULT = "en"

# code -> (its name in English, for the model; its own name, for /settings)
LANGUAGES: dict[str, tuple[str, str]] = {
    "en": ("English", "English"),
    "de": ("German", "Deutsch"),
    "es": ("Spanish", "Español"),
    "fr": ("French", "Français"),
    "ru": ("Russian", "Русский"),
    "zh": ("Chinese (Simplified)", "简体中文"),
}
_TRADITIONAL = ("zh-tw", "zh-hk", "zh-mo", "zh-hant")  # not the Simplified catalog


def N_(message: str) -> str:
    """Mark `message` for extraction; it is translated where it is shown."""
    return message


def supported(code: str | None) -> str | None:
    """The catalog for a platform's language code (``"de-DE"`` → ``"de"``), or None when
    relaybot has none for it (or the platform said nothing)."""
    if not code:
        return None
    code = code.strip().replace("_", "-").lower()
    if code.startswith(_TRADITIONAL):
        return None
    base = code.split("-", 1)[0]
    return base if base in LANGUAGES else None


@functools.cache
def _catalog(language: str) -> gettext.NullTranslations:
    if language == DEFAULT:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, LOCALE_DIR, languages=[language], fallback=True)


def translator(language: str | None) -> gettext.NullTranslations:
    """The translations for `language` (any code :func:`supported` reads; English when none),
    read once per language and kept."""
    return _catalog(supported(language) or DEFAULT)


def language_line(language: str | None) -> str:
    """The system prompt's line naming the user's language ("" for English, so an English
    chat's requests stay byte for byte what they were)."""
    code = supported(language) or DEFAULT
    if code == DEFAULT:
        return ""
    return f"The user's language is {LANGUAGES[code][0]} ({code})."

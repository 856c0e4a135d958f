"""relaybot's message catalogs, for maintainers (needs Babel, a development dependency; the
daemon reads the compiled catalogs with the standard library's gettext: engine/i18n).

    python scripts/catalogs.py extract   # engine/i18n/relaybot.pot from the source
    python scripts/catalogs.py update    # each language's .po gains the new messages
    python scripts/catalogs.py compile   # each .po compiled to its .mo (committed, shipped)
    python scripts/catalogs.py check     # exit 1 when a catalog misses a message or is stale

`make catalogs` runs extract, update and compile. A message is any string literal passed to
``_``, ``gettext``, ``ngettext`` or ``N_`` in engine/ or channels/ (every directory, including
the private ones Babel's directory walk skips).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("engine", "channels")
LOCALE = ROOT / "engine" / "i18n" / "locale"
TEMPLATE = ROOT / "engine" / "i18n" / "relaybot.pot"
DOMAIN = "relaybot"
KEYWORDS = {**DEFAULT_KEYWORDS, "N_": None}


def sources() -> Iterator[Path]:
    for top in SOURCES:
        yield from sorted((ROOT / top).rglob("*.py"))


def extracted() -> Catalog:
    """Every message marked in the source, with where it is."""
    catalog = Catalog(domain=DOMAIN, project="relaybot", fuzzy=False)
    for path in sources():
        for line, message, comments, context in extract_from_file(
            "python", str(path), keywords=KEYWORDS
        ):
            where = (str(path.relative_to(ROOT)), line)
            catalog.add(message, None, [where], auto_comments=comments, context=context)
    return catalog


def po_files() -> dict[str, Path]:
    return {p.parent.parent.name: p for p in sorted(LOCALE.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))}


def read(path: Path) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, domain=DOMAIN)


def write(path: Path, catalog: Catalog) -> None:
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=100, sort_output=True, include_lineno=False)
    path.write_bytes(buffer.getvalue())


def compiled(catalog: Catalog) -> bytes:
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    return buffer.getvalue()


def main(command: str) -> int:
    template = extracted()
    if command == "extract":
        write(TEMPLATE, template)
    elif command == "update":
        for path in po_files().values():
            catalog = read(path)
            catalog.update(template, no_fuzzy_matching=True)
            write(path, catalog)
    elif command == "compile":
        for path in po_files().values():
            path.with_suffix(".mo").write_bytes(compiled(read(path)))
    elif command == "check":
        bad = 0
        for language, path in po_files().items():
            catalog = read(path)
            missing = [m.id for m in template if m.id and not _translated(catalog.get(m.id))]
            for message in missing:
                print(f"{language}: not translated: {message!r}")
            if path.with_suffix(".mo").read_bytes() != compiled(catalog):
                print(f"{language}: {path.with_suffix('.mo').name} is older than its .po")
                bad += 1
            bad += len(missing)
        return 1 if bad else 0
    else:
        print(__doc__)
        return 2
    return 0


def _translated(message: object) -> bool:
    string = getattr(message, "string", None)
    if isinstance(string, tuple | list):
        return all(string)
    return bool(string) and not getattr(message, "fuzzy", False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))

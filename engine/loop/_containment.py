"""Containment: what a turn has read that nobody in the chat wrote, and which calls then need
the requester. The one place of that policy (SECURITY.md describes it for the owner).

Every message carries its provenance (engine/models/_provenance.py). A turn's :class:`Taint`
gathers the untrusted sources its context holds (its history, its summary's sources, what its
tools return as it runs). Once it holds one, every call with an effect outside the conversation
is put to the requester with the usual buttons, whatever "Always" the chat granted, and the
prompt names what came before it; a call that only reads runs on. By tool:

    tool                                     effect     what its result is
    current_time recall list_files           READS      trusted
      read_file list_schedules generate_image
    use_skill find_skill                     READS      trusted, but a skill from a folder of
                                                        [skills] dirs not trusted: "the skill X"
    web_search                               READS      untrusted: "search results for …"
    fetch_url                                FETCHES    untrusted: the page ("example.org/news")
    remember forget send_message remind_me   ACTS       trusted
      schedule_task cancel_schedule write_file
      delete_file send_file run_command
    delegate                                 ACTS       untrusted: "a delegated task"
    an MCP tool                              READS when it declares readOnlyHint and neither
                                             openWorldHint nor destructiveHint (open-world is
                                             allowed for a trusted server), else ACTS;
                                             untrusted: "MCP server NAME" (trusted server: trusted)
    any other (a plugin's)                   ACTS, or READS when its `safety` declares
                                             readOnlyHint (and neither of the others); trusted

An MCP tool's openWorldHint is true unless it says otherwise (the MCP default). Any tool may
say its result holds words nobody in the chat wrote (ToolResult.untrusted), never the opposite.

FETCHES acts (asks) when its URL carries data that did not come from the requester: a path or
query that neither appears verbatim, as a whole URL, in the requester's words or in the untrusted
content read (a link a page gives carries only what its author knew), nor, on a host trusted
text named, has each of its parts as a word of the requester's (to a host only untrusted text
named, the requester's own data is what an injection would send). `[tools] trusted_sources`
relaxes it: a domain (and its subdomains) whose pages are trusted, ``mcp:NAME`` for an MCP server
whose output is trusted (and whose open-world tools then read), a skills folder (a path:
bot/_checks.py reads those).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from engine.models import TRUSTED, Message, Provenance, Role, untrusted
from tools import Tool, ToolResult

# how chat/_quotes.py marks a reply to the bot's own message: not someone else's words
OWN_QUOTE = "[The user replies to your own earlier message"


class Effect(enum.StrEnum):
    READS = "reads"  # runs freely
    ACTS = "acts"  # an effect outside the conversation: after untrusted content, asks
    FETCHES = "fetches"  # acts when its URL carries data the requester did not give


EFFECTS: dict[str, Effect] = {
    **dict.fromkeys(
        ("current_time", "recall", "list_files", "read_file", "list_schedules"), Effect.READS
    ),
    **dict.fromkeys(("generate_image", "use_skill", "find_skill", "web_search"), Effect.READS),
    "fetch_url": Effect.FETCHES,
    **dict.fromkeys(
        ("remember", "forget", "send_message", "remind_me", "schedule_task", "cancel_schedule"),
        Effect.ACTS,
    ),
    **dict.fromkeys(
        ("write_file", "delete_file", "send_file", "run_command", "delegate"), Effect.ACTS
    ),
}


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def page_label(url: str) -> str:
    """A page as a person names it: "example.org/news" (no scheme, no query)."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").removeprefix("www.")
    except ValueError:  # not a URL the fetch will take: named as it was written
        return _clip(url, 60) or "a web page"
    return _clip(f"{host}{parts.path.rstrip('/')}" or url, 60) or "a web page"


# tools whose results hold text nobody in the chat wrote: the label of that source, from the args
UNTRUSTED_RESULTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "fetch_url": lambda a: page_label(str(a.get("url", ""))),
    "web_search": lambda a: f"search results for “{_clip(str(a.get('query', '')), 40)}”",
    "delegate": lambda a: "a delegated task",
}


def result_source(tool: str, args: dict[str, Any]) -> str | None:
    """The untrusted source a built-in's result comes from (None: trusted)."""
    label = UNTRUSTED_RESULTS.get(tool)
    return label(args) if label is not None else None


_URL = re.compile(r"https?://[^\s<>()\"'`\[\]{}|\\^]+", re.IGNORECASE)


def urls_in(text: str) -> list[str]:
    return [u.rstrip(".,;:!?*_~") for u in _URL.findall(text)]


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


@dataclass(slots=True)
class Taint:
    """What untrusted content a turn's context holds, kept up to date as the turn reads.
    Where the answer is delivered (TurnResult.taint) it says whether previews must stay off
    (`tainted`) and which hosts only untrusted content named (`hosts`)."""

    requester: str
    sources: list[str] = field(default_factory=list)  # each once, in the order read
    _trusted_hosts: set[str] = field(default_factory=set)
    _untrusted_hosts: set[str] = field(default_factory=set)
    _requester_text: list[str] = field(default_factory=list)
    _untrusted_text: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        history: Sequence[Message],
        requester: str,
        system: str = "",
        summary: tuple[str, Sequence[Provenance]] | None = None,
    ) -> Taint:
        """The taint of a turn about to run on `history` (its summary's text and sources)."""
        taint = cls(requester)
        taint._trusted_hosts.update(_host(u) for u in urls_in(system))
        if summary is not None:
            text, sources = summary
            foreign = [p.source for p in sources if not p.trusted_for(requester)]
            taint._note(foreign, text, trusted=not foreign)
        last = _last_turn(history)
        for i, msg in enumerate(history):
            taint.read(msg)
            if i >= last and msg.quote and not msg.quote.startswith(OWN_QUOTE):
                taint._note(["a quoted message"], msg.quote, trusted=False)
        return taint

    @property
    def tainted(self) -> bool:
        return bool(self.sources)

    @property
    def hosts(self) -> frozenset[str]:
        """Hosts named only in untrusted content (a link to one is not made fetchable)."""
        return frozenset(self._untrusted_hosts - self._trusted_hosts - {""})

    def read(self, msg: Message) -> None:
        """Take in a message of the context (the model's own say nothing about trust)."""
        if msg.role is Role.ASSISTANT:
            return
        text = msg.text or ""
        trusted = msg.provenance.trusted_for(self.requester)
        self._note([] if trusted else [msg.provenance.source or "an unknown source"], text, trusted)
        if trusted and msg.role is Role.USER:
            self._requester_text.append(text)

    def _note(self, sources: Iterable[str], text: str, trusted: bool) -> None:
        for s in sources:
            if s not in self.sources:
                self.sources.append(s)
        hosts = {_host(u) for u in urls_in(text)}
        (self._trusted_hosts if trusted else self._untrusted_hosts).update(hosts)
        if not trusted:
            self._untrusted_text.append(text)

    def carries_data(self, url: str) -> bool:
        """Whether `url` carries something the requester did not give (see the module doc)."""
        url = url.strip().split("#", 1)[0]
        try:
            parts = urlsplit(url)
        except ValueError:
            return True
        path = [unquote(p) for p in parts.path.split("/") if p]
        query = [x for kv in parse_qsl(parts.query, keep_blank_values=True) for x in kv if x]
        if not path and not query:
            return False
        if any(url in t for t in (*self._requester_text, *self._untrusted_text)):
            return False
        if _host(url) not in self._trusted_hosts:  # a host only untrusted text (or none) named
            return True
        said = "\n".join(self._requester_text).lower()
        return not all(_said(p.lower(), said) for p in (*path, *query))

    def after(self) -> tuple[str, ...]:
        return tuple(self.sources)


def _said(part: str, said: str) -> bool:
    """Whether `part` of a URL is a word of `said` (not a letter inside one of its words)."""
    return re.search(rf"(?<![\w-]){re.escape(part)}(?![\w-])", said) is not None


def _last_turn(history: Sequence[Message]) -> int:
    """Where the latest run of user messages starts (the messages a turn answers)."""
    i = max((n for n, m in enumerate(history) if m.role is Role.USER), default=len(history))
    while i > 0 and history[i - 1].role is Role.USER:
        i -= 1
    return i


class Containment:
    """The policy over one registry's tools, with the owner's `trusted_sources`."""

    def __init__(self, trusted_sources: Collection[str] = ()) -> None:
        named = [s for s in trusted_sources if not s.startswith("mcp:") and "/" not in s]
        self.domains = {s.lower().strip(".") for s in named}  # paths are skill folders (bot/)
        self.servers = {s.removeprefix("mcp:") for s in trusted_sources if s.startswith("mcp:")}

    def effect(self, tool: Tool) -> Effect:
        hints = tool.safety
        reads = hints.get("readOnlyHint") is True and not hints.get("destructiveHint")
        if tool.mcp_server is None:  # relaybot's own by the table; a plugin's by its hints
            known = EFFECTS.get(tool.name)
            if known is not None:
                return known
            closed = not hints.get("openWorldHint", False)
            return Effect.READS if reads and closed and not tool.destructive else Effect.ACTS
        open_world = hints.get("openWorldHint", True) and tool.mcp_server not in self.servers
        return Effect.READS if reads and not open_world else Effect.ACTS

    def asks(self, tool: Tool, args: dict[str, Any], taint: Taint) -> bool:
        """Whether this call needs its requester now, grants or not."""
        if not taint.tainted:
            return False
        effect = self.effect(tool)
        if effect is Effect.FETCHES:
            return taint.carries_data(str(args.get("url", "")))
        return effect is Effect.ACTS

    def provenance(self, tool: Tool | None, raw_args: str, result: ToolResult) -> Provenance:
        """Where a call's result comes from (a tool may say its result is untrusted)."""
        if result.untrusted:
            return untrusted(result.untrusted)
        if tool is None:
            return TRUSTED
        if tool.mcp_server is not None:
            trusted = tool.mcp_server in self.servers
            return TRUSTED if trusted else untrusted(f"MCP server {tool.mcp_server}")
        if result.is_error:  # relaybot's own words
            return TRUSTED
        args = _args(raw_args)
        if tool.name == "fetch_url" and self._trusted_domain(str(args.get("url", ""))):
            return TRUSTED
        source = result_source(tool.name, args)
        return TRUSTED if source is None else untrusted(source)

    def _trusted_domain(self, url: str) -> bool:
        host = _host(url)
        return any(host == d or host.endswith("." + d) for d in self.domains)


def _args(raw: str) -> dict[str, Any]:
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}

"""The console's conversations: the newest, or those found by chat, user and date; one
conversation with its messages, tool calls and results, confirmations and their outcome, and its
summary. Message text (and tool arguments and results, which may quote it) is shown to admins
only. A search is a POST, so the chat and user ids searched for never sit in an address; a
conversation's address carries the store's own row number, not a platform id."""

from __future__ import annotations

import datetime as dt

from aiohttp import web

from bot.web._html import Html, join, table, tag, when
from bot.web._server import Ctx, Handler
from engine.store import ConversationView, StoredMessage


def _day(value: str) -> tuple[float, float] | None:
    """A YYYY-MM-DD day as [start, end) in unix time (local time), or None."""
    try:
        day = dt.date.fromisoformat(value.strip())
    except ValueError:
        return None
    start = dt.datetime.combine(day, dt.time()).astimezone()
    return start.timestamp(), (start + dt.timedelta(days=1)).timestamp()


def _field(label: str, name: str, value: str, kind: str = "text", hint: str = "") -> Html:
    return tag(
        "div",
        tag("label", label, for_=name),
        tag("input", type=kind, id=name, name=name, value=value, placeholder=hint or None),
        class_="field",
    )


async def conversations(ctx: Ctx) -> web.Response:
    chat = user = day = ""
    note: object = ""
    since = until = None
    if ctx.request.method == "POST":
        data = await ctx.request.post()
        chat, user, day = (str(data.get(k, "")).strip() for k in ("chat", "user", "day"))
        if day:
            span = _day(day)
            if span is None:
                note = tag("p", f"{day!r} is not a day: write it as 2026-05-31.", role="alert")
            else:
                since, until = span
    found = await ctx.daemon.store.browse.conversations(
        chat_id=chat or None, user_id=user or None, since=since, until=until
    )
    search = tag(
        "form",
        tag("input", type="hidden", name="csrf", value=ctx.csrf),
        _field("Chat id", "chat", chat),
        _field("User id", "user", user),
        _field("Day", "day", day, "date"),
        tag("button", "Search", type="submit"),
        method="post",
        action="/conversations",
        class_="search",
        role="search",
    )
    rows = [
        (
            tag("a", f"{c.channel}:{c.chat_id}", href=f"/conversations/{c.id}"),
            _who(c),
            "private" if c.is_private else "group",
            "current" if c.active else "ended (/reset)",
            c.messages,
            when(c.last_at),
        )
        for c in found
    ]
    head = ["Chat", "Who", "Kind", "State", "Messages", "Last message"]
    return ctx.page("Conversations", join([search, note, table("Found", head, rows)]))


def _who(c: ConversationView) -> str:
    """A private chat's user by name; a group's last writer (its title is not stored)."""
    if not c.who:
        return "—"
    return c.who if c.is_private else f"group; last: {c.who}"


def _said(m: StoredMessage, sees_text: bool) -> Html:
    def text(value: str) -> object:
        if sees_text:
            return tag("pre", value) if value else ""
        return tag("span", f"(text hidden: {len(value)} characters)", class_="muted")

    who = {"user": m.speaker or m.user_id or "user", "assistant": "bot", "tool": "tool result"}
    parts: list[object] = [text(m.text)] if m.text or m.role != "assistant" else []
    if m.thoughts:  # what the model thought first, folded
        parts.insert(0, tag("details", tag("summary", "thinking"), text(m.thoughts)))
    for _call, name, arguments in m.tool_calls:
        parts.append(tag("div", "calls ", tag("code", name), " ", text(arguments), class_="call"))
    if m.role == "tool" and m.is_error:
        parts.insert(0, tag("strong", "failed: ", class_="bad"))
    meta: list[object] = [tag("strong", who.get(m.role, m.role)), " · ", when(m.created_at)]
    if m.stopped_at is not None:  # never sent to the model again
        meta += [" · ", tag("span", "stopped by the user", class_="muted")]
    return tag("li", tag("div", *meta, class_="meta"), *parts, class_=f"msg {m.role}")


async def conversation(ctx: Ctx) -> web.Response:
    try:
        number = int(ctx.request.match_info["n"])
    except ValueError:
        number = -1
    browse = ctx.daemon.store.browse
    found = await browse.conversation(number)
    if found is None:
        return ctx.page("Conversation", tag("p", "There is no such conversation."))
    said = await browse.messages(found.id)
    asked = await browse.confirmations(found.id)
    summary = await ctx.daemon.store.context.summary(found.id)
    kind = "private chat" if found.is_private else "group"
    parts: list[object] = [
        tag(
            "p",
            f"{found.channel}:{found.chat_id} ({_who(found)}) · {kind} · "
            f"{found.messages} messages · started {when(found.created_at)}",
        ),
    ]
    if summary is not None:
        shown = summary.text if ctx.sees_text else f"({len(summary.text)} characters)"
        parts.append(tag("section", tag("h2", "Summary of the older messages"), tag("pre", shown)))
    rows = [
        (c.tool, c.summary if ctx.sees_text else "—", c.user_name, c.state, when(c.decided_at))
        for c in asked
    ]
    parts.append(table("Confirmations", ["Tool", "Action", "Asked", "Outcome", "Decided"], rows))
    parts.append(tag("h2", "Messages"))
    parts.append(tag("ol", *(_said(m, ctx.sees_text) for m in said), class_="messages"))
    return ctx.page("Conversation", join(parts))


PAGES: dict[tuple[str, str], Handler] = {
    ("GET", "/conversations"): conversations,
    ("POST", "/conversations"): conversations,
    ("GET", "/conversations/{n}"): conversation,
}

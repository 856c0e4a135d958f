"""The console's tools (with their tiers) and the standing "always" grants (revoke), and
pairing: strangers' requests waiting (Allow, Deny) and the people let in."""

from __future__ import annotations

import time

from aiohttp import web

from bot.web import _actions as actions
from bot.web._html import join, table, tag, when
from bot.web._server import Ctx, Handler
from tools.registry import summary


async def tools(ctx: Ctx, note: str = "") -> web.Response:
    registry = ctx.daemon.registry
    specs = registry.definitions(registry.names())
    rows = [(tag("code", s.name), s.tier, summary(s.description)) for s in specs]
    grants = [
        (
            f"{g.channel}:{g.chat_id}",
            tag("code", g.tool),
            g.granted_by_name,
            when(g.granted_at),
            ctx.form(
                "/grants/revoke",
                f"Revoke {g.tool}",
                fields={"channel": g.channel, "chat": g.chat_id, "tool": g.tool},
            ),
        )
        for g in await ctx.daemon.store.browse.grants()
    ]
    body = join(
        [
            tag("p", note, role="status", class_="note") if note else "",
            table("Always allowed", ["Chat", "Tool", "Granted by", "When", ""], grants),
            table("Tools", ["Tool", "Tier", "What it does"], rows),
        ]
    )
    return ctx.page("Tools and grants", body)


async def show_tools(ctx: Ctx) -> web.Response:
    return await tools(ctx)


async def revoke(ctx: Ctx) -> web.Response:
    data = await ctx.request.post()
    channel, chat, tool = (str(data.get(k, "")) for k in ("channel", "chat", "tool"))
    if not (channel and chat and tool):
        return await tools(ctx, "Nothing to revoke.")
    return await tools(
        ctx, await actions.revoke_grant(ctx.daemon, channel, chat, tool, ctx.session.admin)
    )


def _answers(ctx: Ctx, code: str) -> object:
    """Allow and Deny for an owner's session; a `relaybot console-link` session has no owner
    to answer as (the stranger is told who let them in), so it gets no buttons."""
    if not ctx.is_owner:
        return ""
    allow = ctx.form("/pairing", "Allow", fields={"code": code, "allow": "yes"})
    deny = ctx.form("/pairing", "Deny", fields={"code": code, "allow": "no"}, danger=True)
    return join([allow, deny])


async def pairing(ctx: Ctx, note: str = "", alert: bool = False) -> web.Response:
    access = ctx.daemon.store.access
    waiting = [
        (
            r.code,
            f"{r.user_name} (@{r.username})" if r.username else r.user_name,
            f"{r.channel}:{r.user_id}",
            when(r.asked_at),
            _answers(ctx, r.code),
        )
        for r in await access.waiting(time.time())
    ]
    approved = [
        (
            f"{a.channel}:{a.user_id}",
            a.user_name,
            a.approved_by,
            when(a.approved_at),
            ctx.form(
                "/pairing/revoke",
                f"Revoke {a.user_name or a.user_id}",
                fields={"user": f"{a.channel}:{a.user_id}"},
                danger=True,
            ),
        )
        for a in await access.approved()
    ]
    how = (
        "Requests are answered by an owner: each got Allow / Deny in their chat, or signs in "
        "here with /console from that chat; `relaybot users allow CHANNEL:ID` lets someone in."
    )
    shown = tag("p", note, role="alert" if alert else "status", class_="note") if note else ""
    body = join(
        [
            shown,
            "" if ctx.is_owner or not waiting else tag("p", how),
            table("Requests waiting", ["Request", "Who", "User", "Asked", ""], waiting),
            table("Let in by an owner", ["User", "Name", "By", "When", ""], approved),
        ]
    )
    return ctx.page("Pairing", body)


async def show_pairing(ctx: Ctx) -> web.Response:
    return await pairing(ctx)


async def answer(ctx: Ctx) -> web.Response:
    data = await ctx.request.post()
    code = str(data.get("code", ""))
    if not ctx.is_owner:
        refused = "Not answered: sign in with /console from an owner's chat to answer requests."
        return await pairing(ctx, refused, alert=True)
    by = ctx.session.admin
    note = await actions.answer_request(ctx.daemon, code, data.get("allow") == "yes", by)
    return await pairing(ctx, note)


async def revoke_user(ctx: Ctx) -> web.Response:
    channel, _, user_id = str((await ctx.request.post()).get("user", "")).partition(":")
    if not (channel and user_id):
        return await pairing(ctx, "Nothing to revoke.")
    note = await actions.revoke_user(ctx.daemon, channel, user_id, ctx.session.admin)
    return await pairing(ctx, note)


PAGES: dict[tuple[str, str], Handler] = {
    ("GET", "/tools"): show_tools,
    ("POST", "/grants/revoke"): revoke,
    ("GET", "/pairing"): show_pairing,
    ("POST", "/pairing"): answer,
    ("POST", "/pairing/revoke"): revoke_user,
}

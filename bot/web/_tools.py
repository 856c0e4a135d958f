"""The console's tools (with their tiers) and the standing "always" grants (revoke), and
pairing: strangers' requests waiting (Allow, Deny) and the people let in."""

from __future__ import annotations

import time

from aiohttp import web

from bot.web import _actions as actions
from bot.web._html import join, table, tag, when
from bot.web._server import Ctx, Handler


async def tools(ctx: Ctx, note: str = "") -> web.Response:
    registry = ctx.daemon.registry
    specs = registry.definitions(registry.names())
    rows = [(tag("code", s.name), s.tier, (s.description or "").strip().split("\n")[0])
            for s in specs]  # fmt: skip
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


async def pairing(ctx: Ctx, note: str = "") -> web.Response:
    access = ctx.daemon.store.access
    waiting = [
        (
            r.code,
            f"{r.user_name} (@{r.username})" if r.username else r.user_name,
            f"{r.channel}:{r.user_id}",
            when(r.asked_at),
            join(
                [
                    ctx.form("/pairing", "Allow", fields={"code": r.code, "allow": "yes"}),
                    ctx.form(
                        "/pairing", "Deny", fields={"code": r.code, "allow": "no"}, danger=True
                    ),
                ]
            ),
        )
        for r in await access.waiting(time.time())
    ]
    approved = [(f"{a.channel}:{a.user_id}", a.user_name, a.approved_by, when(a.approved_at))
                for a in await access.approved()]  # fmt: skip
    body = join(
        [
            tag("p", note, role="status", class_="note") if note else "",
            table("Requests waiting", ["Request", "Who", "User", "Asked", ""], waiting),
            table("Let in by an owner", ["User", "Name", "By", "When"], approved),
        ]
    )
    return ctx.page("Pairing", body)


async def show_pairing(ctx: Ctx) -> web.Response:
    return await pairing(ctx)


async def answer(ctx: Ctx) -> web.Response:
    data = await ctx.request.post()
    code = str(data.get("code", ""))
    by = ctx.session.admin
    if ":" not in by:
        return await pairing(ctx, "Requests are answered by an owner: sign in with /console.")
    note = await actions.answer_request(ctx.daemon, code, data.get("allow") == "yes", by)
    return await pairing(ctx, note)


PAGES: dict[tuple[str, str], Handler] = {
    ("GET", "/tools"): show_tools,
    ("POST", "/grants/revoke"): revoke,
    ("GET", "/pairing"): show_pairing,
    ("POST", "/pairing"): answer,
}

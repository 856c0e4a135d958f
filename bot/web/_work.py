"""The console's work in progress: confirmations waiting, background jobs, schedules; each can
be cancelled, after a confirmation step (the first POST only asks; the second, with
`confirmed`, does it: bot/web/_actions.py)."""

from __future__ import annotations

from aiohttp import web

from bot.web import _actions as actions
from bot.web._html import join, table, tag, when
from bot.web._server import Ctx, Handler
from engine.store import JobState

_KINDS = {"confirmation": "the confirmation", "job": "the background job", "schedule": "schedule"}


async def work(ctx: Ctx, note: str = "") -> web.Response:
    store = ctx.daemon.store
    status = await store.ops.status()

    def cancel(kind: str, ident: object) -> object:
        return ctx.form("/cancel", "Cancel…", fields={"kind": kind, "id": str(ident)})

    prompts = [
        (
            f"{p.channel}:{p.chat_id}",
            p.tool,
            p.summary if ctx.sees_text else "—",
            when(p.expires_at),
            cancel("confirmation", p.id),
        )
        for p in status.confirmations
    ]
    running = (JobState.RUNNING, JobState.RESUMED)
    jobs = [
        (
            f"{j.channel}:{j.chat_id}",
            j.tool,
            j.state.value,
            when(j.since),
            when(j.due),
            cancel("job", j.id) if j.state in running else "",
        )
        for j in status.jobs
    ]
    schedules = [
        (
            f"#{s.id}",
            f"{s.channel}:{s.chat_id}",
            s.task if ctx.sees_text else "—",
            f"{s.kind} {s.spec}",
            when(s.next_due),
            cancel("schedule", s.id),
        )
        for s in await store.browse.schedules()
    ]
    body = join(
        [
            tag("p", note, role="status", class_="note") if note else "",
            table("Confirmations waiting", ["Chat", "Tool", "Action", "Expires", ""], prompts),
            table("Background jobs", ["Chat", "Tool", "State", "Since", "Due", ""], jobs),
            table("Schedules", ["#", "Chat", "Task", "When", "Next run", ""], schedules),
        ]
    )
    return ctx.page("Jobs and confirmations", body)


async def show(ctx: Ctx) -> web.Response:
    return await work(ctx)


async def cancel(ctx: Ctx) -> web.Response:
    data = await ctx.request.post()
    kind, ident = str(data.get("kind", "")), str(data.get("id", ""))
    if kind not in _KINDS or not ident:
        return await work(ctx, "Nothing to cancel.")
    if data.get("confirmed") != "yes":
        what = await _what(ctx, kind, ident)
        question = tag("p", f"Cancel {what}? This cannot be undone.")
        yes = ctx.form(
            "/cancel",
            "Yes, cancel it",
            fields={"kind": kind, "id": ident, "confirmed": "yes"},
            danger=True,
        )
        no = tag("a", "No, keep it", href="/work", class_="button")
        return ctx.page("Cancel?", join([question, tag("div", yes, no, class_="confirm")]))
    who = ctx.session.admin
    if kind == "confirmation":
        note = await actions.cancel_confirmation(ctx.daemon, ident, who)
    elif kind == "job":
        note = await actions.cancel_job(ctx.daemon, ident, who)
    elif ident.isdigit():
        note = await actions.cancel_schedule(ctx.daemon, int(ident), who)
    else:
        note = "There is no such schedule."
    return await work(ctx, note)


async def _what(ctx: Ctx, kind: str, ident: str) -> str:
    """What a cancel step names: the tool and what it does, in which chat (the arguments only
    for a session that may see message text)."""
    store = ctx.daemon.store
    if kind == "confirmation" and (c := await store.confirmations.get(ident)) is not None:
        doing = f": {c.summary}" if ctx.sees_text else ""
        return f"the confirmation of {c.tool} in {c.channel}:{c.chat_id}{doing}"
    if kind == "job" and (j := await store.jobs.get(ident)) is not None:
        tool = ctx.daemon.registry.get(j.tool)
        doing = "" if tool is None else f" ({tool.describe_call(j.args if ctx.sees_text else {})})"
        return f"the background task {j.tool} in {j.channel}:{j.chat_id}{doing}"
    if kind == "schedule" and ident.isdigit() and (s := await store.schedules.get(int(ident))):
        task = f": {s.task}" if ctx.sees_text else ""
        return f"schedule #{s.id} in {s.channel}:{s.chat_id} ({s.kind} {s.spec}){task}"
    return f"{_KINDS[kind]} {ident}"


PAGES: dict[tuple[str, str], Handler] = {
    ("GET", "/work"): show,
    ("POST", "/cancel"): cancel,
}

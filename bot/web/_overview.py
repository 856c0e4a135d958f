"""The console's overview (instances and who receives what, channels, queues, the last hour,
the store, the version, when the config was loaded), the last errors, and doctor's checks run
on demand."""

from __future__ import annotations

import os
import time
from importlib.metadata import PackageNotFoundError, version

from aiohttp import web

from bot.web._html import Html, join, table, tag, when
from bot.web._server import Ctx, Handler


def _version() -> str:
    try:
        return version("relaybot")
    except PackageNotFoundError:
        return "0+unknown"


def _size(n: int | None) -> str:
    if n is None:
        return "—"
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


async def overview(ctx: Ctx) -> web.Response:
    daemon = ctx.daemon
    store = daemon.store
    status = await store.ops.status()
    counts = await store.ops.counts()
    hour = await store.browse.activity(time.time() - 3600)
    name = daemon.config.instance.name()
    if store.cluster is not None:
        server = await store.cluster.server()
        instances = [(n, "this one" if n == name else "") for n in server.instances]
        receiving = list(server.receiving)
    else:
        instances = [(f"pid {os.getpid()}", "this one (one process: SQLite)")]
        receiving = [(c.name, "this one") for c in daemon.channels]
    waiting = sum(q.messages for q in status.queued)
    figures = [
        ("Version", _version()),
        ("Config loaded", when(daemon.dispatcher.live.loaded_at)),
        ("Channels", ", ".join(c.name for c in daemon.channels) or "none"),
        ("Messages waiting (every instance)", f"{waiting} in {len(status.queued)} chats"),
        ("Work queued here", sum(daemon.dispatcher.queues.depths())),
        ("Running now", len(status.running)),
        ("Answers in the last hour", hour.answers),
        ("Tool calls in the last hour", f"{hour.tool_calls} ({hour.tool_errors} failed)"),
        ("Channel errors in the last hour", hour.channel_errors),
        ("Confirmations waiting", counts.confirmations_pending),
        ("Background jobs running", counts.jobs_running),
        ("Store", daemon.config.storage.describe()),
        ("Store size", f"{_size(counts.db_bytes)} (log {_size(counts.wal_bytes)})"),
        ("Schema version", status.schema_version),
        ("Conversations / messages", f"{status.conversations} / {status.messages}"),
    ]
    body = join(
        [
            tag("dl", *(join([tag("dt", k), tag("dd", v)]) for k, v in figures), class_="facts"),
            table("Instances", ["Instance", "Note"], instances),
            table("Who receives what", ["Receiving", "Instance"], receiving),
            table(
                "Running",
                ["Chat", "What", "Since"],
                [(f"{r.channel}:{r.chat_id}", r.what, when(r.since)) for r in status.running],
            ),
        ]
    )
    return ctx.page("Overview", body)


async def errors(ctx: Ctx) -> web.Response:
    status = await ctx.daemon.store.ops.status()
    rows = [(e.channel, when(e.at), e.text) for e in sorted(status.errors, key=lambda x: -x.at)]
    note = tag("p", "The newest error of each channel and of the model, as the log has it.")
    return ctx.page("Errors", join([note, table("Last errors", ["Where", "When", "Error"], rows)]))


async def doctor_page(ctx: Ctx) -> web.Response:
    body: Html = join(
        [
            tag(
                "p",
                "Doctor checks the config, the store, each model (one small real request), the "
                "channels' tokens and the plugins. It takes a few seconds.",
            ),
            ctx.form("/doctor", "Run the checks"),
        ]
    )
    if ctx.request.method == "POST":
        from bot.doctor import doctor_checks  # only when asked for

        found = await doctor_checks(ctx.daemon.config)
        rows = [(c.name, c.status.value, c.detail, c.fix) for c in found]
        body = join([body, table("Checks", ["Check", "Result", "Detail", "Fix"], rows)])
    return ctx.page("Doctor", body)


PAGES: dict[tuple[str, str], Handler] = {
    ("GET", "/"): overview,
    ("GET", "/errors"): errors,
    ("GET", "/doctor"): doctor_page,
    ("POST", "/doctor"): doctor_page,
}

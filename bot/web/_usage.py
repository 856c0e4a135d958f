"""The console's usage page: tokens per user per day over the last two weeks, as a stacked bar
chart drawn server-side (inline SVG: no script, no library), with the same figures in a table
(what a screen reader reads). Read through the store's usage protocol (per channel and day),
so it follows whatever keeps those figures."""

from __future__ import annotations

import datetime as dt

from aiohttp import web

from bot.web._html import Html, join, table, tag
from bot.web._server import Ctx, Handler

DAYS = 14
_COLOURS = ("#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0f766e", "#a16207", "#4b5563")
_W, _H, _LEFT, _BOTTOM = 720, 260, 56, 40


def _days(today: dt.date) -> list[str]:
    return [(today - dt.timedelta(days=n)).isoformat() for n in range(DAYS - 1, -1, -1)]


def chart(days: list[str], series: dict[str, list[int]]) -> Html:
    """A stacked bar per day, one colour per user; `series` maps a user to tokens per day."""
    top = max([sum(v[i] for v in series.values()) for i in range(len(days))] + [1])
    step = (_W - _LEFT - 10) / len(days)
    scale = (_H - _BOTTOM - 10) / top
    shapes: list[str] = []
    for tick in (0, top // 2, top):
        y = _H - _BOTTOM - tick * scale
        shapes.append(f'<line x1="{_LEFT}" x2="{_W - 10}" y1="{y:.1f}" y2="{y:.1f}" '
                      'stroke="#d1d5db"/>')  # fmt: skip
        shapes.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:,}</text>')
    for i, day in enumerate(days):
        x = _LEFT + i * step + step * 0.15
        base = float(_H - _BOTTOM)
        for n, (user, values) in enumerate(series.items()):
            h = values[i] * scale
            if h > 0:
                base -= h
                colour = _COLOURS[n % len(_COLOURS)]
                title = tag("title", f"{user}, {day}: {values[i]:,} tokens")
                shapes.append(f'<rect x="{x:.1f}" y="{base:.1f}" width="{step * 0.7:.1f}" '
                              f'height="{h:.1f}" fill="{colour}">{title}</rect>')  # fmt: skip
        shapes.append(f'<text x="{x + step * 0.35:.1f}" y="{_H - _BOTTOM + 16}" '
                      f'text-anchor="middle">{day[8:]}</text>')  # fmt: skip
    legend = [
        tag("li", tag("span", "", class_=f"swatch c{n % len(_COLOURS)}"), user)
        for n, user in enumerate(series)
    ]
    svg = Html(
        f'<svg viewBox="0 0 {_W} {_H}" role="img" aria-labelledby="chart-title" class="chart">'
        f'<title id="chart-title">Tokens per user per day, {days[0]} to {days[-1]}</title>'
        + "".join(shapes)
        + "</svg>"
    )
    return join([svg, tag("ul", *legend, class_="legend")])


async def usage(ctx: Ctx) -> web.Response:
    daemon = ctx.daemon
    days = _days(dt.datetime.now(dt.UTC).date())
    channels = sorted({c.name for c in daemon.channels} | {"console"})
    series: dict[str, list[int]] = {}
    turns: dict[str, int] = {}
    for i, day in enumerate(days):
        for channel in channels:
            for t in await daemon.store.usage.top(channel, day, limit=50):
                who = f"{channel}:{t.user_id}"
                series.setdefault(who, [0] * len(days))[i] += t.tokens
                turns[who] = turns.get(who, 0) + t.turns
    ranked = dict(sorted(series.items(), key=lambda kv: -sum(kv[1])))
    week = [(who, f"{sum(v[-7:]):,}", f"{sum(v):,}", turns[who]) for who, v in ranked.items()]
    body = join(
        [
            tag("p", f"Tokens (prompt and answer) per user and day (UTC), the last {DAYS} days."),
            chart(days, ranked) if ranked else tag("p", "No usage recorded yet.", class_="empty"),
            table(
                "Per user",
                ["User", "Last 7 days (tokens)", f"Last {DAYS} days (tokens)", "Turns"],
                week,
            ),
        ]
    )
    return ctx.page("Usage", body)


PAGES: dict[tuple[str, str], Handler] = {("GET", "/usage"): usage}

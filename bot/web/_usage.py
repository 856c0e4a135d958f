"""The console's usage page: what each user spent per day over the last two weeks (every request
charged to them: turns, summaries, speech, pictures), as a stacked bar chart drawn server-side
(inline SVG: no script, no library), with the same figures in tables (what a screen reader reads):
per user, and per model this month. Read through the store's spend protocol. With no price at all
(a local or unpriced model: every cost is 0), the chart shows tokens instead of an empty box."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from aiohttp import web

from bot.web._html import Html, join, table, tag
from bot.web._server import Ctx, Handler

DAYS = 14
_COLOURS = ("#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0f766e", "#a16207", "#4b5563")
_W, _H, _LEFT, _BOTTOM = 720, 260, 56, 40


def _days(today: dt.date) -> list[str]:
    return [(today - dt.timedelta(days=n)).isoformat() for n in range(DAYS - 1, -1, -1)]


def usd(nano: float) -> str:
    return f"${nano / 1e9:,.2f}" if nano >= 1e7 or nano == 0 else f"${nano / 1e9:,.4f}"


def tokens_text(n: float) -> str:
    return f"{n:,.0f} tokens"


def chart(
    days: list[str], series: dict[str, list[int]], unit: Callable[[float], str] = usd
) -> Html:
    """A stacked bar per day, one colour per user; `series` maps a user to an amount per day
    (nano-dollars, or tokens), `unit` writes one."""
    top = max([sum(v[i] for v in series.values()) for i in range(len(days))] + [1])
    step = (_W - _LEFT - 10) / len(days)
    scale = (_H - _BOTTOM - 10) / top
    shapes: list[str] = []
    for tick in (0, top // 2, top):
        y = _H - _BOTTOM - tick * scale
        shapes.append(
            f'<line x1="{_LEFT}" x2="{_W - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d1d5db"/>'
        )
        label = unit(tick).removesuffix(" tokens")
        shapes.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for i, day in enumerate(days):
        x = _LEFT + i * step + step * 0.15
        base = float(_H - _BOTTOM)
        for n, (user, values) in enumerate(series.items()):
            h = values[i] * scale
            if h > 0:
                base -= h
                colour = _COLOURS[n % len(_COLOURS)]
                title = tag("title", f"{user}, {day}: {unit(values[i])}")
                shapes.append(
                    f'<rect x="{x:.1f}" y="{base:.1f}" width="{step * 0.7:.1f}" '
                    f'height="{h:.1f}" fill="{colour}">{title}</rect>'
                )
        shapes.append(
            f'<text x="{x + step * 0.35:.1f}" y="{_H - _BOTTOM + 16}" '
            f'text-anchor="middle">{day[8:]}</text>'
        )
    legend = [
        tag("li", tag("span", "", class_=f"swatch c{n % len(_COLOURS)}"), user)
        for n, user in enumerate(series)
    ]
    svg = Html(
        f'<svg viewBox="0 0 {_W} {_H}" role="img" aria-labelledby="chart-title" class="chart">'
        f'<title id="chart-title">{"Spent" if unit is usd else "Tokens"} per user per day, '
        f"{days[0]} to {days[-1]}</title>" + "".join(shapes) + "</svg>"
    )
    return join([svg, tag("ul", *legend, class_="legend")])


async def usage(ctx: Ctx) -> web.Response:
    store = ctx.daemon.store
    days = _days(dt.datetime.now(dt.UTC).date())
    series: dict[str, list[int]] = {}
    tokens: dict[str, list[int]] = {}
    for d in await store.spend.by_user_day(days[0]):
        who = f"{d.channel}:{d.user_id}"
        i = days.index(d.day) if d.day in days else None
        if i is None:
            continue
        series.setdefault(who, [0] * len(days))[i] += d.nano_usd
        tokens.setdefault(who, [0] * len(days))[i] += d.tokens
    priced = any(sum(v) for v in series.values())
    shown = series if priced else tokens
    ranked = dict(sorted(shown.items(), key=lambda kv: (-sum(kv[1]), kv[0])))
    per_user = [
        (
            who,
            _cost(sum(v[-7:]), sum(tokens[who][-7:])),
            f"{sum(tokens[who][-7:]):,}",
            _cost(sum(v), sum(tokens[who])),
            f"{sum(tokens[who]):,}",
        )
        for who, v in ((who, series[who]) for who in ranked)
    ]
    month = days[-1][:7]
    models = [
        (m.of, m.requests, f"{m.tokens:,}", _cost(m.nano_usd, m.tokens))
        for m in await store.spend.by_model(month)
    ]
    body = join(
        [
            tag("p", f"What each user spent per day (UTC), the last {DAYS} days."),
            "" if priced or not ranked else tag("p", _UNPRICED, class_="note"),
            chart(days, ranked, usd if priced else tokens_text)
            if ranked
            else tag("p", "No usage recorded yet.", class_="empty"),
            table(
                "Per user",
                ["User", "Last 7 days", "Tokens (7 days)", f"Last {DAYS} days", f"Tokens ({DAYS})"],
                per_user,
            ),
            table(f"Per model, {month}", ["Model", "Requests", "Tokens", "Cost"], models),
        ]
    )
    return ctx.page("Usage", body)


_UNPRICED = (
    "No model here has a price (a local model, or one [pricing] does not list), so the chart "
    "shows tokens."
)


def _cost(nano: float, tokens: int) -> str:
    """A cost, or "not priced" when tokens were used at no known price."""
    return "not priced" if nano == 0 and tokens else usd(nano)


PAGES: dict[tuple[str, str], Handler] = {("GET", "/usage"): usage}

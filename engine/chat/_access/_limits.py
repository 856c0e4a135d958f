"""Limits that protect the owner's bill: messages per minute, tokens and dollars per day, per user.

Past `messages_per_minute` a user's messages are still stored (nothing is lost) but held back
until the minute has passed, then folded into one turn; the user is told once. Past
`tokens_per_day` (prompt + completion, counted from the provider's usage after each turn) a
message is refused with the time the budget resets. Counters live in the store, so they survive
restarts. Past `usd_per_day` (what the user's requests cost today, engine/chat/_access/_spend.py) a
message is still stored, held until the budget resets at 00:00 UTC and answered then; the user is
told so once. Owners (`[access] admins`) are exempt. /usage shows a user's own figures and cost;
admins also see the chat's and the top users of the month.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine._channel import InboundMessage, Reply
from engine._clock import wall
from engine.chat._settings._live import Policy
from engine.chat._settings._sections import LimitSettings
from engine.i18n import translator
from engine.models import NANO, dollars
from engine.store import Spent, Store, UsageTotals

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Admission:
    """What to do with a message: refuse it (with `reply`), or hold it until `hold_until`
    (telling the user `reply` once), or take it at once (both None)."""

    refuse: bool = False
    hold_until: float | None = None
    reply: str | None = None


def today(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now))


class Limits:
    def __init__(self, store: Store, settings: Callable[[], LimitSettings], policy: Policy) -> None:
        self.store = store
        self._settings = settings  # those in force (a reload changes them)
        self.policy = policy
        self._told: dict[tuple[str, str], str] = {}  # user -> the day they were told they are over

    @property
    def settings(self) -> LimitSettings:
        return self._settings()

    async def admit(self, msg: InboundMessage) -> Admission:
        if self.policy.is_admin(msg.channel, msg.user_id):
            return Admission()
        now = wall()
        budget = self.settings.tokens_per_day
        if budget:
            spent = await self.store.usage.totals(msg.channel, msg.user_id, today(now))
            if spent.tokens >= budget:
                log.info(
                    "limit: user %s in %s:%s is past tokens_per_day (%d)",
                    msg.user_id,
                    msg.channel,
                    msg.chat_id,
                    spent.tokens,
                )
                return Admission(refuse=True, reply=_budget_spent(budget, now, msg.language))
        if self.settings.usd_per_day:
            held = await self._over_usd(msg, now)
            if held is not None:
                return held
        window = self.settings.window_s
        sent = await self.store.inbox.sent_since(msg.channel, msg.user_id, now - window)
        per_window = self.settings.messages_per_minute
        if len(sent) < per_window:
            return Admission()
        release = sent[0] + window  # every message past the limit in this window waits for it
        first = len(sent) == per_window
        if first:
            log.info(
                "limit: user %s in %s:%s is past messages_per_minute (%d)",
                msg.user_id,
                msg.channel,
                msg.chat_id,
                per_window,
            )
        reply = (
            translator(msg.language)
            .gettext(
                "You are sending messages faster than I may answer ({limit} a minute). I have "
                "saved them and will answer them together in a moment."
            )
            .format(limit=per_window)
        )
        return Admission(hold_until=release, reply=reply if first else None)

    async def _over_usd(self, msg: InboundMessage, now: float) -> Admission | None:
        """Past `usd_per_day`: held until midnight (UTC), told once that day; else None."""
        assert self.settings.usd_per_day is not None
        day = today(now)
        spent = await self.store.spend.of_user(msg.channel, msg.user_id, day)
        if spent.nano_usd < self.settings.usd_per_day * NANO:
            return None
        who = (msg.channel, msg.user_id)
        first = self._told.get(who) != day
        if first:
            self._told[who] = day
            log.info(
                "limit: user %s in %s:%s is past usd_per_day (%s spent)",
                msg.user_id,
                msg.channel,
                msg.chat_id,
                dollars(spent.nano_usd),
            )
        midnight = float((int(now) // 86_400 + 1) * 86_400)
        reply = _usd_spent(self.settings.usd_per_day, now, msg.language) if first else None
        return Admission(hold_until=midnight, reply=reply)

    async def usage(self, msg: InboundMessage) -> Reply:
        _ = translator(msg.language).gettext
        now = wall()
        day, month = today(now), today(now)[:7]
        spend = self.store.spend
        mine = [
            (
                _("Today"),
                await self.store.usage.totals(msg.channel, msg.user_id, day),
                await spend.of_user(msg.channel, msg.user_id, day),
            ),
            (
                _("This month"),
                await self.store.usage.totals(msg.channel, msg.user_id, month),
                await spend.of_user(msg.channel, msg.user_id, month),
            ),
        ]
        lines = [f"{label}: {_figures(t, _)}{_cost(s, _)}" for label, t, s in mine]
        exempt = self.policy.is_admin(msg.channel, msg.user_id)
        if self.settings.tokens_per_day and not exempt:
            budget = f"{self.settings.tokens_per_day:,}"
            lines.append(_("Your daily budget: {tokens} tokens.").format(tokens=budget))
        if self.settings.usd_per_day and not exempt:
            usd = _usd(self.settings.usd_per_day)
            lines.append(_("Your daily spending limit: {usd}.").format(usd=usd))
        if exempt and not msg.is_private:
            chat = [
                (label, await spend.of_chat(msg.channel, msg.chat_id, prefix))
                for label, prefix in ((_("today"), day), (_("this month"), month))
            ]
            each = [
                _("{when} {tokens} tokens").format(when=label, tokens=f"{s.tokens:,}") + _cost(s, _)
                for label, s in chat
            ]
            lines.append(_("This chat, everyone: ") + "; ".join(each))
        if self.policy.is_admin(msg.channel, msg.user_id):
            top = await self.store.usage.top(msg.channel, month)
            if top:
                lines.append(_("Top users this month:"))
                lines += [f"• {t.user_id}: {_figures(t, _)}" for t in top]
        return Reply("\n".join(lines))


def _figures(t: UsageTotals, _: Callable[[str], str]) -> str:
    return _("{tokens} tokens, {turns} turns, {calls} tool calls").format(
        tokens=f"{t.tokens:,}", turns=t.turns, calls=t.tool_calls
    )


def _cost(s: Spent, _: Callable[[str], str]) -> str:
    """ ", $0.0042" (and the tokens spent reasoning, the pictures and speech paid for), ", not
    priced" when the requests cost nothing known, or "" when there were none."""
    if not s.requests:
        return ""
    pictures = _("{n} pictures").format(n=s.images)
    spoken = _("{n} characters spoken").format(n=f"{s.chars:,}")
    thought = _("{n} tokens spent reasoning").format(n=f"{s.reasoning_tokens:,}")
    extra = [thought] * bool(s.reasoning_tokens) + [pictures] * bool(s.images)
    extra += [spoken] * bool(s.chars)
    # nothing charged: a model without a price ([pricing]), e.g. a local one; never "$0.00"
    cost = dollars(s.nano_usd) if s.nano_usd else _("not priced")
    return f", {cost}" + "".join(f", {e}" for e in extra)


def _usd(amount: float) -> str:
    return f"${amount:,.2f}"


def _until_midnight(now: float) -> dict[str, object]:
    """How long until 00:00 UTC, as the {hours} and {minutes} of a message."""
    left = (int(now) // 86_400 + 1) * 86_400 - now
    return {"hours": int(left // 3600), "minutes": f"{int(left % 3600 // 60):02d}"}


def _usd_spent(limit: float, now: float, language: str | None) -> str:
    return (
        translator(language)
        .gettext(
            "You have reached today's spending limit of {usd}. I have kept your message and will "
            "answer it when the limit resets at 00:00 UTC (in {hours} h {minutes} min)."
        )
        .format(usd=_usd(limit), **_until_midnight(now))
    )


def _budget_spent(budget: int, now: float, language: str | None) -> str:
    return (
        translator(language)
        .gettext(
            "You have used today's budget of {tokens} tokens. It resets at 00:00 UTC "
            "(in {hours} h {minutes} min)."
        )
        .format(tokens=f"{budget:,}", **_until_midnight(now))
    )

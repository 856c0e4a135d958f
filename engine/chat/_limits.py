"""Limits that protect the owner's bill: messages per minute and tokens per day, per user.

Past `messages_per_minute` a user's messages are still stored (nothing is lost) but held back
until the minute has passed, then folded into one turn; the user is told once. Past
`tokens_per_day` (prompt + completion, counted from the provider's usage after each turn) a
message is refused with the time the budget resets. Counters live in the store, so they survive
restarts. Owners (`[access] admins`) are exempt. /usage shows a user's own figures; admins also
see the top users of the month.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine._channel import InboundMessage, Reply
from engine.chat._permissions import Policy
from engine.store import Store, UsageTotals

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LimitSettings:
    messages_per_minute: int = 20
    tokens_per_day: int | None = None
    window_s: float = 60.0  # the rate window (tests shorten it)


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

    @property
    def settings(self) -> LimitSettings:
        return self._settings()

    async def admit(self, msg: InboundMessage) -> Admission:
        if self.policy.is_admin(msg.channel, msg.user_id):
            return Admission()
        now = time.time()
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
                return Admission(refuse=True, reply=_budget_spent(budget, now))
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
            f"You are sending messages faster than I may answer ({per_window} a minute). I have "
            "saved them and will answer them together in a moment."
        )
        return Admission(hold_until=release, reply=reply if first else None)

    async def usage(self, msg: InboundMessage) -> Reply:
        now = time.time()
        day, month = today(now), today(now)[:7]
        mine = [
            ("Today", await self.store.usage.totals(msg.channel, msg.user_id, day)),
            ("This month", await self.store.usage.totals(msg.channel, msg.user_id, month)),
        ]
        lines = [f"{label}: {_figures(t)}" for label, t in mine]
        if self.settings.tokens_per_day and not self.policy.is_admin(msg.channel, msg.user_id):
            lines.append(f"Your daily budget: {self.settings.tokens_per_day:,} tokens.")
        if self.policy.is_admin(msg.channel, msg.user_id):
            top = await self.store.usage.top(msg.channel, month)
            if top:
                lines.append("Top users this month:")
                lines += [f"• {t.user_id}: {_figures(t)}" for t in top]
        return Reply("\n".join(lines))


def _figures(t: UsageTotals) -> str:
    return f"{t.tokens:,} tokens, {t.turns} turns, {t.tool_calls} tool calls"


def _budget_spent(budget: int, now: float) -> str:
    midnight = (int(now) // 86_400 + 1) * 86_400
    left = midnight - now
    hours, minutes = int(left // 3600), int(left % 3600 // 60)
    return (
        f"You have used today's budget of {budget:,} tokens. It resets at 00:00 UTC "
        f"(in {hours} h {minutes:02d} min)."
    )

"""`relaybot users`: who may use the bot and from where, and letting people in or out by id.

    relaybot users                      the config's allowed_users, the owners, those an owner
                                        let in (pairing), and requests waiting for an answer
    relaybot users allow telegram:123   let a person in on that platform (stored)
    relaybot users revoke telegram:123  take an approval back

It writes the store while the daemon runs (a SQLite file in WAL mode takes a second writer for
a moment; a PostgreSQL store is shared anyway): the daemon asks the store about a person it does
not know at their next message, so an approval counts at once; a revocation is heard of through
the store (SQLite: the file's data version, read once a second; PostgreSQL: a notification) and
is in force within about a second (engine/chat/_access/_pairing.py). The config's `allowed_users`
is the config's: it is shown, not changed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

from bot.config import Config
from engine.store import ApprovedUser, Store, open_store
from tools.errors import StoreError

_PLATFORMS = ("telegram", "discord")


def _who(config: Config, who: str) -> tuple[str, str]:
    channel, _, user_id = who.rpartition(":")
    if not channel:
        enabled = [n for n in _PLATFORMS if getattr(config, n).enabled]
        if len(enabled) != 1:
            raise StoreError(f"{who!r}: name the platform too, e.g. telegram:{who}")
        channel = enabled[0]
    if channel not in (*_PLATFORMS, "console") or not user_id.strip():
        raise StoreError(f"{who!r}: give a platform and a user id, e.g. telegram:123456789")
    return channel, user_id.strip()


def _store(config: Config) -> Store:
    return open_store(config.storage.resolved_url(), config.storage.resolved_path())


async def users(
    config: Config, action: str | None, who: str | None, out: TextIO = sys.stdout
) -> int:
    if action is None:
        async with _store(config) as store:
            approved = await store.access.approved()
            waiting = await _waiting(store)
        out.write(render(config, approved, waiting))
        return 0
    if who is None:
        raise StoreError(f"relaybot users {action}: give the user, e.g. telegram:123456789")
    channel, user_id = _who(config, who)
    async with _store(config) as store:
        if action == "allow":
            done = await store.access.approve(channel, user_id, "", "cli")
            out.write(
                f"{channel} user {user_id} may use the bot now.\n"
                if done
                else f"{channel} user {user_id} was let in already.\n"
            )
            return 0
        if await store.access.revoke(channel, user_id):
            out.write(f"{channel} user {user_id} is no longer let in.\n")
            return 0
    listed = user_id in getattr(config, channel).allowed_users if channel in _PLATFORMS else False
    where = f" (they are in {channel}.allowed_users: remove them there)" if listed else ""
    out.write(f"{channel} user {user_id} was not let in by an owner{where}.\n")
    return 1


async def _waiting(store: Store) -> list[str]:
    """Requests waiting for an owner's answer."""
    now = time.time()
    return [
        f"{r.channel} {r.user_id} ({r.user_name}{f', @{r.username}' if r.username else ''}): "
        f"request {r.code}, asked {_ago(now - r.asked_at)} ago"
        for r in await store.access.waiting(now)
    ]


def render(config: Config, approved: Sequence[ApprovedUser], waiting: list[str]) -> str:
    lines = []
    for name in (*_PLATFORMS, "console"):
        for user in getattr(config, name).allowed_users:
            who = "everyone" if user == "*" else user
            lines.append(f"  {name} {who}: config ({name}.allowed_users)")
    for owner in config.access.admins:
        lines.append(f"  {owner.replace(':', ' ', 1)}: owner ([access] admins)")
    for a in approved:
        name = f" ({a.user_name})" if a.user_name else ""
        when = time.strftime("%Y-%m-%d", time.gmtime(a.approved_at))
        lines.append(f"  {a.channel} {a.user_id}{name}: approved by {a.approved_by}, {when}")
    text = "allowed:\n" + ("\n".join(lines) or "  nobody")
    if waiting:
        text += "\n\nwaiting for an owner's answer:\n" + "\n".join(f"  {w}" for w in waiting)
    if not config.access.admins and config.access.pairing:
        text += (
            "\n\nnote: pairing is on but [access] admins is empty, so nobody is asked: add "
            'yours, e.g. admins = ["telegram:123456789"]'
        )
    return text + "\n"


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(0.0, seconds):.0f} s"

"""Forgetting a user, for every backend: everything stored about them, in one transaction.

What belongs to a user:

- their private chats, whole: every conversation of the chat (active or reset), its messages,
  deliveries, confirmations, jobs, inbox rows, schedules, grants and settings. A private chat is
  one they wrote in as a private chat, or whose id is theirs (Telegram's private chats);
- in a group, their own messages and the bot's messages of each exchange they took part in (an
  exchange runs from a user message to the next user message after the bot's reply: its tool
  calls and results go together, so what remains keeps every call with its result); other
  people's messages stay;
- everywhere, the inbox rows of their messages, their memory, confirmations, jobs (and the results
  those put into a conversation), schedules and their runs, the grants they gave, their usage and
  time zone, their requests to use the bot and an owner's approval of them (they ask again to
  come back); a group's settings they changed stay, without their id;
- the running summary (the context budget's) of any conversation that lost a message it covers.

A dry run does all of it and rolls back, so its counts are exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.store._db import Db
from engine.store._types._reports import Forgotten

_CHUNK = 500  # ids per statement, well inside SQLite's limit on parameters


class _DryRun(Exception):
    """Raised at the end of a dry run's transaction to roll it back."""


@dataclass(slots=True)
class _Tally:
    counts: dict[str, int] = field(default_factory=dict)
    job_ids: list[str] = field(default_factory=list)

    def add(self, what: str, n: int) -> None:
        self.counts[what] = self.counts.get(what, 0) + max(n, 0)


async def forget_user(
    db: Db, channel: str | None, user_id: str, *, dry_run: bool = False
) -> Forgotten:
    tally = _Tally()
    chats: list[tuple[str, str]] = []
    try:
        async with db.transaction():
            chats = await _private_chats(db, channel, user_id)
            for chat in chats:
                await _drop_chat(db, tally, *chat)
            await _drop_group_messages(db, tally, channel, user_id)
            await _drop_user_rows(db, tally, channel, user_id)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return forgotten(tally, chats)


def forgotten(tally: _Tally, chats: Sequence[tuple[str, str]]) -> Forgotten:
    """What the tally counted, and the private chats removed whole."""
    c = tally.counts
    return Forgotten(
        messages=c.get("messages", 0),
        conversations=c.get("conversations", 0),
        inbox=c.get("inbox", 0),
        memory=c.get("memory", 0),
        grants=c.get("grants", 0),
        usage=c.get("usage", 0),
        schedules=c.get("schedules", 0),
        settings=c.get("settings", 0),
        confirmations=c.get("confirmations", 0),
        jobs=c.get("jobs", 0),
        summaries=c.get("summaries", 0),
        access=c.get("access", 0),
        job_ids=tuple(dict.fromkeys(tally.job_ids)),
        private_chats=tuple(chats),
    )


def _in(channel: str | None, column: str = "channel") -> tuple[str, tuple[Any, ...]]:
    """The condition on a `column` naming the channel, for `channel` (None: any)."""
    return ("TRUE", ()) if channel is None else (f"{column} = ?", (channel,))


async def _private_chats(db: Db, channel: str | None, user_id: str) -> list[tuple[str, str]]:
    where, p = _in(channel)
    in_conversation, _ = _in(channel, "c.channel")
    rows = await db.fetch(
        f"SELECT channel, chat_id FROM inbox WHERE user_id=? AND is_private = TRUE AND {where} "
        "UNION SELECT channel, chat_id FROM schedules WHERE user_id=? AND is_private = TRUE "
        f"AND {where} "
        "UNION SELECT c.channel, c.chat_id FROM conversations c WHERE c.is_private = TRUE "
        f"AND {in_conversation} AND (c.chat_id=? OR EXISTS ("
        "SELECT 1 FROM messages m WHERE m.conversation_id=c.id AND m.user_id=?)) "
        # their private chat's settings, also when nothing was said there (a persona set alone):
        # a chat named by the user's own id is theirs (Telegram's private chats)
        f"UNION SELECT channel, chat_id FROM chat_settings WHERE chat_id=? AND {where}",
        *(user_id, *p, user_id, *p, *p, user_id, user_id, user_id, *p),
    )
    return sorted((r["channel"], r["chat_id"]) for r in rows)


async def _drop_chat(db: Db, tally: _Tally, channel: str, chat_id: str) -> None:
    chat = (channel, chat_id)
    conversations = [
        r["id"]
        for r in await db.fetch("SELECT id FROM conversations WHERE channel=? AND chat_id=?", *chat)
    ]
    for chunk in _chunks(conversations):
        among, ids = db.dialect.among(chunk)
        of = f"conversation_id {among}"
        tally.add("summaries", await _drop_summaries(db, of, ids))
        await db.execute(f"DELETE FROM deliveries WHERE {of}", *ids)
        tally.add("confirmations", await _delete(db, "confirmations", of, ids))
        tally.job_ids += [r["id"] for r in await db.fetch(f"SELECT id FROM jobs WHERE {of}", *ids)]
        tally.add("jobs", await _delete(db, "jobs", of, ids))
        tally.add("messages", await _delete(db, "messages", of, ids))
        tally.add("conversations", await _delete(db, "conversations", f"id {among}", ids))
    where = "channel=? AND chat_id=?"
    tally.add("inbox", await _delete(db, "inbox", where, chat))
    await db.execute(
        f"DELETE FROM schedule_runs WHERE schedule_id IN (SELECT id FROM schedules WHERE {where})",
        *chat,
    )
    tally.add("schedules", await _delete(db, "schedules", where, chat))
    tally.add("grants", await _delete(db, "grants", where, chat))
    tally.add("settings", await _delete(db, "chat_settings", where, chat))


async def _drop_group_messages(db: Db, tally: _Tally, channel: str | None, user_id: str) -> None:
    where, p = _in(channel, "c.channel")
    conversations = await db.fetch(
        "SELECT DISTINCT m.conversation_id AS id FROM messages m JOIN conversations c "
        f"ON c.id = m.conversation_id WHERE m.user_id=? AND {where}",
        user_id,
        *p,
    )
    for conv in conversations:
        rows = await db.fetch(
            "SELECT id, role, user_id FROM messages WHERE conversation_id=? ORDER BY id",
            conv["id"],
        )
        doomed = _theirs(rows, user_id)
        for chunk in _chunks(doomed):
            among, ids = db.dialect.among(chunk)
            tally.add("messages", await _delete(db, "messages", f"id {among}", ids))
        if doomed:
            tally.add("summaries", await _drop_covering(db, conv["id"], doomed))


def _theirs(rows: Sequence[Any], user_id: str) -> list[int]:
    """The ids to delete from one conversation: the user's messages, and the bot's messages of
    every exchange the user took part in."""
    doomed: list[int] = []
    exchange: list[Any] = []

    def close() -> None:
        if any(r["role"] == "user" and r["user_id"] == user_id for r in exchange):
            doomed.extend(
                r["id"] for r in exchange if r["role"] != "user" or r["user_id"] == user_id
            )
        exchange.clear()

    for row in rows:
        if row["role"] == "user" and exchange and exchange[-1]["role"] != "user":
            close()
        exchange.append(row)
    close()
    return doomed


async def _drop_user_rows(db: Db, tally: _Tally, channel: str | None, user_id: str) -> None:
    where, p = _in(channel)
    mine = f"user_id=? AND {where}"
    params = (user_id, *p)
    tally.add("inbox", await _delete(db, "inbox", mine, params))
    tally.add("confirmations", await _delete(db, "confirmations", mine, params))
    jobs = [r["id"] for r in await db.fetch(f"SELECT id FROM jobs WHERE {mine}", *params)]
    for job in jobs:  # the result a job put into its conversation: a call and its result
        found = await db.fetch(
            "SELECT id, conversation_id FROM messages WHERE tool_call_id=? "
            "OR (role='assistant' AND tool_calls LIKE ?)",
            f"job_{job}",
            f'[["job_{job}",%',
        )
        for row in found:
            tally.add("summaries", await _drop_covering(db, row["conversation_id"], [row["id"]]))
        if found:
            among, ids = db.dialect.among([r["id"] for r in found])
            tally.add("messages", await _delete(db, "messages", f"id {among}", ids))
    tally.job_ids += jobs
    tally.add("jobs", await _delete(db, "jobs", mine, params))
    await db.execute(
        f"DELETE FROM schedule_runs WHERE schedule_id IN (SELECT id FROM schedules WHERE {mine})",
        *params,
    )
    tally.add("schedules", await _delete(db, "schedules", mine, params))
    tally.add("grants", await _delete(db, "grants", f"granted_by=? AND {where}", params))
    tally.add("usage", await _delete(db, "usage", mine, params))
    tally.add("access", await _delete(db, "access_requests", mine, params))
    tally.add("access", await _delete(db, "approved_users", mine, params))
    await _delete(db, "spend", mine, params)  # what their requests cost, with their usage
    tally.add("settings", await _delete(db, "user_settings", mine, params))
    await db.execute(
        f"UPDATE chat_settings SET updated_by='' WHERE updated_by=? AND {where}", *params
    )
    owner = f"substr(owner, {db.dialect.position}(owner, ':') + 1) = ?"
    if channel is None:
        tally.add("memory", await _delete(db, "memory", owner, (user_id,)))
    else:
        tally.add("memory", await _delete(db, "memory", "owner = ?", (f"{channel}:{user_id}",)))


async def _delete(db: Db, table: str, where: str, params: Sequence[Any]) -> int:
    return await db.execute(f"DELETE FROM {table} WHERE {where}", *params)


def _chunks(ids: Sequence[Any]) -> Iterable[tuple[Any, ...]]:
    for start in range(0, len(ids), _CHUNK):
        yield tuple(ids[start : start + _CHUNK])


# -- summaries (the context budget's) --------------------------------------------------------------


async def _drop_summaries(db: Db, where: str, params: Sequence[Any]) -> int:
    return await _delete(db, "summaries", where, params)


async def _drop_covering(db: Db, conversation_id: int, deleted: Sequence[int]) -> int:
    """Drop the conversation's summary if it covers any of the `deleted` message ids."""
    row = await db.fetchrow(
        "SELECT first_id, last_id FROM summaries WHERE conversation_id=?", conversation_id
    )
    if row is None or not any(row["first_id"] <= i <= row["last_id"] for i in deleted):
        return 0
    return await _delete(db, "summaries", "conversation_id=?", (conversation_id,))


async def drop_summaries_before(db: Db) -> int:
    """Drop the summaries that cover messages no longer stored (history capped by age)."""
    return await _drop_summaries(
        db,
        "first_id < COALESCE((SELECT MIN(m.id) FROM messages m "
        "WHERE m.conversation_id = summaries.conversation_id), last_id + 1)",
        (),
    )

"""Forgetting a user in PostgreSQL: everything stored about them, in one transaction.

What belongs to a user is what ``_sqlite_forget`` says (their private chats whole, their part of
each group exchange, every row of theirs, the summaries covering any of it); this is the same in
PostgreSQL's dialect, sharing its pure parts (which messages of a conversation are theirs, the
tally). A dry run does all of it and rolls back, so its counts are exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine._store._pg_db import PgDb
from engine._store._records import Forgotten
from engine._store._sqlite_forget import _DryRun, _Tally, _theirs, forgotten

_ANY = "($2::text IS NULL OR {column} = $2)"  # $2: the channel, NULL for every channel


async def forget_user(
    db: PgDb, channel: str | None, user_id: str, *, dry_run: bool = False
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


async def _private_chats(db: PgDb, channel: str | None, user_id: str) -> list[tuple[str, str]]:
    mine = _ANY.format(column="channel")
    rows = await db.fetch(
        f"SELECT channel, chat_id FROM inbox WHERE user_id=$1 AND is_private AND {mine} "
        f"UNION SELECT channel, chat_id FROM schedules WHERE user_id=$1 AND is_private "
        f"AND {mine} "
        "UNION SELECT c.channel, c.chat_id FROM conversations c WHERE c.is_private "
        f"AND {_ANY.format(column='c.channel')} AND (c.chat_id=$1 OR EXISTS ("
        "SELECT 1 FROM messages m WHERE m.conversation_id=c.id AND m.user_id=$1))",
        user_id,
        channel,
    )
    return sorted((r["channel"], r["chat_id"]) for r in rows)


async def _drop_chat(db: PgDb, tally: _Tally, channel: str, chat_id: str) -> None:
    ids = [
        r["id"]
        for r in await db.fetch(
            "SELECT id FROM conversations WHERE channel=$1 AND chat_id=$2", channel, chat_id
        )
    ]
    if ids:
        of = "conversation_id = ANY($1::bigint[])"
        tally.add("summaries", await db.execute(f"DELETE FROM summaries WHERE {of}", ids))
        await db.execute(f"DELETE FROM deliveries WHERE {of}", ids)
        tally.add("confirmations", await db.execute(f"DELETE FROM confirmations WHERE {of}", ids))
        jobs = await db.fetch(f"DELETE FROM jobs WHERE {of} RETURNING id", ids)
        tally.job_ids += [r["id"] for r in jobs]
        tally.add("jobs", len(jobs))
        tally.add("messages", await db.execute(f"DELETE FROM messages WHERE {of}", ids))
        tally.add(
            "conversations",
            await db.execute("DELETE FROM conversations WHERE id = ANY($1::bigint[])", ids),
        )
    chat = "channel=$1 AND chat_id=$2"
    tally.add("inbox", await db.execute(f"DELETE FROM inbox WHERE {chat}", channel, chat_id))
    await db.execute(
        f"DELETE FROM schedule_runs WHERE schedule_id IN (SELECT id FROM schedules WHERE {chat})",
        channel,
        chat_id,
    )
    for table, what in (("schedules", "schedules"), ("grants", "grants")):
        tally.add(what, await db.execute(f"DELETE FROM {table} WHERE {chat}", channel, chat_id))
    tally.add(
        "settings", await db.execute(f"DELETE FROM chat_settings WHERE {chat}", channel, chat_id)
    )


async def _drop_group_messages(db: PgDb, tally: _Tally, channel: str | None, user_id: str) -> None:
    conversations = await db.fetch(
        "SELECT DISTINCT m.conversation_id AS id FROM messages m JOIN conversations c "
        f"ON c.id = m.conversation_id WHERE m.user_id=$1 AND {_ANY.format(column='c.channel')}",
        user_id,
        channel,
    )
    for conv in conversations:
        rows = await db.fetch(
            "SELECT id, role, user_id FROM messages WHERE conversation_id=$1 ORDER BY id",
            conv["id"],
        )
        doomed = _theirs(rows, user_id)
        if doomed:
            tally.add(
                "messages",
                await db.execute("DELETE FROM messages WHERE id = ANY($1::bigint[])", doomed),
            )
            tally.add("summaries", await _drop_covering(db, conv["id"], doomed))


async def _drop_user_rows(db: PgDb, tally: _Tally, channel: str | None, user_id: str) -> None:
    mine = f"user_id=$1 AND {_ANY.format(column='channel')}"
    tally.add("inbox", await db.execute(f"DELETE FROM inbox WHERE {mine}", user_id, channel))
    tally.add(
        "confirmations",
        await db.execute(f"DELETE FROM confirmations WHERE {mine}", user_id, channel),
    )
    jobs = [r["id"] for r in await db.fetch(f"SELECT id FROM jobs WHERE {mine}", user_id, channel)]
    for job in jobs:  # the result a job put into its conversation: a call and its result
        found = await db.fetch(
            "SELECT id, conversation_id FROM messages WHERE tool_call_id=$1 "
            "OR (role='assistant' AND tool_calls LIKE $2)",
            f"job_{job}",
            f'[["job_{job}",%',
        )
        for row in found:
            tally.add("summaries", await _drop_covering(db, row["conversation_id"], [row["id"]]))
        if found:
            tally.add(
                "messages",
                await db.execute(
                    "DELETE FROM messages WHERE id = ANY($1::bigint[])", [r["id"] for r in found]
                ),
            )
    tally.job_ids += jobs
    tally.add("jobs", await db.execute(f"DELETE FROM jobs WHERE {mine}", user_id, channel))
    await db.execute(
        f"DELETE FROM schedule_runs WHERE schedule_id IN (SELECT id FROM schedules WHERE {mine})",
        user_id,
        channel,
    )
    given = f"granted_by=$1 AND {_ANY.format(column='channel')}"
    for table, what, where in (
        ("schedules", "schedules", mine),
        ("grants", "grants", given),
        ("usage", "usage", mine),
        ("user_settings", "settings", mine),
    ):
        tally.add(what, await db.execute(f"DELETE FROM {table} WHERE {where}", user_id, channel))
    await db.execute(
        "UPDATE chat_settings SET updated_by='' "
        f"WHERE updated_by=$1 AND {_ANY.format(column='channel')}",
        user_id,
        channel,
    )
    if channel is None:
        owner = "substr(owner, strpos(owner, ':') + 1) = $1"
        tally.add("notes", await db.execute(f"DELETE FROM notes WHERE {owner}", user_id))
    else:
        owned = f"{channel}:{user_id}"
        tally.add("notes", await db.execute("DELETE FROM notes WHERE owner = $1", owned))


async def _drop_covering(db: PgDb, conversation_id: int, deleted: Sequence[int]) -> int:
    """Drop the conversation's summary if it covers any of the `deleted` message ids."""
    return await db.execute(
        "DELETE FROM summaries s WHERE s.conversation_id=$1 "
        "AND EXISTS (SELECT 1 FROM unnest($2::bigint[]) AS d(id) "
        "WHERE d.id BETWEEN s.first_id AND s.last_id)",
        conversation_id,
        list(deleted),
    )


async def drop_summaries_before(db: PgDb) -> int:
    """Drop the summaries that cover messages no longer stored (history capped by age)."""
    return await db.execute(
        "DELETE FROM summaries WHERE first_id < COALESCE((SELECT MIN(m.id) FROM messages m "
        "WHERE m.conversation_id = summaries.conversation_id), last_id + 1)"
    )

"""The inbox in SQLite: every inbound message, committed before anything else happens.

What came with a message (pictures, files, voice) is kept as its platform references in the
`media` column (JSON), so a message taken after a restart can be fetched again; never the bytes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from engine._channel import Attachment, InboundMessage, MediaKind
from engine._store._records import InboxRow, InboxState
from engine._store._sqlite_conversations import SqliteConversations
from engine._store._sqlite_db import SqliteDb, marks
from engine.models import Message

_COLS = (
    "id, channel, chat_id, message_id, user_id, user_name, text, is_private, state, hold_until, "
    "media"
)


class SqliteInbox:
    def __init__(self, db: SqliteDb, conversations: SqliteConversations) -> None:
        self.db = db
        self.conversations = conversations

    async def accept(self, msg: InboundMessage, *, hold_until: float | None = None) -> bool:
        cur = await self.db.write(
            "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, "
            "is_private, media, received_at, hold_until) VALUES (?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (channel, chat_id, message_id) DO NOTHING",
            (
                msg.channel,
                msg.chat_id,
                msg.message_id,
                msg.user_id,
                msg.user_name,
                msg.text,
                int(msg.is_private),
                _dump(msg.attachments),
                time.time(),
                hold_until,
            ),
        )
        return cur.rowcount == 1

    async def ready(self, channel: str, chat_id: str) -> list[InboxRow]:
        """The chat's queued messages that may be taken now (not held by the rate limit)."""
        now = time.time()
        queued = await self.rows(InboxState.QUEUED, channel, chat_id)
        return [r for r in queued if r.ready(now)]

    async def take_queued(self, channel: str, chat_id: str) -> list[InboxRow]:
        rows = await self.ready(channel, chat_id)
        if not rows:
            return rows
        conv = await self.conversations.active(channel, chat_id, is_private=rows[-1].is_private)
        await self.take(
            conv.id, [(row, Message.user(row.text, speaker=row.speaker)) for row in rows]
        )
        return rows

    async def take(self, conversation_id: int, taken: Sequence[tuple[InboxRow, Message]]) -> None:
        if not taken:
            return
        async with self.db.transaction():
            for row, msg in taken:
                await self.conversations.append_later(conversation_id, msg, row.user_id)
            await self.db.write_later(
                f"UPDATE inbox SET state='taken', taken_at=? WHERE id IN ({marks(len(taken))})",
                (time.time(), *(row.id for row, _ in taken)),
            )

    async def rows(self, state: Any, channel: str, chat_id: str) -> list[InboxRow]:
        found = await self.db.all(
            f"SELECT {_COLS} FROM inbox WHERE state=? AND channel=? AND chat_id=? ORDER BY id",
            (InboxState(state).value, channel, chat_id),
        )
        return [_row(r) for r in found]

    async def answered(self, ids: Sequence[int]) -> None:
        if ids:
            await self.db.write_later(
                f"UPDATE inbox SET state='answered' WHERE id IN ({marks(len(ids))})", tuple(ids)
            )

    async def unfinished_chats(self) -> list[tuple[str, str]]:
        rows = await self.db.all(
            "SELECT DISTINCT channel, chat_id FROM inbox WHERE state != 'answered' "
            "UNION SELECT DISTINCT channel, chat_id FROM deliveries WHERE state = 'pending'"
        )
        return [(r["channel"], r["chat_id"]) for r in rows]

    async def sent_since(self, channel: str, user_id: str, since: float) -> list[float]:
        """When the user's messages received since `since` arrived, oldest first."""
        rows = await self.db.all(
            "SELECT received_at FROM inbox WHERE channel=? AND user_id=? AND received_at>=? "
            "ORDER BY received_at",
            (channel, user_id, since),
        )
        return [r["received_at"] for r in rows]

    async def next_release(self, channel: str, chat_id: str) -> float | None:
        """When the chat's earliest held message may be taken (None: none held)."""
        row = await self.db.one(
            "SELECT MIN(hold_until) AS t FROM inbox WHERE channel=? AND chat_id=? "
            "AND state='queued' AND hold_until IS NOT NULL",
            (channel, chat_id),
        )
        return row["t"] if row is not None else None

    async def prune(self, older_than: float) -> int:
        cur = await self.db.write(
            "DELETE FROM inbox WHERE state='answered' AND received_at < ?", (older_than,)
        )
        return cur.rowcount


def _row(r: sqlite3.Row) -> InboxRow:
    return InboxRow(
        r["id"],
        r["channel"],
        r["chat_id"],
        r["message_id"],
        r["user_id"],
        r["user_name"],
        r["text"],
        bool(r["is_private"]),
        InboxState(r["state"]),
        hold_until=r["hold_until"],
        attachments=_load(r["media"]),
    )


def _dump(attachments: Sequence[Attachment]) -> str | None:
    if not attachments:
        return None
    return json.dumps(
        [
            {
                "kind": a.kind.value,
                "name": a.name,
                "mime": a.mime_type,
                "size": a.size,
                "ref": a.ref,
                "duration": a.duration_s,
            }
            for a in attachments
        ]
    )


def _load(raw: str | None) -> tuple[Attachment, ...]:
    if not raw:
        return ()
    return tuple(
        Attachment(MediaKind(a["kind"]), a["name"], a["mime"], a["size"], a["ref"], a["duration"])
        for a in json.loads(raw)
    )

"""What the web console reads across the whole store (and so the whole cluster), for every
backend: conversations found by chat, user and date, one conversation with what happened in it,
every standing permission and active schedule, and the last hour's activity. Reads only."""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.store._db import Db, Row
from engine.store._types._rows import Grant

_LIMIT = 200


@dataclass(frozen=True, slots=True)
class ConversationView:
    id: int  # the store's row number (never a platform id)
    channel: str
    chat_id: str
    is_private: bool
    active: bool
    created_at: float
    last_at: float  # its newest message's time (its creation's when it has none)
    messages: int
    who: str | None = None  # the name of whoever wrote there last (a private chat's user)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored: `tool_calls` are (call id, tool, arguments)."""

    id: int
    role: str
    text: str
    tool_calls: tuple[tuple[str, str, str], ...]
    call_id: str | None  # a tool result's call
    is_error: bool
    speaker: str | None
    user_id: str | None
    created_at: float
    stopped_at: float | None = None  # the user stopped its turn: no request carries it
    thoughts: str = ""  # what the model thought before it (its reasoning's summaries)


@dataclass(frozen=True, slots=True)
class ConfirmationView:
    id: str
    tool: str
    summary: str
    user_name: str
    state: str
    created_at: float
    decided_at: float | None


@dataclass(frozen=True, slots=True)
class ScheduleView:
    id: int
    channel: str
    chat_id: str
    user_name: str
    task: str
    kind: str
    spec: str
    next_due: float


@dataclass(frozen=True, slots=True)
class Activity:
    """What happened since a time: answers given, tool calls made, tool calls that failed,
    errors the channels (and the model) met (counted per minute: `since` is taken to its
    minute)."""

    answers: int
    tool_calls: int
    tool_errors: int
    channel_errors: int


class Browse:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def conversations(
        self,
        *,
        chat_id: str | None = None,
        user_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 50,
    ) -> list[ConversationView]:
        """The conversations matching every filter given, newest activity first: `chat_id`
        exactly, a message written by `user_id`, a message written between `since` and
        `until` (unix times)."""
        where: list[str] = ["1=1"]
        params: list[object] = []
        if chat_id:
            where.append("c.chat_id = ?")
            params.append(chat_id)
        if user_id:
            where.append(
                "EXISTS (SELECT 1 FROM messages u WHERE u.conversation_id = c.id AND u.user_id = ?)"
            )
            params.append(user_id)
        if since is not None or until is not None:
            where.append(
                "EXISTS (SELECT 1 FROM messages d WHERE d.conversation_id = c.id "
                "AND d.created_at >= ? AND d.created_at < ?)"
            )
            params += [since or 0.0, until if until is not None else 1e12]
        rows = await self.db.fetch(
            "SELECT c.id, c.channel, c.chat_id, c.is_private, c.active, c.created_at, "
            "COALESCE(MAX(m.created_at), c.created_at) AS last_at, COUNT(m.id) AS n, "
            f"{_WHO} AS who "
            "FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id "
            f"WHERE {' AND '.join(where)} "
            "GROUP BY c.id, c.channel, c.chat_id, c.is_private, c.active, c.created_at "
            "ORDER BY last_at DESC, c.id DESC LIMIT ?",
            *params,
            min(limit, _LIMIT),
        )
        return [_conversation(r) for r in rows]

    async def conversation(self, conversation_id: int) -> ConversationView | None:
        rows = await self.db.fetch(
            "SELECT c.id, c.channel, c.chat_id, c.is_private, c.active, c.created_at, "
            "COALESCE(MAX(m.created_at), c.created_at) AS last_at, COUNT(m.id) AS n, "
            f"{_WHO} AS who "
            "FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id "
            "WHERE c.id = ? GROUP BY c.id, c.channel, c.chat_id, c.is_private, c.active, "
            "c.created_at",
            conversation_id,
        )
        return _conversation(rows[0]) if rows else None

    async def messages(self, conversation_id: int, limit: int = 500) -> list[StoredMessage]:
        """The conversation's last `limit` messages, oldest first."""
        rows = await self.db.fetch(
            "SELECT id, role, content, tool_calls, tool_call_id, is_error, speaker, user_id, "
            "created_at, stopped_at, reasoning FROM messages WHERE conversation_id=? "
            "ORDER BY id DESC LIMIT ?",
            conversation_id,
            limit,
        )
        return [
            StoredMessage(
                r["id"],
                r["role"],
                r["content"] or "",
                tuple(tuple(c) for c in json.loads(r["tool_calls"])) if r["tool_calls"] else (),
                r["tool_call_id"],
                bool(r["is_error"]),
                r["speaker"],
                r["user_id"],
                r["created_at"],
                r["stopped_at"],
                _thoughts(r["reasoning"]),
            )
            for r in reversed(rows)
        ]

    async def confirmations(self, conversation_id: int) -> list[ConfirmationView]:
        rows = await self.db.fetch(
            "SELECT id, tool, summary, user_name, state, created_at, decided_at "
            "FROM confirmations WHERE conversation_id=? ORDER BY created_at",
            conversation_id,
        )
        return [ConfirmationView(**dict(r)) for r in rows]

    async def grants(self) -> list[Grant]:
        """Every standing permission, of every chat."""
        rows = await self.db.fetch(
            "SELECT channel, chat_id, tool, granted_by, granted_by_name, granted_at FROM grants "
            "ORDER BY channel, chat_id, tool LIMIT ?",
            _LIMIT,
        )
        return [Grant(**dict(r)) for r in rows]

    async def schedules(self) -> list[ScheduleView]:
        """The active schedules, next due first."""
        rows = await self.db.fetch(
            "SELECT id, channel, chat_id, user_name, task, kind, spec, next_due FROM schedules "
            "WHERE state='active' ORDER BY next_due LIMIT ?",
            _LIMIT,
        )
        return [ScheduleView(**dict(r)) for r in rows]

    async def activity(self, since: float) -> Activity:
        row = await self.db.fetchrow(
            "SELECT (SELECT COUNT(*) FROM messages WHERE created_at >= ? AND role='assistant' "
            "AND tool_calls IS NULL) AS a, "
            "(SELECT COUNT(*) FROM messages WHERE created_at >= ? AND role='tool') AS t, "
            "(SELECT COUNT(*) FROM messages WHERE created_at >= ? AND role='tool' "
            "AND is_error = TRUE) AS e, "
            "(SELECT COALESCE(SUM(n), 0) FROM channel_error_counts WHERE minute >= ?) AS c",
            since,
            since,
            since,
            int(since // 60),
        )
        assert row is not None
        return Activity(int(row["a"]), int(row["t"]), int(row["e"]), int(row["c"]))


# Who wrote in a chat last, by name: the inbox keeps each message's sender's name; a group's
# messages keep their speaker's (the inbox is pruned in time).
_WHO = (
    "COALESCE((SELECT i.user_name FROM inbox i WHERE i.channel = c.channel "
    "AND i.chat_id = c.chat_id AND i.user_name != '' ORDER BY i.id DESC LIMIT 1), "
    "(SELECT s.speaker FROM messages s WHERE s.conversation_id = c.id "
    "AND s.speaker IS NOT NULL ORDER BY s.id DESC LIMIT 1))"
)


def _conversation(r: Row) -> ConversationView:
    return ConversationView(
        r["id"],
        r["channel"],
        r["chat_id"],
        bool(r["is_private"]),
        bool(r["active"]),
        r["created_at"],
        r["last_at"],
        int(r["n"]),
        r["who"],
    )


def _thoughts(stored: str | None) -> str:
    """The readable part of a message's stored reasoning (never an API's encrypted item)."""
    said = [summary for _api, _item, summary in json.loads(stored)] if stored else []
    return "\n\n".join(s for s in said if s.strip())

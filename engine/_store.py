"""The SQLite store: conversations, messages, confirmations, background jobs, inbox, notes.

All SQL lives here. One file, WAL mode, one connection (aiosqlite runs it in its own thread,
so the event loop never blocks on disk). Nothing is cached: a turn loads what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from engine._channel import InboundMessage
from engine._llm import Message, ToolCall
from tools import StoreError

log = logging.getLogger(__name__)

# Each entry upgrades the schema by one version (PRAGMA user_version). Never edit a released
# entry: add a new one.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        is_private INTEGER NOT NULL DEFAULT 1,
        active INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX conversations_active ON conversations(channel, chat_id) WHERE active = 1;
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        role TEXT NOT NULL,
        content TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_conversation ON messages(conversation_id, id);
    CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        text TEXT NOT NULL,
        is_private INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'queued',
        received_at REAL NOT NULL,
        UNIQUE(channel, chat_id, message_id)
    );
    CREATE INDEX inbox_queued ON inbox(state, channel, chat_id) WHERE state != 'answered';
    CREATE TABLE confirmations (
        id TEXT PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        tool TEXT NOT NULL,
        call_id TEXT NOT NULL,
        args TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        summary TEXT NOT NULL,
        remaining TEXT NOT NULL,
        iteration INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        message_ref TEXT,
        reply_to TEXT,
        expires_at REAL NOT NULL,
        created_at REAL NOT NULL,
        decided_at REAL
    );
    CREATE INDEX confirmations_state ON confirmations(state);
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id),
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        resumable INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'running',
        result TEXT,
        for_user TEXT,
        is_error INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE INDEX jobs_state ON jobs(state);
    """,
    """
    CREATE TABLE notes (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX notes_owner ON notes(owner, id);
    """,
]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    channel: str
    chat_id: str
    is_private: bool


@dataclass(frozen=True, slots=True)
class InboxRow:
    id: int
    channel: str
    chat_id: str
    message_id: str
    user_id: str
    user_name: str
    text: str
    is_private: bool
    state: str


@dataclass(frozen=True, slots=True)
class ConfirmationRow:
    id: str
    conversation_id: int
    channel: str
    chat_id: str
    user_id: str
    user_name: str
    tool: str
    call_id: str
    args: dict[str, Any]
    summary: str
    remaining: list[ToolCall]
    iteration: int
    state: str
    message_ref: str | None
    reply_to: str | None
    expires_at: float


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    conversation_id: int
    channel: str
    chat_id: str
    user_id: str
    tool: str
    args: dict[str, Any]
    resumable: bool
    state: str
    result: str | None
    for_user: str | None
    is_error: bool


def args_hash(args: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:16]


class Store:
    """`async with Store(path) as store:` opens (creating or migrating) and closes the file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: aiosqlite.Connection | None = None
        self._tx_lock = asyncio.Lock()
        self._tx_owner: asyncio.Task[Any] | None = None

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, one at a time (statements are autocommit otherwise)."""
        async with self._tx_lock:
            self._tx_owner = asyncio.current_task()
            try:
                await self.db.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    await self.db.execute("ROLLBACK")
                    raise
                await self.db.execute("COMMIT")
            finally:
                self._tx_owner = None

    async def _write(self, sql: str, params: tuple[Any, ...] = ()) -> aiosqlite.Cursor:
        """Run a write. The connection is shared: a write from another task must wait until an
        open transaction commits, or it would silently become part of it (and not be durable
        when its caller returns)."""
        if self._tx_owner is not None and self._tx_owner is asyncio.current_task():
            return await self.db.execute(sql, params)
        async with self._tx_lock:
            return await self.db.execute(sql, params)

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = aiosqlite.connect(self.path, isolation_level=None)
            # Its worker thread must never keep the process alive: committed data is safe in
            # the WAL whatever happens, and an unclosed store must not hang interpreter exit.
            connection._thread.daemon = True
            self._db = await connection
            await self.db.execute("PRAGMA journal_mode=WAL")
            await self.db.execute("PRAGMA synchronous=NORMAL")
            await self.db.execute("PRAGMA foreign_keys=ON")
            await self.db.execute("PRAGMA busy_timeout=5000")
            await self._migrate()
        except (OSError, sqlite3.Error) as exc:
            await self.close()
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def schema_version(self) -> int:
        row = await self._fetchone("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def _migrate(self) -> None:
        version = await self.schema_version()
        if version > len(MIGRATIONS):
            raise StoreError(
                f"the store at {self.path} has schema version {version}, newer than this "
                f"relaybot knows ({len(MIGRATIONS)}); upgrade relaybot"
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            statements = [s for s in script.split(";") if s.strip()]
            async with self._transaction():
                for stmt in statements:
                    await self.db.execute(stmt)
                await self.db.execute(f"PRAGMA user_version = {number}")
            log.info("store migrated to schema version %d", number)

    async def _fetchone(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        rows = await self.db.execute_fetchall(sql, params)  # one trip to the db thread
        return next(iter(rows), None)

    async def _fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return list(await self.db.execute_fetchall(sql, params))

    # -- conversations and messages -------------------------------------------------------

    async def conversation(
        self, channel: str, chat_id: str, *, is_private: bool = True
    ) -> Conversation:
        """The active conversation of a chat, created on first use."""
        row = await self._fetchone(
            "SELECT id, is_private FROM conversations WHERE channel=? AND chat_id=? AND active=1",
            (channel, chat_id),
        )
        if row is None:
            cur = await self._write(
                "INSERT INTO conversations(channel, chat_id, is_private, created_at) "
                "VALUES (?,?,?,?)",
                (channel, chat_id, int(is_private), time.time()),
            )
            return Conversation(cur.lastrowid or 0, channel, chat_id, is_private)
        return Conversation(row[0], channel, chat_id, bool(row[1]))

    async def reset(self, channel: str, chat_id: str) -> None:
        """Start a fresh conversation for the chat; the old one is kept, inactive."""
        await self._write(
            "UPDATE conversations SET active=0 WHERE channel=? AND chat_id=? AND active=1",
            (channel, chat_id),
        )

    async def append(self, conversation_id: int, msg: Message) -> None:
        calls = (
            json.dumps([[c.id, c.name, c.arguments] for c in msg.tool_calls])
            if msg.tool_calls
            else None
        )
        await self._write(
            "INSERT INTO messages(conversation_id, role, content, tool_calls, tool_call_id, "
            "created_at) VALUES (?,?,?,?,?,?)",
            (conversation_id, msg.role, msg.content, calls, msg.tool_call_id, time.time()),
        )

    async def history(self, conversation_id: int, limit: int = 200) -> list[Message]:
        """The last `limit` messages, oldest first, starting at a user message."""
        rows = await self._fetchall(
            "SELECT role, content, tool_calls, tool_call_id FROM messages "
            "WHERE conversation_id=? ORDER BY id DESC LIMIT ?",
            (conversation_id, limit),
        )
        msgs = [
            Message(
                role,
                content,
                [ToolCall(*c) for c in json.loads(calls)] if calls else [],
                call_id,
            )
            for role, content, calls, call_id in reversed(rows)
        ]
        if len(rows) == limit:  # cut at a user message so no tool result loses its call
            while msgs and msgs[0].role != "user":
                msgs.pop(0)
        return msgs

    async def close_dangling(self, conversation_id: int, reason: str) -> int:
        """Give every tool call that has no result the result `reason`; returns how many."""
        rows = await self._fetchall(
            "SELECT tool_calls FROM messages WHERE conversation_id=? AND tool_calls IS NOT NULL "
            "ORDER BY id DESC LIMIT 5",
            (conversation_id,),
        )
        wanted = [c[0] for (calls,) in rows for c in json.loads(calls)]
        if not wanted:
            return 0
        marks = ",".join("?" * len(wanted))
        have = {
            r[0]
            for r in await self._fetchall(
                f"SELECT tool_call_id FROM messages WHERE conversation_id=? AND "
                f"tool_call_id IN ({marks})",
                (conversation_id, *wanted),
            )
        }
        missing = [cid for cid in wanted if cid not in have]
        for cid in missing:
            await self.append(conversation_id, Message("tool", reason, tool_call_id=cid))
        return len(missing)

    # -- inbox ----------------------------------------------------------------------------

    async def accept(self, msg: InboundMessage) -> bool:
        """Record an inbound message once; False when it was delivered before."""
        cur = await self._write(
            "INSERT OR IGNORE INTO inbox(channel, chat_id, message_id, user_id, user_name, text, "
            "is_private, received_at) VALUES (?,?,?,?,?,?,?,?)",
            (
                msg.channel,
                msg.chat_id,
                msg.message_id,
                msg.user_id,
                msg.user_name,
                msg.text,
                int(msg.is_private),
                time.time(),
            ),
        )
        return cur.rowcount == 1

    async def take_queued(self, channel: str, chat_id: str) -> list[InboxRow]:
        """Move the chat's queued messages into its conversation as user messages, in order.

        They stay in the inbox (state 'taken') until :meth:`answered`.
        """
        rows = await self.inbox("queued", channel, chat_id)
        if not rows:
            return rows
        conv = await self.conversation(channel, chat_id, is_private=rows[-1].is_private)
        async with self._transaction():
            for row in rows:
                await self.append(conv.id, Message("user", row.text))
            marks = ",".join("?" * len(rows))
            await self._write(
                f"UPDATE inbox SET state='taken' WHERE id IN ({marks})", tuple(r.id for r in rows)
            )
        return rows

    async def answered(self, ids: list[int]) -> None:
        if ids:
            marks = ",".join("?" * len(ids))
            await self._write(
                f"UPDATE inbox SET state='answered' WHERE id IN ({marks})", tuple(ids)
            )

    async def unfinished_chats(self) -> list[tuple[str, str, bool]]:
        """Chats with messages not yet answered: (channel, chat_id, any taken)."""
        rows = await self._fetchall(
            "SELECT channel, chat_id, MAX(state='taken') FROM inbox WHERE state != 'answered' "
            "GROUP BY channel, chat_id"
        )
        return [(r[0], r[1], bool(r[2])) for r in rows]

    async def inbox(self, state: str, channel: str, chat_id: str) -> list[InboxRow]:
        """A chat's inbox rows in `state` ('queued', 'taken': in a turn, 'answered'), in order."""
        rows = await self._fetchall(
            "SELECT id, channel, chat_id, message_id, user_id, user_name, text, is_private, "
            "state FROM inbox WHERE state=? AND channel=? AND chat_id=? ORDER BY id",
            (state, channel, chat_id),
        )
        return [InboxRow(*r[:7], bool(r[7]), r[8]) for r in rows]

    # -- confirmations --------------------------------------------------------------------

    async def add_confirmation(self, conv: Conversation, row: ConfirmationRow) -> None:
        await self._write(
            "INSERT INTO confirmations(id, conversation_id, channel, chat_id, user_id, user_name, "
            "tool, call_id, args, args_hash, summary, remaining, iteration, state, reply_to, "
            "expires_at, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                row.id,
                conv.id,
                row.channel,
                row.chat_id,
                row.user_id,
                row.user_name,
                row.tool,
                row.call_id,
                json.dumps(row.args),
                args_hash(row.args),
                row.summary,
                json.dumps([[c.id, c.name, c.arguments] for c in row.remaining]),
                row.iteration,
                "pending",
                row.reply_to,
                row.expires_at,
                time.time(),
            ),
        )

    async def set_confirmation_ref(self, cid: str, message_ref: str) -> None:
        await self._write("UPDATE confirmations SET message_ref=? WHERE id=?", (message_ref, cid))

    _CONF_COLS = (
        "id, conversation_id, channel, chat_id, user_id, user_name, tool, call_id, args, summary, "
        "remaining, iteration, state, message_ref, reply_to, expires_at"
    )

    @staticmethod
    def _confirmation(r: Any) -> ConfirmationRow:
        return ConfirmationRow(
            *r[:8],
            json.loads(r[8]),
            r[9],
            [ToolCall(*c) for c in json.loads(r[10])],
            *r[11:],
        )

    async def confirmation(self, cid: str) -> ConfirmationRow | None:
        r = await self._fetchone(f"SELECT {self._CONF_COLS} FROM confirmations WHERE id=?", (cid,))
        return self._confirmation(r) if r else None

    async def confirmations(
        self, state: str, *, channel: str | None = None, chat_id: str | None = None
    ) -> list[ConfirmationRow]:
        sql = f"SELECT {self._CONF_COLS} FROM confirmations WHERE state=?"
        params: tuple[Any, ...] = (state,)
        if channel is not None:
            sql += " AND channel=? AND chat_id=?"
            params += (channel, chat_id)
        return [
            self._confirmation(r) for r in await self._fetchall(sql + " ORDER BY rowid", params)
        ]

    async def transition(self, cid: str, from_state: str, to_state: str) -> bool:
        """Move a confirmation between states atomically; False if it was not in `from_state`."""
        cur = await self._write(
            "UPDATE confirmations SET state=?, decided_at=? WHERE id=? AND state=?",
            (to_state, time.time(), cid, from_state),
        )
        return cur.rowcount == 1

    # -- background jobs ------------------------------------------------------------------

    async def add_job(
        self,
        conv: Conversation,
        job_id: str,
        user_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        resumable: bool,
    ) -> None:
        await self._write(
            "INSERT INTO jobs(id, conversation_id, channel, chat_id, user_id, tool, args, "
            "resumable, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                job_id,
                conv.id,
                conv.channel,
                conv.chat_id,
                user_id,
                tool,
                json.dumps(args),
                int(resumable),
                time.time(),
            ),
        )

    async def finish_job(
        self, job_id: str, result: str, for_user: str | None, is_error: bool
    ) -> bool:
        """Store a job's result once; False when it had finished before (a duplicate)."""
        cur = await self._write(
            "UPDATE jobs SET state='done', result=?, for_user=?, is_error=?, finished_at=? "
            "WHERE id=? AND state IN ('running', 'resumed')",
            (result, for_user, int(is_error), time.time(), job_id),
        )
        return cur.rowcount == 1

    async def set_job_state(self, job_id: str, state: str, from_state: str) -> bool:
        cur = await self._write(
            "UPDATE jobs SET state=? WHERE id=? AND state=?", (state, job_id, from_state)
        )
        return cur.rowcount == 1

    async def jobs(self, state: str) -> list[JobRow]:
        rows = await self._fetchall(
            "SELECT id, conversation_id, channel, chat_id, user_id, tool, args, resumable, state, "
            "result, for_user, is_error FROM jobs WHERE state=? ORDER BY created_at",
            (state,),
        )
        return [
            JobRow(*r[:6], json.loads(r[6]), bool(r[7]), r[8], r[9], r[10], bool(r[11]))
            for r in rows
        ]

    async def job_state(self, job_id: str) -> str | None:
        row = await self._fetchone("SELECT state FROM jobs WHERE id=?", (job_id,))
        return row[0] if row else None

    # -- notes (the NotesStore protocol of tools.builtins) --------------------------------

    async def add_note(self, owner: str, text: str) -> int:
        cur = await self._write(
            "INSERT INTO notes(owner, text, created_at) VALUES (?,?,?)", (owner, text, time.time())
        )
        return cur.lastrowid or 0

    async def list_notes(
        self, owner: str, query: str | None = None, limit: int = 20
    ) -> list[tuple[int, str, float]]:
        sql = "SELECT id, text, created_at FROM notes WHERE owner=?"
        params: tuple[Any, ...] = (owner,)
        if query:
            sql += " AND text LIKE ? ESCAPE '\\'"
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += (f"%{escaped}%",)
        rows = await self._fetchall(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        return [(r[0], r[1], r[2]) for r in rows]

    async def delete_note(self, owner: str, note_id: int) -> bool:
        cur = await self._write("DELETE FROM notes WHERE owner=? AND id=?", (owner, note_id))
        return cur.rowcount == 1

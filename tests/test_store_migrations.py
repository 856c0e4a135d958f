"""Upgrades: a store written by every earlier schema version opens, migrates and reads back;
one written by a newer relaybot is refused and left untouched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from engine import Message, SqliteStore, ToolCall
from engine._store import MIGRATIONS, ConfirmationState, InboxState, JobState
from engine._store._pg import PgStore
from engine._store._pg_schema import MIGRATIONS as PG_MIGRATIONS
from tests.postgres import PostgresServer
from tools import StoreError

# Rows as each released version wrote them (a version's rows still fit the later schemas).
ROWS_BY_VERSION = {
    1: [
        "INSERT INTO conversations(id, channel, chat_id, is_private, created_at) "
        "VALUES (1, 't', 'c1', 1, 0)",
        "INSERT INTO messages(conversation_id, role, content, created_at) VALUES (1,'user','hi',0)",
        "INSERT INTO messages(conversation_id, role, content, tool_calls, created_at) VALUES "
        f"(1, 'assistant', NULL, '{json.dumps([['k1', 'add', '{}']])}', 0)",
        "INSERT INTO messages(conversation_id, role, content, tool_call_id, created_at) VALUES "
        "(1, 'tool', '2', 'k1', 0)",
        "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, is_private, "
        "state, received_at) VALUES ('t','c1','m1','u1','Ann','hi',1,'taken',0)",
        "INSERT INTO confirmations(id, conversation_id, channel, chat_id, user_id, user_name, "
        "tool, call_id, args, args_hash, summary, remaining, iteration, state, expires_at, "
        "created_at) VALUES ('abc123', 1, 't', 'c1', 'u1', 'Ann', 'delete', 'k2', "
        "'{\"name\": \"x\"}', 'h', 'Delete x', '[]', 1, 'pending', 9e9, 0)",
        "INSERT INTO jobs(id, conversation_id, channel, chat_id, user_id, tool, args, state, "
        "created_at) VALUES ('j1', 1, 't', 'c1', 'u1', 'report', '{}', 'running', 0)",
    ],
    2: ["INSERT INTO notes(owner, text, created_at) VALUES ('t:u1', 'likes tea', 0)"],
}


def write_old_store(path: Path, version: int) -> None:
    with sqlite3.connect(path) as db:
        for number, script in enumerate(MIGRATIONS[:version], start=1):
            db.executescript(script)
            for sql in ROWS_BY_VERSION.get(number, []):
                db.execute(sql)
        db.execute(f"PRAGMA user_version = {version}")


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS)))
async def test_every_earlier_version_migrates_and_keeps_its_data(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / f"v{version}.db"
    write_old_store(path, version)
    async with SqliteStore(path) as store:
        assert await store.schema_version() == len(MIGRATIONS)
        conv = await store.conversations.active("t", "c1")
        assert conv.id == 1
        assert await store.conversations.history(conv.id) == [
            Message.user("hi"),
            Message.assistant(None, [ToolCall("k1", "add", "{}")]),
            Message.tool_result("k1", "2"),
        ]
        rows = await store.inbox.rows(InboxState.TAKEN, "t", "c1")
        assert [r.message_id for r in rows] == ["m1"]
        conf = await store.confirmations.get("abc123")
        assert conf is not None and conf.state is ConfirmationState.PENDING
        assert conf.args == {"name": "x"} and conf.details == ""
        job = await store.jobs.get("j1")
        assert job is not None and job.state is JobState.RUNNING
        notes = await store.notes.list_notes("t:u1")
        assert [n[1] for n in notes] == (["likes tea"] if version >= 2 else [])
        # and it takes new writes of the current schema
        await store.conversations.append(conv.id, Message.assistant("two"), deliver="m1")
        assert [d.text for d in await store.conversations.undelivered("t", "c1")] == ["two"]


async def test_a_store_from_a_newer_relaybot_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    write_old_store(path, len(MIGRATIONS))
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="written by a newer relaybot"):
        async with SqliteStore(path):
            pass
    assert path.read_bytes() == before


# -- PostgreSQL: the same numbered migrations in its dialect -----------------------------------


def sqlite_columns(version: int) -> dict[str, set[str]]:
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        for script in MIGRATIONS[:version]:
            db.executescript(script)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: {r[1] for r in db.execute(f"PRAGMA table_info({t})")} for t in tables}


def postgres_columns(server: PostgresServer, version: int) -> dict[str, set[str]]:
    url = server.new_database(migrated=False)
    database = url.split("/")[3].split("?")[0]
    for script in PG_MIGRATIONS[:version]:
        server.psql(script, database)
    rows = server.psql(
        "SELECT table_name || ' ' || column_name FROM information_schema.columns "
        "WHERE table_schema = 'public'",
        database,
    )
    columns: dict[str, set[str]] = {}
    for line in rows.splitlines():
        table, column = line.split()
        columns.setdefault(table, set()).add(column)
    return columns


def test_each_migration_has_a_postgresql_dialect_under_the_same_number(
    postgres: PostgresServer,
) -> None:
    """Entry N of either dialect leaves the same tables and columns, for every N: a store of
    either kind at one version is the same store (and migrate-store copies column by column)."""
    assert len(PG_MIGRATIONS) == len(MIGRATIONS)
    for version in range(1, len(MIGRATIONS) + 1):
        assert postgres_columns(postgres, version) == sqlite_columns(version), version


async def test_instances_starting_together_migrate_once(postgres: PostgresServer) -> None:
    url = postgres.new_database(migrated=False)
    stores = [PgStore(url) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))  # each would fail on a second CREATE
    try:
        assert {await s.schema_version() for s in stores} == {len(MIGRATIONS)}
        conv = await stores[0].conversations.active("t", "c1")
        assert (await stores[3].conversations.active("t", "c1")).id == conv.id
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_postgresql_store_from_a_newer_relaybot_is_refused_untouched(
    postgres: PostgresServer,
) -> None:
    url = postgres.new_database()
    database = url.split("/")[3].split("?")[0]
    postgres.psql(f"UPDATE schema_version SET version = {len(MIGRATIONS) + 1}", database)
    with pytest.raises(StoreError, match="written by a newer relaybot"):
        async with PgStore(url):
            pass
    assert postgres.psql("SELECT version FROM schema_version", database) == str(len(MIGRATIONS) + 1)

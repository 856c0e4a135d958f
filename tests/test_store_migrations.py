"""Upgrades: a store written by every earlier schema version opens, migrates and reads back;
one written by a newer relaybot is refused and left untouched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from engine import Message, ToolCall
from engine.store import MIGRATIONS, ConfirmationState, InboxState, JobState, SqliteStore, Store
from engine.store.postgres import MIGRATIONS as PG_MIGRATIONS
from engine.store.postgres import PgStore
from tests.postgres import PostgresServer
from tools.errors import StoreError

# Rows as each released version wrote them (a version's rows still fit the later schemas), in
# SQL both dialects read (flags as TRUE and FALSE).
ROWS_BY_VERSION = {
    1: [
        "INSERT INTO conversations(id, channel, chat_id, is_private, created_at) "
        "VALUES (1, 't', 'c1', TRUE, 0)",
        "INSERT INTO messages(conversation_id, role, content, created_at) VALUES (1,'user','hi',0)",
        "INSERT INTO messages(conversation_id, role, content, tool_calls, created_at) VALUES "
        f"(1, 'assistant', NULL, '{json.dumps([['k1', 'add', '{}']])}', 0)",
        "INSERT INTO messages(conversation_id, role, content, tool_call_id, created_at) VALUES "
        "(1, 'tool', '2', 'k1', 0)",
        "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, is_private, "
        "state, received_at) VALUES ('t','c1','m1','u1','Ann','hi',TRUE,'taken',0)",
        "INSERT INTO confirmations(id, conversation_id, channel, chat_id, user_id, user_name, "
        "tool, call_id, args, args_hash, summary, remaining, iteration, state, expires_at, "
        "created_at) VALUES ('abc123', 1, 't', 'c1', 'u1', 'Ann', 'delete', 'k2', "
        "'{\"name\": \"x\"}', 'h', 'Delete x', '[]', 1, 'pending', 9e9, 0)",
        "INSERT INTO jobs(id, conversation_id, channel, chat_id, user_id, tool, args, state, "
        "created_at) VALUES ('j1', 1, 't', 'c1', 'u1', 'report', '{}', 'running', 0)",
    ],
    2: ["INSERT INTO notes(owner, text, created_at) VALUES ('t:u1', 'likes tea', 0)"],
    3: [
        "INSERT INTO conversations(id, channel, chat_id, is_private, created_at) "
        "VALUES (2, 't', 'g1', FALSE, 0)",
        "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, is_private, "
        "state, received_at) VALUES ('t','g1','g1','u2','Bob','hello all',FALSE,'answered',0)",
        "INSERT INTO messages(id, conversation_id, role, content, speaker, created_at) "
        "VALUES (10, 2, 'user', 'hello all', 'Bob', 0)",
        "INSERT INTO messages(id, conversation_id, role, content, created_at) "
        "VALUES (11, 2, 'assistant', 'hi Bob', 0)",
        "INSERT INTO deliveries(message_id, conversation_id, channel, chat_id, reply_to, "
        "created_at) VALUES (11, 2, 't', 'g1', 'g1', 0)",
    ],
    4: [
        "INSERT INTO grants(channel, chat_id, tool, granted_by, granted_by_name, granted_at) "
        "VALUES ('t', 'g1', 'delete', 'u2', 'Bob', 0)",
        "INSERT INTO usage(channel, user_id, day, prompt_tokens, completion_tokens, turns, "
        "tool_calls) VALUES ('t', 'u1', '2026-11-01', 7, 3, 1, 0)",
    ],
    5: [
        "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, is_private, "
        "state, received_at, media) VALUES ('t','c1','m2','u1','Ann','look',TRUE,'queued',1, "
        "'"
        + json.dumps(
            [
                {
                    "kind": "image",
                    "name": "a.png",
                    "mime": "image/png",
                    "size": 3,
                    "ref": "f1",
                    "duration": None,
                }
            ]
        )
        + "')",
    ],
    6: [
        "INSERT INTO schedules(id, channel, chat_id, user_id, user_name, is_private, task, kind, "
        "spec, timezone, next_due, created_at) VALUES (1, 't', 'c1', 'u1', 'Ann', TRUE, 'news', "
        "'interval', '600', 'UTC', 9e9, 0)",
        "INSERT INTO user_settings(channel, user_id, timezone) VALUES ('t', 'u1', 'Europe/Paris')",
        "INSERT INTO chat_settings(channel, chat_id, persona, updated_by, updated_at) "
        "VALUES ('t', 'g1', 'a pirate', 'u2', 0)",
    ],
    7: [
        "INSERT INTO summaries(conversation_id, text, first_id, last_id, updated_at) "
        "VALUES (1, 'Ann said hi', 1, 2, 0)",
        "INSERT INTO token_ratios(model, ratio, samples, max_window, updated_at) "
        "VALUES ('m', 1.25, 3, NULL, 0)",
    ],
    8: [
        "INSERT INTO instances(id, name, lease_s, started_at, heartbeat_at) "
        "VALUES (1, 'solo', 5, 0, 0)",
        "INSERT INTO chat_leases(channel, chat_id, instance, since) VALUES ('t', 'c1', 1, 0)",
        "INSERT INTO receivers(channel, instance, since) VALUES ('t', 1, 0)",
    ],
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
        await check_upgraded(store, version)


async def check_upgraded(store: Store, version: int) -> None:
    """A store written at `version` reads back after its upgrade, and takes new writes."""
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
    memory = await store.memory.items("t:u1")
    assert [(n.text, n.used_at) for n in memory] == ([("likes tea", 0)] if version >= 2 else [])
    if version >= 3:
        group = await store.conversations.active("t", "g1", is_private=False)
        said = await store.conversations.history(group.id)
        assert [(m.text, m.speaker) for m in said] == [("hello all", "Bob"), ("hi Bob", None)]
        assert [d.text for d in await store.conversations.undelivered("t", "g1")] == ["hi Bob"]
    if version >= 4:
        assert [g.tool for g in await store.grants.in_chat("t", "g1")] == ["delete"]
        assert (await store.usage.totals("t", "u1", "2026")).tokens == 10
    if version >= 5:
        [queued] = await store.inbox.rows(InboxState.QUEUED, "t", "c1")
        assert [a.name for a in queued.attachments] == ["a.png"]
    if version >= 6:
        assert [s.task for s in await store.schedules.chat_schedules("t", "c1")] == ["news"]
        assert await store.schedules.user_timezone("t", "u1") == "Europe/Paris"
        assert [p.persona for p in await store.chat_settings.all()] == ["a pirate"]
    if version >= 7:
        summary = await store.context.summary(conv.id)
        assert summary is not None and summary.text == "Ann said hi"
        ratio = await store.context.token_ratio("m")
        assert ratio is not None and ratio.ratio == 1.25
    # the writers of earlier user messages were found: forgetting them finds their messages
    ann = await store.ops.forget_user("t", "u1", dry_run=True)
    assert ann.private_chats == (("t", "c1"),) and ann.messages == 3
    assert ann.summaries == (1 if version >= 7 else 0)
    if version >= 3:
        bob = await store.ops.forget_user("t", "u2", dry_run=True)
        assert bob.messages == 2 and bob.private_chats == ()
    # and it takes new writes of the current schema
    await store.conversations.append(conv.id, Message.assistant("two"), deliver="m1")
    assert [d.text for d in await store.conversations.undelivered("t", "c1")] == ["two"]
    assert (await store.ops.status()).schema_version == len(MIGRATIONS)


@pytest.mark.parametrize("contracts", [False, True], ids=["only-adds", "contracts"])
async def test_a_store_from_a_newer_relaybot_runs_when_it_only_added_else_is_refused_untouched(
    tmp_path: Path, contracts: bool
) -> None:
    """Migration 23's marker: a newer relaybot's migrations that only add leave the store to
    this relaybot as it is (a rollback, a rolling upgrade); one that drops or renames says so
    and the store is refused, untouched."""
    path = tmp_path / "future.db"
    write_old_store(path, len(MIGRATIONS))
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
        if contracts:
            db.execute(f"UPDATE schema_compat SET readable_from = {len(MIGRATIONS) + 1}")
    before = path.read_bytes()
    if contracts:
        with pytest.raises(StoreError, match="written by a newer relaybot"):
            async with SqliteStore(path):
                pass
        assert path.read_bytes() == before
        return
    async with SqliteStore(path) as store:
        assert await store.conversations.active("telegram", "42") is not None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1


async def test_status_on_an_older_store_asks_for_the_upgrade_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    write_old_store(path, len(MIGRATIONS) - 1)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="start the daemon of this version once"):
        async with SqliteStore(path, readonly=True):
            pass
    assert path.read_bytes() == before


# -- PostgreSQL: the same numbered migrations in its dialect -----------------------------------


def sqlite_columns(version: int) -> dict[str, set[str]]:
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        for script in MIGRATIONS[:version]:
            db.executescript(script)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: {r[1] for r in db.execute(f"PRAGMA table_info({t})")} for t in tables}


def postgres_columns(server: PostgresServer, database: str) -> dict[str, set[str]]:
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
    database = postgres.new_database(migrated=False).split("/")[3].split("?")[0]
    for version, script in enumerate(PG_MIGRATIONS, start=1):  # one database, step by step
        postgres.psql(script, database)
        assert postgres_columns(postgres, database) == sqlite_columns(version), version


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


@pytest.mark.parametrize("contracts", [False, True], ids=["only-adds", "contracts"])
async def test_a_newer_postgresql_store_runs_when_it_only_added_else_is_refused_untouched(
    postgres: PostgresServer, contracts: bool
) -> None:
    url = postgres.new_database()
    database = url.split("/")[3].split("?")[0]
    postgres.psql(f"UPDATE schema_version SET version = {len(MIGRATIONS) + 1}", database)
    if contracts:
        postgres.psql(f"UPDATE schema_compat SET readable_from = {len(MIGRATIONS) + 1}", database)
        with pytest.raises(StoreError, match="written by a newer relaybot"):
            async with PgStore(url):
                pass
    else:
        async with PgStore(url) as store:
            assert await store.conversations.active("telegram", "42") is not None
    assert postgres.psql("SELECT version FROM schema_version", database) == str(len(MIGRATIONS) + 1)


_IDENTITIES = ("conversations", "messages", "inbox", "notes", "memory", "schedules", "instances")


def write_old_postgres_store(server: PostgresServer, version: int) -> str:
    """A PostgreSQL store as the release of schema `version` left it (its rows, identities
    continuing after them); returns its URL."""
    url = server.new_database(migrated=False)
    database = url.split("/")[3].split("?")[0]
    script = [
        statement
        for number, migration in enumerate(PG_MIGRATIONS[:version], start=1)
        for statement in (migration, *ROWS_BY_VERSION.get(number, []))
    ]
    tables = ", ".join(f"'{table}'" for table in _IDENTITIES)
    script.append(  # the identities continue after the rows, in the tables this version has
        f"""DO $$ DECLARE t text; BEGIN
        FOREACH t IN ARRAY ARRAY[{tables}] LOOP
            IF to_regclass(t) IS NOT NULL THEN
                EXECUTE format('SELECT setval(pg_get_serial_sequence(%L, ''id''), '
                    '(SELECT COALESCE(MAX(id), 0) + 1 FROM %I), false)', t, t);
            END IF;
        END LOOP; END $$"""
    )
    script.append("CREATE TABLE schema_version (version INTEGER)")
    script.append(f"INSERT INTO schema_version VALUES ({version})")
    server.psql(";\n".join(script), database)  # one round trip: psql starts once
    return url


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS)))
async def test_every_earlier_postgresql_version_migrates_and_keeps_its_data(
    postgres: PostgresServer, version: int
) -> None:
    url = write_old_postgres_store(postgres, version)
    async with PgStore(url) as store:
        await check_upgraded(store, version)


async def test_status_on_an_older_postgresql_store_asks_for_the_upgrade_and_changes_nothing(
    postgres: PostgresServer,
) -> None:
    url = write_old_postgres_store(postgres, len(MIGRATIONS) - 1)
    with pytest.raises(StoreError, match="start the daemon of this version once"):
        async with PgStore(url, readonly=True):
            pass
    database = url.split("/")[3].split("?")[0]
    assert postgres.psql("SELECT version FROM schema_version", database) == str(len(MIGRATIONS) - 1)

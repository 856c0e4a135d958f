"""Safe upgrades (issue 34): a store the previous release wrote, with a row in every table,
upgraded by `relaybot migrate` and by the daemon itself; a copy made before, kept until the
next successful start; a failed migration that leaves the store as it was and says how to go
back; a store of a newer relaybot refused untouched; `relaybot migrate --check` saying what an
upgrade would do.

The previous release's schema is version 10. Later migrations (11 and on) are appended as
features land, so the tests compute what to expect from ``MIGRATIONS`` as it is: upgrading from
10 applies whatever comes after it (nothing while 10 is the newest), and from the version just
before the newest, one migration.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks._crash_rig import ROOT, Daemon, Files, wait_for_log, write_files
from engine.store import SqliteStore
from engine.store.postgres import MIGRATIONS as PG_MIGRATIONS
from engine.store.sqlite import MIGRATIONS, backup_path, upgrade_backups
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.postgres import PostgresServer
from tests.test_store_migrations import check_upgraded, write_old_postgres_store, write_old_store
from tools.errors import StoreError

PREVIOUS_RELEASE = 10
VERSIONS = sorted({PREVIOUS_RELEASE, len(MIGRATIONS) - 1})

# Rows for the tables test_store_migrations leaves empty, so that every table holds one.
MORE_ROWS = {
    # 23's one row is its own (readable_from)
    22: ["INSERT INTO mcp_oauth(server, kind, sealed, updated_at) VALUES ('r', 'tokens', 'x', 0)"],
    6: [
        "INSERT INTO schedule_runs(schedule_id, due, state, created_at) VALUES (1, 1, 'done', 0)",
    ],
    9: ["INSERT INTO channel_errors(channel, at, text) VALUES ('t', 0, 'gateway closed')"],
    10: ['UPDATE receivers SET resume = \'{"session": "s1", "seq": 7}\''],
    13: [
        "INSERT INTO access_requests(code, channel, user_id, user_name, username, chat_id, "
        "asked_at, expires_at, state) VALUES ('AB12CD', 't', '9', 'Sam', 'sam', '9', 0, 1, "
        "'pending')",
        "INSERT INTO approved_users(channel, user_id, user_name, approved_by, approved_at) "
        "VALUES ('t', '8', 'Kim', 't:1', 0)",
    ],
    14: [
        "INSERT INTO spend(channel, chat_id, user_id, day, model, requests, nano_usd) "
        "VALUES ('t', '8', '8', '2026-11-26', 'gpt-4o-mini', 1, 150)",
    ],
    15: [
        "INSERT INTO console_links(token_hash, admin, role, created_at, expires_at) "
        "VALUES ('ab', 't:1', 'admin', 0, 1)",
        "INSERT INTO console_sessions(token_hash, admin, role, csrf, created_at, expires_at) "
        "VALUES ('cd', 't:1', 'admin', 'x', 0, 1)",
    ],
    20: ["INSERT INTO channel_error_counts(channel, minute, n) VALUES ('t', 1, 2)"],
}


def write_previous_store(path: Path, version: int) -> None:
    """A store as the release of schema `version` left it, with a row in every table."""
    write_old_store(path, version)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        for number in range(1, version + 1):
            for sql in MORE_ROWS.get(number, []):
                db.execute(sql)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        empty = [t for t in tables if not db.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()]
    assert not empty, f"tables without a row (add one to MORE_ROWS): {empty}"


def dump(path: Path) -> tuple[int, list[str]]:
    """The schema version and every statement that recreates the store's content."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute("PRAGMA user_version").fetchone()[0], list(db.iterdump())


async def relaybot(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


def config_for(tmp_path: Path, storage: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [llm]
            base_url = "http://127.0.0.1:9/v1"
            api_key = "sk-upgrade-0123456789"
            model = "fake-model"

            [storage]
            {storage}
            """
        )
    )
    return path


@pytest.mark.parametrize("version", VERSIONS)
async def test_migrate_check_then_migrate_upgrades_the_previous_store_with_a_copy(
    tmp_path: Path, version: int
) -> None:
    store = tmp_path / "relaybot.db"
    write_previous_store(store, version)
    before = dump(store)
    config = config_for(tmp_path, f'path = "{store}"')

    code, said = await relaybot("migrate", "--check", "-c", str(config))
    assert code == 0, said
    pending = range(version + 1, len(MIGRATIONS) + 1)
    if pending:
        assert f"schema version {version};" in said and f"is {len(MIGRATIONS)}" in said, said
        assert all(f"  {n}:\n" in said for n in pending), said
        assert str(backup_path(store, version)) in said
    else:
        assert "nothing to upgrade" in said, said
    assert dump(store) == before  # --check changes nothing
    assert upgrade_backups(store) == []

    code, said = await relaybot("migrate", "-c", str(config))
    assert code == 0, said
    async with SqliteStore(store) as upgraded:
        await check_upgraded(upgraded, version)
    if pending:
        assert upgrade_backups(store) == [backup_path(store, version)]
        assert dump(backup_path(store, version)) == before  # the store as it was, exactly
    else:
        assert upgrade_backups(store) == []  # nothing to upgrade: no copy


async def test_the_daemon_upgrades_at_start_and_drops_the_copy_at_the_next_start(
    tmp_path: Path,
) -> None:
    """The daemon itself: the start that upgrades keeps the copy (the previous relaybot can
    run on it), the next successful start removes it."""
    version = len(MIGRATIONS) - 1
    async with FakeTelegram() as tg, FakeOpenAI() as llm:
        files: Files = write_files(tmp_path, tg, llm.base_url)
        write_previous_store(files.db, version)
        daemon = Daemon(files, tg)
        try:
            await daemon.start()
            await wait_for_log(files.log, " running (", 30)  # started: settled the store
            assert upgrade_backups(files.db) == [backup_path(files.db, version)]
            assert await daemon.terminate() == 0
            await daemon.start()
            await wait_for_log(files.log, " running (", 30, count=2)
            assert await daemon.terminate() == 0
        finally:
            if daemon.running:
                daemon.kill_now()
                await daemon.wait_dead()
    assert upgrade_backups(files.db) == []
    log = files.log.read_text()
    assert f"upgrading the store from schema version {version} to {len(MIGRATIONS)}" in log
    assert "the copy made before the last upgrade" in log


async def test_a_failed_migration_leaves_the_store_as_it_was_and_says_how_to_go_back(
    tmp_path: Path,
) -> None:
    """Two migrations pending, the second fails: the first is rolled back with it."""
    store = tmp_path / "relaybot.db"
    write_previous_store(store, len(MIGRATIONS))
    before = dump(store)
    newest = len(MIGRATIONS)
    broken = [
        *MIGRATIONS,
        "CREATE TABLE upgraded_once (id INTEGER PRIMARY KEY)",
        "ALTER TABLE upgraded_once ADD COLUMN x TEXT; ALTER TABLE no_such_table ADD COLUMN y TEXT",
    ]
    with pytest.raises(StoreError) as failed:
        async with SqliteStore(store, migrations=broken):
            pass
    said = str(failed.value)
    assert f"from schema version {newest} to {newest + 2} failed at migration {newest + 2}" in said
    assert f"left as it was, at version {newest}" in said
    assert str(backup_path(store, newest)) in said and "To go back" in said
    assert dump(store) == before
    assert dump(backup_path(store, newest)) == before
    async with SqliteStore(store) as same:  # this relaybot still runs on it
        assert await same.schema_version() == newest


@pytest.mark.parametrize("contracts", [False, True], ids=["only-adds", "contracts"])
async def test_a_store_of_a_newer_relaybot_is_run_as_it_is_or_refused_untouched_by_migrate(
    tmp_path: Path, contracts: bool
) -> None:
    """`migrate --check` reads the schema_compat marker as the daemon does: a newer store that
    only added is one this relaybot runs on as it is (status 0: `relaybot rollback` may go back
    to it), one whose newer migration contracts is refused (1); either is left untouched."""
    store = tmp_path / "relaybot.db"
    write_previous_store(store, len(MIGRATIONS))
    with contextlib.closing(sqlite3.connect(store)) as db, db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
        if contracts:
            db.execute(f"UPDATE schema_compat SET readable_from = {len(MIGRATIONS) + 1}")
    before = store.read_bytes()
    config = config_for(tmp_path, f'path = "{store}"')
    for args in (["migrate", "--check"], ["migrate"]):
        code, said = await relaybot(*args, "-c", str(config))
        if contracts:
            assert code == 1 and "written by a newer relaybot" in said, said
        else:
            assert code == 0 and "runs on it as it is; nothing to upgrade" in said, said
    assert store.read_bytes() == before
    assert upgrade_backups(store) == []


async def test_migrate_check_on_postgresql_says_what_would_run_and_changes_nothing(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    version = len(PG_MIGRATIONS) - 1
    url = write_old_postgres_store(postgres, version)
    database = url.split("/")[3].split("?")[0]
    config = config_for(tmp_path, f'url = "{url}"')
    code, said = await relaybot("migrate", "--check", "-c", str(config))
    assert code == 0 and f"  {len(PG_MIGRATIONS)}:\n" in said, said
    assert postgres.psql("SELECT version FROM schema_version", database) == str(version)
    code, said = await relaybot("migrate", "-c", str(config))
    assert code == 0, said
    assert postgres.psql("SELECT version FROM schema_version", database) == str(len(PG_MIGRATIONS))
    newer = len(PG_MIGRATIONS) + 1  # as a newer relaybot that only added leaves it
    postgres.psql(f"UPDATE schema_version SET version = {newer}", database)
    code, said = await relaybot("migrate", "--check", "-c", str(config))
    assert code == 0 and "runs on it as it is" in said, said
    postgres.psql(f"UPDATE schema_compat SET readable_from = {newer}", database)  # contracts
    code, said = await relaybot("migrate", "--check", "-c", str(config))
    assert code == 1 and "written by a newer relaybot" in said, said
    assert postgres.psql("SELECT version FROM schema_version", database) == str(newer)

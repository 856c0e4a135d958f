"""The schema of a PostgreSQL store brought up to this relaybot's, at open.

Migrations (``_schema.MIGRATIONS``) run in one transaction under a transaction-level advisory
lock: instances starting together apply each entry once, the later ones wait and find the schema
current. A database written by a newer relaybot is refused before anything is written; a
read-only look (`relaybot status`) migrates nothing and needs this relaybot's schema.
"""

from __future__ import annotations

import logging

import asyncpg

from engine.store._opening._upgrade import runs_as_it_is
from engine.store.postgres._faults import reason
from engine.store.postgres._schema import MIGRATIONS
from tools.errors import StoreError

log = logging.getLogger("engine.store")

_MIGRATION_LOCK = 0x72656C6179  # "relay": the advisory lock key migrations run under


def refuse_other_versions(version: int, where: str, readable: int | None = None) -> None:
    """A read-only look needs this relaybot's schema, or a newer one it runs on (`readable`:
    the store's readable_from): nothing is migrated here."""
    if version > len(MIGRATIONS) and not runs_as_it_is(version, len(MIGRATIONS), readable):
        raise StoreError(
            f"the store at {where} has schema version {version}, newer than this "
            f"relaybot knows ({len(MIGRATIONS)}): it was written by a newer relaybot"
        )
    if version < len(MIGRATIONS):
        raise StoreError(
            f"the store at {where} has schema version {version}, older than this "
            f"relaybot's ({len(MIGRATIONS)}): start the daemon of this version once to "
            "upgrade it (`relaybot migrate --check` says what that does), then try again"
        )


async def migrate(pool: asyncpg.Pool, where: str) -> None:
    """Every migration the database lacks, in one transaction under the advisory lock."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER)")
        version = await conn.fetchval("SELECT version FROM schema_version")
        if version is None:
            await conn.execute("INSERT INTO schema_version(version) VALUES (0)")
            version = 0
        if version > len(MIGRATIONS) and await runs_on(conn, version):
            return
        if version > len(MIGRATIONS):
            raise StoreError(
                f"the store at {where} has schema version {version}, newer than this "
                f"relaybot knows ({len(MIGRATIONS)}): it was written by a newer relaybot. "
                "Upgrade relaybot (every instance); the database was left untouched."
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            try:
                await conn.execute(script)
            except asyncpg.PostgresError as exc:  # the transaction is rolled back: all of it
                raise StoreError(
                    f"upgrading the store at {where} from schema version {version} to "
                    f"{len(MIGRATIONS)} failed at migration {number} ({reason(exc)}). The "
                    f"database was left as it was, at version {version}: the upgrade is one "
                    "transaction. To go back, run the relaybot you ran before (every "
                    "instance): it runs on the database as it is."
                ) from exc
            await conn.execute("UPDATE schema_version SET version = $1", number)
            log.info("store migrated to schema version %d", number)


async def readable_from(conn: asyncpg.Connection) -> int | None:
    """The oldest schema whose relaybot runs on this store (migration 23); None: not said."""
    try:
        async with conn.transaction():  # a savepoint: a missing table fails only this
            value = await conn.fetchval("SELECT min(readable_from) FROM schema_compat")
    except asyncpg.PostgresError:
        return None
    return None if value is None else int(value)


async def runs_on(conn: asyncpg.Connection, version: int) -> bool:
    """Whether this relaybot runs on a store of the newer schema `version` as it is."""
    if not runs_as_it_is(version, len(MIGRATIONS), await readable_from(conn)):
        return False
    log.info(
        "the store's schema (%d) is newer than this relaybot's (%d); what came since only adds, "
        "so this relaybot runs on it as it is",
        version,
        len(MIGRATIONS),
    )
    return True

"""The PostgreSQL backend (asyncpg: imported only by a configuration that asks for it): its
:class:`~engine.store._db.Db`, its schema's migrations, what instances sharing it keep there
(:class:`PgCluster`), and the copy of a SQLite store into it (`relaybot migrate-store`)."""

from engine.store.postgres._cluster import PgCluster
from engine.store.postgres._copy import Copied, copy_store, target_rows
from engine.store.postgres._db import PgDb
from engine.store.postgres._schema import MIGRATIONS
from engine.store.postgres._store import PgStore

__all__ = ["MIGRATIONS", "Copied", "PgCluster", "PgDb", "PgStore", "copy_store", "target_rows"]

"""The PostgreSQL backend: one database that any number of relaybot instances share.

``async with PgStore(url) as store:`` connects (migrating the schema under a lock) and closes.
It has every part the SQLite backend has, the same code over another Db, plus
:attr:`PgStore.cluster`, what several instances need to share the work (engine/work/_cluster.py).
"""

from __future__ import annotations

import logging

from engine.store._composed import ComposedStore
from engine.store.postgres._cluster import PgCluster
from engine.store.postgres._db import PgDb


class _FloorRetries(logging.Filter):
    """asyncpg's pool logs a traceback at every attempt to reconnect its idle connection while
    the server is away (1, 2, 4 … 60 s apart): a storm in a restart. What matters is said
    already, once: the cluster's heartbeat that the database is unreachable and when it is back,
    a refused write by the part that tried it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to restore the pool connection floor")


_FLOOR_RETRIES = _FloorRetries()


class PgStore(ComposedStore):
    db: PgDb

    def __init__(self, url: str, *, max_connections: int = 20, readonly: bool = False) -> None:
        super().__init__(PgDb(url, max_connections=max_connections, readonly=readonly))
        self.where = self.db.where
        self.cluster = PgCluster(self.db, self.incarnation)
        logging.getLogger("asyncpg.pool").addFilter(_FLOOR_RETRIES)  # once: the same filter

"""The PostgreSQL backend: one database that any number of relaybot instances share.

``async with PgStore(url) as store:`` connects (migrating the schema under a lock) and closes.
It has every part the SQLite backend has, the same code over another Db, plus
:attr:`PgStore.cluster`, what several instances need to share the work (engine/work/_cluster.py).
"""

from __future__ import annotations

from engine.store._composed import ComposedStore
from engine.store.postgres._cluster import PgCluster
from engine.store.postgres._db import PgDb


class PgStore(ComposedStore):
    db: PgDb

    def __init__(self, url: str, *, max_connections: int = 20, readonly: bool = False) -> None:
        super().__init__(PgDb(url, max_connections=max_connections, readonly=readonly))
        self.where = self.db.where
        self.cluster = PgCluster(self.db)

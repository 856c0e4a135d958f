"""Kept for importers of the old module path (bot/_operate.py, bot/_migrate.py, tests): the
PostgreSQL backend is engine._store.postgres now."""

from engine._store.postgres import PgStore

__all__ = ["PgStore"]

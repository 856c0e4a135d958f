"""Kept for importers of the old module path (bot/_migrate.py): the SQLite backend is
engine._store.sqlite now."""

from engine._store.sqlite import SqliteStore

__all__ = ["SqliteStore"]

"""Kept for importers of the old module path (bot/_migrate.py): the copy of a SQLite store into
PostgreSQL is engine._store.postgres's now."""

from engine._store.postgres import Copied, copy_store, target_rows

__all__ = ["Copied", "copy_store", "target_rows"]

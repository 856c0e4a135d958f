"""Kept for an importer of the old module path (engine/metrics.py imports ChannelError): the
rows, reports and state machines live in ``_rows``, ``_reports`` and ``_states`` now; import
them from engine._store."""

from engine._store._reports import ChannelError

__all__ = ["ChannelError"]

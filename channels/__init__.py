"""Chat platform adapters: Telegram, Discord and the terminal.

Each adapter implements :class:`engine.Channel` (the contract the engine defines); this package
imports the engine's contract and never the other way round.
"""

from channels._split import split_text

__all__ = ["split_text"]

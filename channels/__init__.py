"""Chat platform adapters: Telegram, Discord and the terminal.

Each adapter implements :class:`engine.Channel` (the contract the engine defines); this package
imports the engine's public surface and never the other way round. The adapters are packages
(``channels.telegram``, ``channels.discord``) and a module (``channels.console``), each imported
only when it is used: this surface holds what needs no platform library (the config sections,
secrets, the Discord shard layout for ``doctor``), so reading a config imports neither
python-telegram-bot nor discord.py.

Shared by the adapters (private): ``_prompt`` how a confirmation is laid out, ``_shown`` long
texts kept up to date part by part, ``_split`` Markdown cut into parts, ``_config`` and
``_receiving_config`` the config sections, and ``_discord_shards`` Discord's shard arithmetic.
"""

from channels._config import DiscordConfig, TelegramConfig, read_secret, resolve_secret
from channels._discord_shards import shard_layout
from channels._split import split_text

__all__ = [
    "DiscordConfig",
    "TelegramConfig",
    "read_secret",
    "resolve_secret",
    "shard_layout",
    "split_text",
]

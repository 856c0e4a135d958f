"""The Discord adapter, on discord.py: :class:`DiscordChannel` and its ``[discord]`` config
section.

Inside (private): ``_channel`` the adapter's lifecycle and receiving parts; ``_client``
discord.py's client (start-up, events, shards); ``_handlers`` messages, slash commands and
presses handed to the engine; ``_inbound`` deciding what is for the bot (pure); ``_outbox``
sends and edits; ``_answers`` the engine's answers, as components v2 cards (``_layout``) or
content; ``_buttons`` the answer and menu buttons; ``_commands`` the slash commands;
``_interactions`` answering within Discord's three seconds; ``_guilds`` servers and their
admins; ``_reactions`` a turn's status on the user's message; ``_media`` files; ``_trace``
failed requests counted. The shard arithmetic, which needs no discord.py, is
``channels._discord_shards``.
"""

from channels._config import DEFAULT_DISCORD_API as DEFAULT_API_BASE_URL
from channels._config import DiscordConfig
from channels.discord._channel import DiscordChannel

__all__ = ["DEFAULT_API_BASE_URL", "DiscordChannel", "DiscordConfig"]

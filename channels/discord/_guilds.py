"""Discord servers as the adapter reads them: who may change a chat's /settings, and the servers
discord.py has not cached (Discord sends a server's details to a new gateway session, not to one
resumed from another instance), read over REST and kept a while."""

from __future__ import annotations

import time
from collections.abc import Callable

import discord

from channels._config import DiscordConfig

_GUILD_KEPT_S = 600.0  # a server fetched over REST is fetched again after this
_GUILDS_KEPT = 256  # at most this many kept; past it they are all fetched again


class Guilds:
    """Server lookups through the client `client()` gives (None: the channel is not running)."""

    def __init__(self, config: DiscordConfig, client: Callable[[], discord.Client | None]) -> None:
        self._config = config
        self._client = client
        self._kept: dict[int, tuple[float, discord.Guild]] = {}

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """Manage Server in the channel's guild, or a role named in `admin_roles`."""
        client = self._client()
        if client is None:
            return False
        channel = client.get_channel(int(chat_id))
        guild = getattr(channel, "guild", None)
        if channel is None:  # not cached: a DM, or a server on a shard resumed here
            home = getattr(await client.fetch_channel(int(chat_id)), "guild", None)
            guild = None if home is None else await self.uncached(home.id)
        if guild is None:
            return False
        member = guild.get_member(int(user_id)) or await guild.fetch_member(int(user_id))
        if member.guild_permissions.manage_guild:
            return True
        wanted = set(self._config.admin_roles)
        return any(str(role.id) in wanted or role.name in wanted for role in member.roles)

    async def uncached(self, guild_id: int) -> discord.Guild:
        """A server discord.py has not cached, from REST; kept for _GUILD_KEPT_S."""
        now = time.monotonic()
        kept = self._kept.get(guild_id)
        if kept is not None and now - kept[0] < _GUILD_KEPT_S:
            return kept[1]
        client = self._client()
        if client is None:
            raise RuntimeError("the Discord channel is not running")
        guild = await client.fetch_guild(guild_id)
        if len(self._kept) > _GUILDS_KEPT:
            self._kept.clear()
        self._kept[guild_id] = (now, guild)
        return guild

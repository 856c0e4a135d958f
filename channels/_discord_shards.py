"""Discord shards: which shards this instance connects, and the pace of their IDENTIFYs.

One gateway connection serves at most 2,500 servers; past that Discord wants the bot sharded:
server ``g`` is served by shard ``(g >> 22) % shard_count``, and ``[discord] shard_ids`` picks the
shards this instance connects (discord.py's ``AutoShardedClient`` runs them in one process), so
instances with disjoint ids split the servers. DMs always arrive on shard 0. Sending needs no
gateway, so any instance answers in any channel.

discord.py waits 5 s before every IDENTIFY but the first, whatever Discord allows; Discord's
actual rule (``session_start_limit.max_concurrency`` from ``GET /gateway/bot``) is one IDENTIFY
per 5 s per bucket, the bucket being ``shard_id % max_concurrency``. :class:`IdentifyPacer` keeps
that rule instead, so shards in different buckets connect at once and a shard that reconnects
long after its last IDENTIFY does not wait for nothing.

Nothing here imports discord.py: ``relaybot doctor`` describes the layout without it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

IDENTIFY_WINDOW_S = 5.0  # Discord's window for one IDENTIFY per bucket


def shard_of(guild_id: int, shard_count: int) -> int:
    """The shard Discord sends a server's events on."""
    return (guild_id >> 22) % shard_count


def layout(shard_count: int | None, shard_ids: Sequence[int] | None) -> str:
    """This instance's shards in words, for the log and `doctor`."""
    if shard_count is None:
        return "as many shards as Discord recommends, all in this instance"
    if shard_ids is None or sorted(shard_ids) == list(range(shard_count)):
        return f"all {shard_count} shard(s) in this instance"
    ids = ", ".join(map(str, sorted(shard_ids)))
    rest = shard_count - len(shard_ids)
    return f"shard(s) {ids} of {shard_count} in this instance ({rest} left to other instances)"


class IdentifyPacer:
    """One IDENTIFY per bucket per 5 s (see the module docstring)."""

    def __init__(self, max_concurrency: int = 1) -> None:
        self.max_concurrency = max_concurrency  # updated from GET /gateway/bot
        self._last: dict[int, float] = {}  # bucket → loop time of its last IDENTIFY
        self._locks: dict[int, asyncio.Lock] = {}

    async def wait(self, shard_id: int) -> None:
        bucket = shard_id % max(1, self.max_concurrency)
        async with self._locks.setdefault(bucket, asyncio.Lock()):
            loop = asyncio.get_running_loop()
            last = self._last.get(bucket)
            if last is not None and (delay := last + IDENTIFY_WINDOW_S - loop.time()) > 0:
                await asyncio.sleep(delay)  # Discord's rate limit, not a wait for an event
            self._last[bucket] = loop.time()

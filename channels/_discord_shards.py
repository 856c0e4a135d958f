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

With several instances on one store, each shard is a receiving part (``discord/shard-N``) held
by one instance at a time (the engine's receiving leases): an instance takes first the shards its
``shard_ids`` names and takes the others when their instance dies, resuming that instance's
gateway :class:`Session`, so Discord sends again what nobody received meanwhile.

Nothing here imports discord.py: ``relaybot doctor`` describes the layout without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine import Claim, Receiver

log = logging.getLogger("channels.discord")

IDENTIFY_WINDOW_S = 5.0  # Discord's window for one IDENTIFY per bucket


def shard_of(guild_id: int, shard_count: int) -> int:
    """The shard Discord sends a server's events on."""
    return (guild_id >> 22) % shard_count


def shard_layout(shard_count: int | None, shard_ids: Sequence[int] | None) -> str:
    """This instance's shards in words, for the log and `doctor`."""
    if shard_count is None:
        return "as many shards as Discord recommends, all in this instance"
    if shard_ids is None or sorted(shard_ids) == list(range(shard_count)):
        return f"all {shard_count} shard(s) in this instance"
    ids = ", ".join(map(str, sorted(shard_ids)))
    rest = shard_count - len(shard_ids)
    return (
        f"shard(s) {ids} of {shard_count} in this instance ({rest} to other instances, taken "
        "over while theirs is down)"
    )


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


# -- several instances -----------------------------------------------------------------------

WHOLE = "discord"  # the lease of the whole gateway (shard_count unset: one instance has it all)
_SHARD_LEASE = re.compile(r"discord/shard-(\d+)")


def receivers(shard_count: int | None, shard_ids: Sequence[int] | None) -> tuple[Receiver, ...]:
    """The receiving parts instances share: the whole gateway, or each shard of
    ``shard_count``, this instance's own when ``shard_ids`` names it (every instance's alike
    when unset). A shard whose instance dies goes to another instance, and comes back."""
    if shard_count is None:
        return (Receiver(WHOLE),)
    if shard_ids is None:
        return tuple(Receiver(f"discord/shard-{i}") for i in range(shard_count))
    own = set(shard_ids)
    return tuple(
        Receiver(f"discord/shard-{i}", Claim.OWN if i in own else Claim.FALLBACK)
        for i in range(shard_count)
    )


def shard_of_lease(lease: str) -> int | None:
    """The shard a lease names (None: the whole gateway)."""
    match = _SHARD_LEASE.fullmatch(lease)
    return int(match[1]) if match else None


@dataclass(frozen=True, slots=True)
class Session:
    """A shard's gateway session, as another process resumes it: Discord then sends again the
    events since ``sequence`` (a session stays resumable a while after its connection drops,
    unless it was closed with 1000 or 1001). ``token`` tells the bot token it was made with
    (:func:`fingerprint`; empty when an older release saved it): one made with another token is
    not resumed."""

    session_id: str
    sequence: int | None
    gateway: str  # the resume_gateway_url READY gave
    shard_count: int
    token: str = ""


def fingerprint(token: str) -> str:
    """A token's mark, kept with its sessions: tells tokens apart, reveals nothing of one."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def encode(sessions: Mapping[int, Session]) -> str | None:
    if not sessions:
        return None
    return json.dumps(
        {
            str(i): [s.session_id, s.sequence, s.gateway, s.shard_count, s.token]
            for i, s in sessions.items()
        },
        sort_keys=True,
    )


def decode(text: str | None) -> dict[int, Session]:
    """Sessions as :func:`encode` wrote them; none if the text is not that (logged)."""
    if not text:
        return {}
    try:
        return {int(i): _session(*fields) for i, fields in json.loads(text).items()}
    except (ValueError, TypeError, AttributeError):
        log.warning("discord: ignored gateway sessions that could not be read")
        return {}


def _session(sid: str, seq: int | None, url: str, count: int, token: str = "") -> Session:
    return Session(str(sid), None if seq is None else int(seq), str(url), int(count), str(token))

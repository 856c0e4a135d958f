"""Answering a Discord interaction within its limits: Discord takes a first answer within three
seconds, once. :func:`within_ack_budget` defers when the engine takes longer; an interaction it
is too late to answer is logged, not raised (:func:`too_late_to_answer`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import discord

log = logging.getLogger("channels.discord")
T = TypeVar("T")

_TOO_LATE = {10062, 40060}  # Discord's codes: unknown interaction, already acknowledged


async def within_ack_budget(
    interaction: discord.Interaction,
    work: Coroutine[Any, Any, T],
    *,
    thinking: bool,
    ephemeral: bool,
    budget_s: float,
) -> T:
    """Await ``work``; if it outlasts the ack budget, defer the interaction meanwhile so Discord's
    three seconds are always met."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.wait_for(asyncio.shield(task), budget_s)
    except TimeoutError:
        await interaction.response.defer(thinking=thinking, ephemeral=ephemeral)
        return await task


@contextlib.contextmanager
def too_late_to_answer() -> Iterator[None]:
    """An interaction Discord no longer takes an answer to (answered already, or older than its
    three seconds: sent again when a shard's session was resumed elsewhere) is logged, not
    raised: what the engine did with it stands."""
    try:
        yield
    except discord.HTTPException as exc:
        if exc.code not in _TOO_LATE:
            raise
        log.info("discord: an interaction could not be answered any more (%s)", exc.text)

"""Gateway messages received and not yet stored: where a restart must have Discord start again.

Discord numbers a session's events (``s``) and, on RESUME, sends again every event after the
sequence the client names. discord.py keeps the sequence it has *received*; a process that dies
with a message received but not yet in the inbox (handed to the engine in its own task, or held
while the store refuses: ``_held``) would name a sequence past it, and the message would be lost.
So the sequence kept for a restart (``_client.Client.sessions``) is the one before the oldest
message of the session not yet settled: settled is stored, or deliberately dropped (not for the
bot, refused, failed). Every other event is settled when it is received (an interaction sent
again is too old to answer: ``Client.replayed``). Messages are known by their id, and their
sequence read from the shard's connection while discord.py dispatches them: it sets the
sequence and parses the event in one synchronous step (discord.py 2.7,
``DiscordWebSocket.received_message``).

What a message received twice costs (a resume from a point before it): nothing, the inbox takes
a message once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _At:
    shard: int
    session: str
    sequence: int


class Unstored:
    """The messages not settled yet, each with where its session received it."""

    def __init__(self) -> None:
        self._pending: dict[str, _At] = {}  # message id → where it was received

    def __len__(self) -> int:
        return len(self._pending)

    def received(self, message_id: str, shard: int, session: str, sequence: int) -> None:
        self._pending[message_id] = _At(shard, session, sequence)

    def settled(self, message_id: str) -> None:
        """The message is stored, or dropped on purpose: a restart needs it no more."""
        self._pending.pop(message_id, None)

    def resume_from(self, shard: int, session: str, received: int | None) -> int | None:
        """The sequence a restart resumes `shard`'s `session` from, having `received` events
        up to that one: before its oldest message not settled."""
        waiting = [
            at.sequence
            for at in self._pending.values()
            if at.shard == shard and at.session == session
        ]
        return min(waiting) - 1 if waiting else received

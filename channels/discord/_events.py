"""What discord.py's client hands the adapter: the :class:`Events` it calls with gateway messages,
slash commands and button presses. The client depends on this small contract and never on the
adapter (``_channel`` makes the client, so the arrows point one way)."""

from __future__ import annotations

from typing import Protocol, cast

import discord

from engine import Choice, Command


class Events(Protocol):
    """The adapter's side of the client's events (``_handlers.Handlers``)."""

    async def on_message(self, message: discord.Message, me: discord.ClientUser) -> bool:
        """Store `message` or drop it; True when it is held until the store takes it (the
        adapter settles it then: see ``_unstored``)."""
        ...

    async def on_command(
        self, interaction: discord.Interaction, command: Command, text: str = ""
    ) -> None: ...

    async def on_action(self, interaction: discord.Interaction, action: str) -> None: ...

    async def on_decision(
        self, interaction: discord.Interaction, confirmation_id: str, choice: Choice
    ) -> None: ...


def events_of(interaction: discord.Interaction) -> Events:
    """The events of the client `interaction` came through (a button's callback is given only
    the interaction)."""
    events = getattr(interaction.client, "events", None)
    if events is None:
        raise RuntimeError("the interaction did not come through relaybot's Discord client")
    return cast(Events, events)

"""Discord's buttons: the answer buttons on a confirmation prompt and the buttons under a
command's reply, as :class:`discord.ui.DynamicItem`s whose state lives in the custom_id, so they
keep working after a restart.

A press on an answer button reaches the engine only when its custom_id is one of the buttons on
the message it was pressed on: discord.py's DynamicItem dispatch checks that, and the presses it
drops are answered by :func:`answer_dropped_press` without the engine (a press that raced the edit
removing the buttons gets "no longer works"; a custom_id the message does not carry is refused
and logged).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import discord

from channels.discord._events import events_of
from channels.discord._inbound import DECISION_RE, PressOn, press_on
from channels.discord._interactions import too_late_to_answer
from engine import ACTION_PATTERN, Choice, Reply, encode_action, encode_decision
from engine.i18n import N_, translator

log = logging.getLogger("channels.discord")

STALE_BUTTON = N_("This button no longer works.")
FOREIGN_BUTTON = N_("This button does not belong to this message; nothing was done.")


class DecisionButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=DECISION_RE):
    """One answer button; custom_id ``rb:<id>:<choice>`` carries everything a press needs."""

    def __init__(self, confirmation_id: str, choice: Choice, language: str | None = None) -> None:
        super().__init__(
            discord.ui.Button(
                label=choice.text(language),
                style=discord.ButtonStyle.danger
                if choice.approves
                else discord.ButtonStyle.secondary,
                custom_id=encode_decision(confirmation_id, choice),
            )
        )
        self.confirmation_id = confirmation_id
        self.choice = choice

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> DecisionButton:
        return cls(match["id"], Choice(match["choice"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        await events_of(interaction).on_decision(interaction, self.confirmation_id, self.choice)


class ActionButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=ACTION_PATTERN):
    """A button under a command's reply; custom_id ``ra:<action>``."""

    def __init__(self, label: str, action: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=label[:80],
                style=discord.ButtonStyle.secondary,
                custom_id=encode_action(action),
            )
        )
        self.action = action

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ActionButton:
        return cls(getattr(item, "label", None) or "", match["action"])

    async def callback(self, interaction: discord.Interaction) -> None:
        await events_of(interaction).on_action(interaction, self.action)


def menu(reply: Reply) -> discord.ui.View | None:
    """A command reply's buttons as a view (None: no buttons, or none any more)."""
    if not reply.buttons:
        return None
    view = discord.ui.View(timeout=None)
    for button in reply.buttons[:25]:  # Discord's limit per message
        view.add_item(ActionButton(button.label, button.action))
    return view


async def answer_dropped_press(interaction: discord.Interaction) -> None:
    """Answer a press on an answer button that discord.py's DynamicItem dispatch drops (its
    custom_id is not on the message), without asking the engine."""
    if interaction.type is not discord.InteractionType.component or not interaction.message:
        return
    data: Any = interaction.data or {}
    custom_id = str(data.get("custom_id", ""))
    if DECISION_RE.fullmatch(custom_id) is None:
        return
    where = press_on(interaction.message, custom_id)
    if where is PressOn.SHOWN:
        return  # DecisionButton.callback has it
    if where is PressOn.FOREIGN:
        log.warning(
            "discord: user %s pressed a button that message %s does not carry; refused",
            interaction.user.id,
            interaction.message.id,
        )
    answer = STALE_BUTTON if where is PressOn.CLOSED else FOREIGN_BUTTON
    said = translator(str(interaction.locale.value)).gettext(answer)
    with too_late_to_answer():
        await interaction.response.send_message(said, ephemeral=True)

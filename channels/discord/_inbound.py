"""Discord events as the engine sees them, decided without side effects.

Each function answers one "is this for us?" question from the event alone, the way a
python-telegram-bot filter does, so the adapter's handlers only act: :func:`inbound` (is a
gateway message for the bot, and what did it say), :func:`guild_allowed`, and :func:`press_on`
(is a pressed button one that the message really carries).
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Collection

import discord

from channels._config import DiscordConfig
from channels.discord._media import attachments_of
from engine import DECISION_PATTERN, InboundMessage, Quote

log = logging.getLogger("channels.discord")

DECISION_RE = re.compile(DECISION_PATTERN)


def inbound(
    message: discord.Message,
    me: discord.ClientUser,
    config: DiscordConfig,
    listens: Callable[[str], bool] = lambda chat_id: False,
    bot_roles: Collection[int] = (),
    *,
    own_thread: bool = False,
) -> InboundMessage | None:
    """The engine's view of ``message``, or None when it is not for the bot. `listens(chat)`
    says whether a channel asked for every message (/settings reply mode all); `bot_roles`
    are the bot's own roles in a server discord.py has not cached (see DiscordChannel);
    `own_thread`: the message is in a thread the bot started, so it is for the bot (see
    ``_threads``)."""
    if message.author.id == me.id or message.webhook_id is not None:
        return None  # another bot's message goes on: the engine decides ([access] bots)
    if message.type not in (discord.MessageType.default, discord.MessageType.reply):
        return None
    guild_id = message.guild.id if message.guild else getattr(message.channel, "guild_id", None)
    if guild_id is not None and not guild_allowed(guild_id, config):
        log.debug("discord: message in guild %s, not in allowed_guilds; ignored", guild_id)
        return None
    resolved = message.reference.resolved if message.reference else None
    replied_to_me = isinstance(resolved, discord.Message) and resolved.author.id == me.id
    # People often pick the bot's own role (same name) from the mention list: that counts too.
    my_roles = [r.id for r in message.role_mentions if r.tags and r.tags.bot_id == me.id]
    my_roles += [r for r in message.raw_role_mentions if r in bot_roles and r not in my_roles]
    mentioned = replied_to_me or bool(my_roles) or any(u.id == me.id for u in message.mentions)
    mentioned = mentioned or own_thread
    if (
        guild_id is not None
        and not mentioned
        and config.respond_in_guilds == "mentions"
        and not listens(str(message.channel.id))
    ):
        return None
    mention = "|".join([rf"<@!?{me.id}>", *(f"<@&{role_id}>" for role_id in my_roles)])
    text = re.sub(rf"(?:{mention})\s*", "", message.content).strip()
    attachments = attachments_of(message)
    if not text and not attachments:
        return None
    return InboundMessage(
        channel="discord",
        chat_id=str(message.channel.id),
        user_id=str(message.author.id),
        user_name=message.author.display_name,
        username=message.author.name,
        text=text,
        message_id=str(message.id),
        is_private=guild_id is None,
        mentioned=mentioned,
        reply_to=str(message.reference.message_id) if message.reference else None,
        attachments=attachments,
        quote=quote_of(resolved, me) if isinstance(resolved, discord.Message) else None,
        from_bot=message.author.bot,
    )


def quote_of(replied: discord.Message, me: discord.ClientUser) -> Quote:
    """What a message replies to, as Discord resolved it: its author, text and attachments."""
    kinds = tuple(a.kind for a in attachments_of(replied))
    return Quote(
        replied.author.display_name, replied.content, kinds, by_bot=replied.author.id == me.id
    )


def guild_allowed(guild_id: int, config: DiscordConfig) -> bool:
    return not config.allowed_guilds or str(guild_id) in config.allowed_guilds


class PressOn(enum.Enum):
    """What a pressed confirmation button's custom_id is to the message it was pressed on."""

    SHOWN = "shown"  # one of the message's buttons: a real press
    CLOSED = "closed"  # the message has no answer buttons left: a press that raced their removal
    FOREIGN = "foreign"  # not among the message's buttons, which are there: a forged payload


def press_on(message: discord.Message, custom_id: str) -> PressOn:
    """Where `custom_id` stands on `message` (as Discord sent it with the interaction)."""
    shown = {getattr(c, "custom_id", None) or "" for c in _components(message)}
    if custom_id in shown:
        return PressOn.SHOWN
    if any(DECISION_RE.fullmatch(i) for i in shown):
        return PressOn.FOREIGN
    return PressOn.CLOSED


def _components(message: discord.Message) -> list[discord.Component]:
    found: list[discord.Component] = []
    for component in message.components:
        found.extend(getattr(component, "children", [component]))
    return found

"""A turn's status on the user's message in Telegram (``[telegram] status_reactions``).

setMessageReaction with one emoji, or none to take the status off. A bot may set only the emoji
Telegram lists for reactions (python-telegram-bot's ``ReactionEmoji``), one per message, each
setting replacing the last: 👀 while a turn works on the message, nothing once it is answered,
😱 when the turn failed (Telegram's list has no ⚠️). In an album Telegram puts the reaction on
the album's first message. In a group whose admins restrict reactions Telegram refuses it; the
engine logs that once per chat (engine/chat/_turns/_reactions.py).
"""

from __future__ import annotations

from telegram import Bot
from telegram.constants import ReactionEmoji

from channels.telegram._topics import place
from engine import Reaction

EMOJI: dict[Reaction, ReactionEmoji | None] = {
    Reaction.WORKING: ReactionEmoji.EYES,
    Reaction.DONE: None,
    Reaction.FAILED: ReactionEmoji.FACE_SCREAMING_IN_FEAR,
}


async def set_status(bot: Bot, chat_id: str, message_id: str, reaction: Reaction) -> None:
    """Show `reaction` on message `message_id` of the engine chat `chat_id` (a topic's too:
    a message id is its chat's)."""
    emoji = EMOJI[reaction]
    await bot.set_message_reaction(
        place(chat_id)[0], int(message_id), [emoji] if emoji is not None else []
    )

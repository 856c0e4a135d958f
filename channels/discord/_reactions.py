"""A turn's status on the user's message in Discord (``[discord] status_reactions``).

👀 while a turn works on the message (PUT ``/channels/{id}/messages/{id}/reactions/👀/@me``), taken
off once it is answered (DELETE of the same), ⚠️ when the turn failed (put first, then 👀 taken
off). A message keeps several reactions, so a status says which of the bot's own to add and to
remove; taking off one the bot never put is no error. A mention that started a thread
(``reply_in_thread``) is a message of the thread's channel, and the thread has its id
(``_threads``): its status goes on it there. Without the Add Reactions permission Discord answers
403, which the engine logs once per chat.
"""

from __future__ import annotations

import discord

from channels.discord._threads import Threads
from engine import Reaction

WORKING = "👀"
FAILED = "\N{WARNING SIGN}\N{VARIATION SELECTOR-16}"  # ⚠️


async def set_status(
    client: discord.Client, threads: Threads, chat_id: str, message_id: str, reaction: Reaction
) -> None:
    """Show `reaction` on the user's message `message_id` of chat `chat_id`."""
    me = client.user
    if me is None:
        raise RuntimeError("the Discord client is not logged in")
    where = chat_id
    if chat_id == message_id:  # the message a thread was started on: in the thread's channel
        where = str(await threads.parent_of(chat_id) or chat_id)
    message = client.get_partial_messageable(int(where)).get_partial_message(int(message_id))
    if reaction is Reaction.WORKING:
        await message.add_reaction(WORKING)
        return
    if reaction is Reaction.FAILED:
        await message.add_reaction(FAILED)
    await message.remove_reaction(WORKING, me)

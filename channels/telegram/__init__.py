"""The Telegram adapter, on python-telegram-bot: :class:`TelegramChannel` and its ``[telegram]``
config section.

Inside (private): ``_channel`` the adapter's lifecycle and the engine's calls; ``_handlers`` the
updates handed to the engine; ``_updates`` matching an update (pure); ``_polling`` and
``_webhook`` the two ways updates arrive; ``_outbox`` sends and edits; ``_answers`` the engine's
answers, as rich messages (``_rich``: Markdown as rich blocks) or HTML; ``_markup`` confirmation
prompts and command menus with their buttons; ``_format`` and ``_markdown`` Telegram HTML;
``_media`` files; ``_topics`` forum topics as conversations; ``_reactions`` a turn's status on
the user's message; ``_drafts`` answers streamed as drafts in private chats; ``_http`` the Bot
API requests over aiohttp.
"""

from channels._config import TelegramConfig
from channels.telegram._channel import TelegramChannel

__all__ = ["TelegramChannel", "TelegramConfig"]

"""What carries buttons in Telegram: a confirmation prompt's message and its answer buttons, and a
command reply's menu. The prompt's layout (what is shown, what goes as a file) is the shared
``channels._prompt``; this module supplies Telegram's HTML, its way of counting and its limits."""

from __future__ import annotations

import time

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from channels._prompt import PromptMessage, attached_note, in_words, lay_out, who_and_when
from channels.telegram._format import CAPTION_LIMIT, TELEGRAM_LIMIT, escape, visible_len
from engine import ConfirmationPrompt, Reply, encode_action, encode_decision


def prompt_message(prompt: ConfirmationPrompt) -> PromptMessage:
    """The summary, the action as a code block and who may answer until when; when the action
    does not fit, the text says it is attached and the action is the attachment."""
    language = prompt.language
    expires = in_words(prompt.expires_at - time.time(), language)
    footer = who_and_when(prompt.user_name, expires, language)

    def render(summary: str, details: str | None, attached: bool) -> str:
        lines = [escape(summary)]
        if details is not None:
            lines.append(f"<pre>{escape(details)}</pre>")
        if attached:
            lines.append(f"<b>{escape(attached_note(language))}</b>")
        lines.append(f"<i>{escape(footer)}</i>")
        return "\n\n".join(lines)

    return lay_out(prompt, render, visible_len, limit=TELEGRAM_LIMIT, attached_limit=CAPTION_LIMIT)


def answer_buttons(prompt: ConfirmationPrompt) -> InlineKeyboardMarkup:
    """The prompt's choices in one row; each button's callback_data says the prompt and choice."""
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(
                    c.text(prompt.language), callback_data=encode_decision(prompt.id, c)
                )
                for c in prompt.choices
            ]
        ]
    )


def menu(reply: Reply) -> InlineKeyboardMarkup:
    """A command reply's buttons, one per row (an empty keyboard removes them)."""
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(b.label, callback_data=encode_action(b.action))]
            for b in reply.buttons
        ]
    )

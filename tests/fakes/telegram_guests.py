"""Guest Mode in the fake Telegram (Bot API 10.0): the bot is @mentioned in a chat it is not a
member of. A mixin of :class:`FakeTelegram`.

- `inject_guest_message(chat, user, text)` queues ``Update.guest_message``: the user's message,
  with a fresh ``guest_query_id``; the chat is one the bot cannot send to (sendMessage there
  answers 403, as for a chat the bot is not in).
- answerGuestQuery answers one query once (again: 400 ``QUERY_ID_INVALID``, as for an unknown
  one) with an InlineQueryResult (checked against the spec like every request); an article's
  text is shown in the chat as an inline message (`guest_answers`: query id → text, after edits).
- editMessageText with ``inline_message_id`` edits such a message (and its keyboard:
  `guest_buttons`); `press_guest_answer(query, user, data)` presses one of its buttons.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.telegram_server import FakeTelegram


class GuestMode:
    """The guest side of :class:`FakeTelegram` (a mixin: it uses the fake's helpers)."""

    def _init_guests(self) -> None:
        self.guest_chats: set[int] = set()  # chats the bot was summoned to, not a member of
        self.guest_answers: dict[str, str] = {}  # query id → the answer's text, after edits
        self._guest_queries: dict[str, int] = {}  # query id → chat, while unanswered
        self._inline: dict[str, str] = {}  # inline_message_id → query id
        self._guest_ids = itertools.count(1)
        self.guest_buttons: dict[str, dict[str, Any]] = {}  # query id → its answer's keyboard

    def inject_guest_message(
        self: FakeTelegram, chat_id: int, user_id: int, text: str, *, first_name: str | None = None
    ) -> dict[str, Any]:
        """Queue a mention of the bot in `chat_id`, where it is not a member."""
        query = f"gq{next(self._guest_ids)}"
        self.guest_chats.add(chat_id)
        self._guest_queries[query] = chat_id
        update = self.inject_message(
            chat_id, user_id, text, chat_type="group", first_name=first_name
        )
        update["guest_message"] = update.pop("message") | {"guest_query_id": query}
        return update

    def guest_refusal(self, params: dict[str, Any]) -> None:
        """Sends to a chat the bot is only a guest in are refused (it is not a member)."""
        from tests.fakes.telegram_server import ApiError

        if int(params.get("chat_id", 0) or 0) in self.guest_chats:
            raise ApiError(403, "Forbidden: bot is not a member of the group chat")

    async def _api_answerGuestQuery(self, params: dict[str, Any]) -> dict[str, Any]:
        from tests.fakes.telegram_server import ApiError, parse_html

        query = str(params["guest_query_id"])
        if self._guest_queries.pop(query, None) is None:
            raise ApiError(400, "Bad Request: QUERY_ID_INVALID")
        content = params["result"].get("input_message_content") or {}
        text = str(content.get("message_text", ""))
        if str(content.get("parse_mode", "")).upper() == "HTML":
            text = parse_html(text)
        inline = f"inl{query}"
        self._inline[inline] = query
        self.guest_answers[query] = text
        if markup := params["result"].get("reply_markup"):
            self.guest_buttons[query] = markup
        return {"inline_message_id": inline}

    def edit_inline(self, params: dict[str, Any]) -> bool:
        from tests.fakes.telegram_server import ApiError

        query = self._inline.get(str(params["inline_message_id"]))
        if query is None:
            raise ApiError(400, "Bad Request: MESSAGE_ID_INVALID")
        text = self._visible(params)  # type: ignore[attr-defined]
        markup = params.get("reply_markup") or None
        if markup is not None and not markup.get("inline_keyboard"):
            markup = None  # an empty keyboard is no keyboard
        if text == self.guest_answers[query] and markup == self.guest_buttons.get(query):
            raise ApiError(400, "Bad Request: message is not modified")
        self.guest_answers[query] = text
        if markup is None:
            self.guest_buttons.pop(query, None)
        else:
            self.guest_buttons[query] = markup
        return True

    def press_guest_answer(self: FakeTelegram, query: str, user_id: int, data: str) -> None:
        """Queue a press on a button of the inline message that answered guest query `query`:
        Telegram's callback query names the inline message, not a chat."""
        inline = next(i for i, q in self._inline.items() if q == query)
        press = {
            "id": str(next(self._callback_ids)),
            "from": self._user(user_id, None, None),
            "chat_instance": f"ci{query}",
            "inline_message_id": inline,
            "data": data,
        }
        self.inject_raw({"callback_query": press})

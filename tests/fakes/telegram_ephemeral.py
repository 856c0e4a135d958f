"""Ephemeral messages in the fake Telegram (Bot API 10.2/10.3): a message in a group that only
one member sees. The fake's spec overlay (``spec/telegram-bot-api-10.3-ephemeral.overlay.json``)
lists the names; this module plays the behaviour, as a mixin of :class:`FakeTelegram`.

- sendMessage or sendDocument with ``ephemeral_message_parameters`` (``receiver_user_id``) in a
  group keeps the message apart from the chat's own (`ephemerals`, by chat, receiver and
  ``ephemeral_message_id``) and answers a Message carrying ``ephemeral_message_id`` and
  ``receiver_user`` (its ``message_id`` is 0: it has no place in the chat's history). A private
  chat answers 400 (``BOT_NOT_ADMIN``, as reported for the real API), and so does every chat in
  `ephemeral_refused` (a group or server that does not take them): then nothing is kept.
- editEphemeralMessageText / editEphemeralMessageCaption (a document's) /
  editEphemeralMessageReplyMarkup / deleteEphemeralMessage address one by (chat, receiver, id);
  an unknown one is "message to edit not found".
- `press_ephemeral(chat, user, id, data)` queues a press on a button of one: only its receiver
  sees it, so a press by anyone else is a test's mistake (ValueError).
- `seen_by(chat, user)` is what one member sees of the bot in a group: the public messages and
  their own ephemerals, in order; `ephemeral_texts(chat, user)` only the latter.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.telegram_server import FakeTelegram

NOT_FOR_PRIVATE = "Bad Request: BOT_NOT_ADMIN"
REFUSED = "Bad Request: EPHEMERAL_MESSAGES_FORBIDDEN"


class EphemeralMessages:
    """The ephemeral side of :class:`FakeTelegram` (a mixin: it uses the fake's helpers)."""

    def _init_ephemerals(self) -> None:
        self.ephemerals: dict[tuple[int, int, int], dict[str, Any]] = {}
        self.ephemeral_refused: set[int] = set()  # chats that answer 400 to an ephemeral

    def ephemeral_of(self: FakeTelegram, params: dict[str, Any]) -> int | None:
        """The receiver a send names; raises the API's error where it cannot be sent."""
        from tests.fakes.telegram_server import ApiError

        ephemeral = params.get("ephemeral_message_parameters")
        if not ephemeral:
            return None
        chat_id = int(params["chat_id"])
        if chat_id > 0:
            raise ApiError(400, NOT_FOR_PRIVATE)
        if chat_id in self.ephemeral_refused:
            raise ApiError(400, REFUSED)
        return int(ephemeral["receiver_user_id"])

    def keep_ephemeral(
        self: FakeTelegram, msg: dict[str, Any], receiver: int, params: dict[str, Any]
    ) -> dict[str, Any]:
        """`msg` (made by the fake's send) becomes `receiver`'s ephemeral message."""
        chat_id = msg["chat"]["id"]
        eid = msg["message_id"]
        msg |= {
            "message_id": 0,
            "ephemeral_message_id": eid,
            "receiver_user": self._user(receiver, None, None),
        }
        if markup := params.get("reply_markup"):
            msg["reply_markup"] = markup
        self.ephemerals[(chat_id, receiver, eid)] = msg
        return msg

    def _ephemeral(self: FakeTelegram, params: dict[str, Any]) -> dict[str, Any]:
        from tests.fakes.telegram_server import ApiError

        key = (
            int(params["chat_id"]),
            int(params["receiver_user_id"]),
            int(params["ephemeral_message_id"]),
        )
        if key not in self.ephemerals:
            raise ApiError(400, "Bad Request: message to edit not found")
        return self.ephemerals[key]

    async def _api_editEphemeralMessageText(self: FakeTelegram, params: dict[str, Any]) -> bool:
        from tests.fakes.telegram_server import ApiError, _set_markup

        msg = self._ephemeral(params)
        if "text" not in msg:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        text = self._visible(params)
        markup = params.get("reply_markup") or None
        if text == msg.get("text") and markup == msg.get("reply_markup"):
            raise ApiError(400, "Bad Request: message is not modified")
        msg["text"] = text
        _set_markup(msg, markup)
        return True

    async def _api_editEphemeralMessageCaption(self: FakeTelegram, params: dict[str, Any]) -> bool:
        from tests.fakes.telegram_server import ApiError, _set_markup

        msg = self._ephemeral(params)
        if "document" not in msg:
            raise ApiError(400, "Bad Request: there is no caption in the message to edit")
        msg["caption"] = self._caption(params)
        _set_markup(msg, params.get("reply_markup") or None)
        return True

    async def _api_editEphemeralMessageReplyMarkup(
        self: FakeTelegram, params: dict[str, Any]
    ) -> bool:
        from tests.fakes.telegram_server import _set_markup

        _set_markup(self._ephemeral(params), params.get("reply_markup"))
        return True

    async def _api_deleteEphemeralMessage(self: FakeTelegram, params: dict[str, Any]) -> bool:
        msg = self._ephemeral(params)
        chat, receiver = msg["chat"]["id"], msg["receiver_user"]["id"]
        del self.ephemerals[(chat, receiver, msg["ephemeral_message_id"])]
        return True

    # control side ----------------------------------------------------------------------------
    def press_ephemeral(
        self: FakeTelegram, chat_id: int, user_id: int, ephemeral_id: int, data: str
    ) -> dict[str, Any]:
        """Queue `user_id`'s press on a button of their ephemeral message `ephemeral_id`."""
        msg = self.ephemerals.get((chat_id, user_id, ephemeral_id))
        if msg is None:
            raise ValueError(f"user {user_id} sees no ephemeral message {ephemeral_id}")
        query = {
            "id": str(next(self._callback_ids)),
            "from": self._user(user_id, None, None),
            "chat_instance": f"ci{chat_id}",
            "message": msg | {"date": int(time.time())},
            "data": data,
        }
        return self.inject_raw({"callback_query": query})

    def ephemeral_texts(self, chat_id: int, user_id: int) -> list[str]:
        """The text (or caption) of every ephemeral message `user_id` has from the bot in
        `chat_id`, after edits, in order."""
        return [
            m.get("text", m.get("caption", ""))
            for (c, u, _), m in sorted(self.ephemerals.items())
            if (c, u) == (chat_id, user_id)
        ]

    def seen_by(self: FakeTelegram, chat_id: int, user_id: int) -> list[str]:
        """What `user_id` sees of the bot in the group `chat_id`: its public messages and
        their own ephemerals, in the order they were sent."""
        mine = {
            eid: m for (c, u, eid), m in self.ephemerals.items() if (c, u) == (chat_id, user_id)
        }
        public = {mid: m for (c, mid), m in self.messages.items() if c == chat_id}
        shown = sorted({**public, **mine}.items())  # one counter numbers both
        return [m.get("text", m.get("caption", "")) for _, m in shown]

"""A fake Telegram Bot API on 127.0.0.1, for driving the real python-telegram-bot in tests.

    async with FakeTelegram() as tg:
        builder.token(tg.token).base_url(tg.base_url)
        tg.inject_message(chat_id=1, user_id=1, text="hi")
        call = await tg.wait_for_call("sendMessage")

For crash tests (all opt-in): `send_faults = SendFaults(rate)` answers a random share of sends
with 429 (retry_after) or 502; `hold(method)` keeps the next matching call waiting, before or
after it is carried out, until the test releases it; `answer_listeners` are told of each answer
once its bytes are handed to the socket, so a test can act (e.g. kill the bot) right after the
bot could have read it.

Every request is first checked against the Bot API's own description (`telegram_spec`): an
unknown method, a parameter or field the API does not have, a missing required one, a value of the
wrong type, an over-long caption or callback data are refused with 400 (404 for the method), so a
request the real API would refuse or ignore fails the test that made it.

It answers the methods the adapter uses, keeps the messages the bot sent (so edits can say "not
modified" and tests can read the visible text), checks HTML like Telegram does, and records every
call. Faults: `fail_next(method, ...)`, `down = True` (502 for everything), `bad_entities = True`
(the next HTML text is rejected with "can't parse entities"), `deaf_polls = True` (a getUpdates
gets keep-alive spaces, never an answer). `on_get_updates(offset)` is called
as each getUpdates arrives, before the updates it confirms are dropped.

Documents: sendDocument, sendPhoto and sendVoice (Ogg/Opus only) keep the file
(`document(chat_id, message_id)` gives it back) and its caption; editMessageCaption edits it.
`parse_html` also applies Telegram's nesting rules.

Files users send: `upload_photo(*sizes)`, `upload_document(...)`, `upload_voice(...)` keep the
bytes and return the JSON to pass to `inject_message(photo=..., document=..., voice=...)`;
getFile answers with a file_path (and refuses files over 20 MB, as Telegram does) and
`GET /file/bot<token>/<file_path>` serves the bytes; `downloads` lists the file_ids fetched.
getChatMember answers "administrator" for the users in `chat_admins[chat]`, else "member".

Topics, as the Bot API has them: `open_topic(chat, name)` makes the chat a forum (a supergroup
with ``is_forum``, or a private chat with topics) and opens a topic there; its id is that of its
opening service message (``forum_topic_created``). `inject_message(..., topic=id)` sends a user's
message in it: ``message_thread_id`` and ``is_topic_message`` set, and, when it replies to nothing,
the opening message as its ``reply_to_message``, as Telegram does. Sends (sendMessage,
sendDocument, sendPhoto, sendChatAction) take ``message_thread_id``: in a chat without topics, or
naming no open topic, Telegram answers "message thread not found"; a message sent without one
goes to General. `topic_texts(chat, topic)` is what the bot shows in a topic (None: General).
Replies: `inject_message(..., reply_to_message=id)` carries the message replied to (the bot's, or
a user's injected earlier) as Telegram does, and `quote="..."` the part of it the user picked.

Reactions, as the Bot API has them: setMessageReaction takes at most one reaction from a bot,
an emoji of Telegram's list for reactions (`REACTION_EMOJI`; anything else is REACTION_INVALID,
as is one the chat's admins left out of `chat_reactions[chat]`), on a message of the chat
(else MESSAGE_ID_INVALID), or on an album's first message when it names any part of it; an
empty or missing list takes the bot's reaction off.
`reactions(chat, message_id)` is the bot's reaction on a message now ([] or [emoji]).

Drafts (sendMessageDraft): private chats only (a group answers "TEXTDRAFT_PEER_INVALID"), a
non-zero draft_id, 0-4096 characters, a topic's message_thread_id checked as for sends; each is
recorded in `drafts` (chat, draft_id, text) and leaves no message. `drafts_supported = False`
plays a Bot API server from before drafts (404 "Not Found").

Webhooks: setWebhook / deleteWebhook / getWebhookInfo, and while a webhook is set the queued
updates are POSTed to it as Telegram does (getUpdates then answers 409); `webhook` controls and
records that side (tests/fakes/telegram_webhook.py).
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes import telegram_spec
from tests.fakes.telegram_webhook import FakeWebhook

BOT_ID = 7000000001
BOT_USERNAME = "relay_test_bot"
TOKEN = "7000000001:AAFakeTokenForTests_0123456789abcdefXY"  # shaped like a real one

# Form values PTB sends as raw strings; everything else arrives JSON-encoded.
_STRING_KEYS = frozenset({"text", "parse_mode", "callback_query_id", "action", "caption", "url"})
_ALLOWED_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre"}
    | {"tg-spoiler", "span", "blockquote", "tg-emoji"}
)
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z-]*)((?:\s[^<>]*)?)>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")
_MENTION = re.compile(r"@\w{5,32}")
# The emoji a bot may react with (the Bot API's ReactionTypeEmoji).
REACTION_EMOJI = frozenset(
    "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 "
    "🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 "
    "❤️‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 "
    "🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 "
    "😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 "
    "🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂️ 🤷 🤷‍♀️ "
    "😡".split()
)
_COMMAND = re.compile(r"^/\w+(@\w+)?")


@dataclass(slots=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float  # loop time when the request arrived
    status: int = 200  # HTTP status of the answer
    answered: bool = False  # status is final


@dataclass(slots=True, eq=False)
class _Waiter:
    matches: Callable[[Call], bool]
    remaining: int
    future: asyncio.Future[Call]


class ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after


@dataclass(slots=True)
class SendFaults:
    """A share (`rate`) of the calls of `methods` fails, drawn with `seed`: 429 with
    `retry_after`, or 502 (nothing sent). `injected` counts them by status."""

    rate: float
    seed: int = 0
    retry_after: int = 1
    statuses: tuple[int, ...] = (429, 502)
    methods: frozenset[str] = frozenset({"sendMessage"})
    injected: Counter[int] = field(default_factory=Counter)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw(self, method: str) -> ApiError | None:
        if method not in self.methods or self._rng.random() >= self.rate:
            return None
        status = self._rng.choice(self.statuses)
        self.injected[status] += 1
        retry_after = self.retry_after if status == 429 else None
        return ApiError(status, _describe(status, retry_after), retry_after)


@dataclass(slots=True, eq=False)
class Hold:
    """The next call of `method` matching `predicate` waits here (see FakeTelegram.hold)."""

    method: str
    predicate: Callable[[dict[str, Any]], bool]
    carried_out: bool  # True: the call takes effect first, only its answer waits
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    call: Call | None = None
    _deliver: asyncio.Future[bool] = field(
        init=False, repr=False, default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def release(self, deliver: bool = True) -> None:
        """Let the call go on. `deliver=False` on a call not carried out yet answers it 502,
        so it never takes effect (a send lost on the way)."""
        if not self._deliver.done():
            self._deliver.set_result(deliver)


def parse_html(text: str) -> str:
    """Telegram's HTML check: allowed tags, proper nesting, known entities; returns the text."""
    stack: list[str] = []
    out: list[str] = []
    pos = 0
    for m in _TAG.finditer(text):
        out.append(_check_text(text[pos : m.start()]))
        closing, name = m[1], m[2].lower()
        if name not in _ALLOWED_TAGS:
            raise ApiError(
                400, f"Bad Request: can't parse entities: Unsupported start tag {name!r}"
            )
        if not closing:
            _check_nesting(stack, name)
            stack.append(name)
        elif not stack or stack.pop() != name:
            raise ApiError(400, f"Bad Request: can't parse entities: Unmatched end tag {name!r}")
        pos = m.end()
    out.append(_check_text(text[pos:]))
    if stack:
        raise ApiError(400, f"Bad Request: can't parse entities: Unclosed start tag {stack[-1]!r}")
    return "".join(out)


_CODE_TAGS = frozenset({"code", "pre"})
_QUOTE_TAGS = frozenset({"blockquote"})
_LINK_TAGS = frozenset({"a"})


def _check_nesting(open_tags: list[str], name: str) -> None:
    """Telegram's nesting rules: nothing inside code or pre (but pre's own code), no blockquote
    or pre inside a blockquote, no link or code inside a link."""
    inner = {"strong": "b", "em": "i", "ins": "u", "strike": "s", "del": "s"}.get(name, name)
    if any(t in _CODE_TAGS for t in open_tags) and not (
        open_tags[-1:] == ["pre"] and name == "code"
    ):
        raise ApiError(400, f"Bad Request: can't parse entities: {inner!r} inside code")
    if set(open_tags) & _QUOTE_TAGS and inner in {"blockquote", "pre"}:
        raise ApiError(400, f"Bad Request: can't parse entities: {inner!r} inside a blockquote")
    if set(open_tags) & _LINK_TAGS and inner in {"a", "code", "pre", "blockquote"}:
        raise ApiError(400, f"Bad Request: can't parse entities: {inner!r} inside a link")


def _check_text(chunk: str) -> str:
    if "<" in chunk or ">" in chunk:
        raise ApiError(400, "Bad Request: can't parse entities: Unexpected character '<' or '>'")
    if "&" in _ENTITY.sub("", chunk):
        raise ApiError(400, "Bad Request: can't parse entities: Unsupported entity")
    return html.unescape(chunk)


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class FakeTelegram:
    """The Bot API side (aiohttp) plus a control side for tests."""

    def __init__(self, token: str = TOKEN, port: int = 0) -> None:
        self.token = token
        self.port = port
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}  # (chat, id) → Message JSON
        self.commands: list[dict[str, Any]] = []
        self.localized_commands: dict[str, list[dict[str, Any]]] = {}  # by language_code
        self.user_languages: dict[int, str] = {}  # user id → the language_code their app sends
        self.chat_admins: dict[int, set[int]] = {}  # chat -> the users getChatMember calls admins
        self.down = False
        # While set, a getUpdates is answered with headers and then a keep-alive space every
        # 0.5 s, forever: connected, but deaf (only a watchdog of the caller ends it).
        self.deaf_polls = False
        self.bad_entities = False
        self.on_get_updates: Callable[[int | None], None] | None = None
        self.send_faults: SendFaults | None = None
        self.answer_listeners: list[Callable[[Call, Any], None]] = []  # (call, result or None)
        self._holds: list[Hold] = []
        self._faults: dict[str, list[tuple[int, int | None]]] = {}
        self._documents: dict[tuple[int, int], tuple[str, bytes]] = {}  # (chat, id) → file
        self._files: dict[str, tuple[str, bytes]] = {}  # file_id → (file_path, content)
        self._file_ids = itertools.count(1)
        self.downloads: list[str] = []  # file_ids whose content was fetched, in order
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._callback_ids = itertools.count(1)
        self._wakeup = asyncio.Event()  # replaced on every injection; long polls wait on it
        self._closing = False
        self._waiters: list[_Waiter] = []
        self._runner: web.AppRunner | None = None
        self.webhook = FakeWebhook(lambda: self._updates)  # see telegram_webhook.py
        self.topics: dict[int, dict[int, str]] = {}  # forum chat → its open topics (id → name)
        self.sent_by_users: dict[tuple[int, int], dict[str, Any]] = {}  # what replies can quote
        self._reactions: dict[tuple[int, int], list[str]] = {}  # (chat, id) → the bot's reaction
        self.chat_reactions: dict[int, set[str]] = {}  # chat → the reactions its admins allow
        self.drafts: list[tuple[int, int, str]] = []  # (chat, draft_id, text), in order
        self.drafts_supported = True  # False: a Bot API server without sendMessageDraft

    # lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_route("POST", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.1
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True
        self._wakeup.set()
        await self.webhook.aclose()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # control side ----------------------------------------------------------------------------
    def fail_next(self, method: str, status: int = 429, retry_after: int | None = 1) -> None:
        """Answer the next call of `method` with an error (429 carries `retry_after`)."""
        self._faults.setdefault(method, []).append((status, retry_after))

    def open_topic(
        self, chat_id: int, name: str = "Topic", *, chat_type: str = "supergroup"
    ) -> int:
        """Open a topic in `chat_id` (which becomes a forum); returns its message_thread_id."""
        topics = self.topics.setdefault(chat_id, {})
        opening = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chat(chat_id, chat_type, None),
            "from": self._user(1, None, "Admin"),
            "forum_topic_created": {"name": name, "icon_color": 7322096},
            "is_topic_message": True,
        }
        opening["message_thread_id"] = opening["message_id"]
        topics[opening["message_id"]] = name
        self.sent_by_users[(chat_id, opening["message_id"])] = opening
        return int(opening["message_id"])

    def topic_texts(self, chat_id: int, topic: int | None) -> list[str]:
        """Visible text (or caption) of every message the bot sent in a topic of `chat_id` (None:
        General, or a chat without topics), in order."""
        return [
            m.get("text", m.get("caption", ""))
            for (c, _), m in sorted(self.messages.items())
            if c == chat_id and m["from"]["id"] == BOT_ID and m.get("message_thread_id") == topic
        ]

    def inject_raw(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue `update` as is (its update_id is assigned when missing)."""
        update.setdefault("update_id", next(self._update_ids))
        self._updates.append(update)
        self.webhook.kick()
        self._wakeup.set()
        self._wakeup = asyncio.Event()
        return update

    def inject_message(
        self,
        chat_id: int,
        user_id: int,
        text: str | None = None,
        *,
        chat_type: str = "private",
        username: str | None = None,
        first_name: str | None = None,
        entities: list[dict[str, Any]] | None = None,
        reply_to_message: int | None = None,
        caption: str | None = None,
        photo: bool | list[dict[str, Any]] = False,
        sticker: bool | dict[str, Any] = False,
        edited: bool = False,
        document: dict[str, Any] | None = None,
        voice: dict[str, Any] | None = None,
        media_group_id: str | None = None,
        topic: int | None = None,
        quote: str | None = None,
        forwarded_from: str | None = None,
    ) -> dict[str, Any]:
        """Queue a user's message; returns the update. Mention and command entities are added
        the way Telegram does when `entities` is not given; `forwarded_from` makes it a message
        the user forwarded from someone (a hidden user of that name)."""
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chat(chat_id, chat_type, first_name),
            "from": self._user(user_id, username, first_name),
        }
        if user_id in self.user_languages:
            msg["from"]["language_code"] = self.user_languages[user_id]
        if text is not None:
            msg["text"] = text
            msg["entities"] = entities if entities is not None else _auto_entities(text)
        if caption is not None:
            msg["caption"] = caption
            msg["caption_entities"] = _auto_entities(caption)
        if isinstance(photo, list):
            msg["photo"] = photo
        elif photo:
            msg["photo"] = [{"file_id": "p1", "file_unique_id": "u1", "width": 9, "height": 9}]
        for key, value in (("document", document), ("voice", voice)):
            if value is not None:
                msg[key] = value
        if media_group_id is not None:
            msg["media_group_id"] = media_group_id
        if forwarded_from is not None:
            msg["forward_origin"] = {
                "type": "hidden_user",
                "date": msg["date"],
                "sender_user_name": forwarded_from,
            }
        if isinstance(sticker, dict):
            msg["sticker"] = sticker
        elif sticker:
            msg["sticker"] = {
                "file_id": "s1",
                "file_unique_id": "s1",
                "type": "regular",
                "width": 9,
                "height": 9,
                "is_animated": False,
                "is_video": False,
            }
        if topic is not None:
            if topic not in self.topics.get(chat_id, {}):
                raise ValueError(f"no topic {topic} in chat {chat_id}: open_topic first")
            msg["message_thread_id"] = topic
            msg["is_topic_message"] = True
            if reply_to_message is None:  # Telegram: the topic's opening message
                msg["reply_to_message"] = self.sent_by_users[(chat_id, topic)]
        if reply_to_message is not None:
            replied = self.messages.get((chat_id, reply_to_message))
            replied = replied or self.sent_by_users.get((chat_id, reply_to_message))
            if replied is not None:  # Telegram does not nest replies
                replied = {k: v for k, v in replied.items() if k != "reply_to_message"}
            msg["reply_to_message"] = replied or {
                "message_id": reply_to_message,
                "date": msg["date"],
                "chat": msg["chat"],
            }
            if quote is not None:  # the part of it the user picked
                msg["quote"] = {"text": quote, "position": 0}
        self.sent_by_users[(chat_id, msg["message_id"])] = msg  # a later reply may quote it
        return self.inject_raw({"edited_message" if edited else "message": msg})

    def inject_callback(
        self, chat_id: int, user_id: int, message_id: int, data: str, *, username: str | None = None
    ) -> dict[str, Any]:
        """Queue a press on a button of the bot's message `message_id`."""
        message = self.messages.get((chat_id, message_id)) or {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": self._chat(chat_id, "private", None),
        }
        query = {
            "id": str(next(self._callback_ids)),
            "from": self._user(user_id, username, None)
            | (
                {"language_code": self.user_languages[user_id]}
                if user_id in self.user_languages
                else {}
            ),
            "chat_instance": f"ci{chat_id}",
            "message": message,
            "data": data,
        }
        return self.inject_raw({"callback_query": query})

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        *,
        timeout: float = 5,
        count: int = 1,
        status: int | None = None,
    ) -> Call:
        """The `count`-th answered call of `method` (past or future) matching `predicate` (on
        its params) and `status`. A long poll counts as answered when it arrives."""
        pred = predicate or (lambda _: True)

        def matches(call: Call) -> bool:
            return (
                call.method == method
                and call.answered
                and (status is None or call.status == status)
                and pred(call.params)
            )

        seen = [c for c in self.calls if matches(c)]
        if len(seen) >= count:
            return seen[count - 1]
        fut: asyncio.Future[Call] = asyncio.get_running_loop().create_future()
        entry = _Waiter(matches, count - len(seen), fut)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def chat_texts(self, chat_id: int) -> list[str]:
        """Visible text (or caption) of every message the bot sent to `chat_id` (after edits), in
        order."""
        return [
            m.get("text", m.get("caption", ""))
            for (c, _), m in sorted(self.messages.items())
            if c == chat_id
        ]

    # crash tests: holds and answer listeners -------------------------------------------------
    def hold(
        self,
        method: str,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        *,
        carried_out: bool = False,
    ) -> Hold:
        """Keep the next matching call of `method` waiting until `Hold.release()`: before it
        takes effect, or (`carried_out`) after it took effect, with its answer withheld."""
        held = Hold(method, predicate or (lambda _: True), carried_out)
        self._holds.append(held)
        return held

    def unhold(self, held: Hold, *, deliver: bool = True) -> None:
        """Let a held call go on (see `Hold.release`), or drop the hold if no call reached it."""
        if held in self._holds:
            self._holds.remove(held)
        held.release(deliver)

    async def _wait_at_hold(self, call: Call, *, carried_out: bool) -> None:
        held = next(
            (
                h
                for h in self._holds
                if h.carried_out == carried_out
                and h.method == call.method
                and h.predicate(call.params)
            ),
            None,
        )
        if held is None:
            return
        self._holds.remove(held)
        held.call = call
        held.arrived.set()
        if not await held._deliver and not carried_out:
            raise ApiError(502, "Bad Gateway")

    async def _answer_then_tell(
        self, request: web.Request, response: web.Response, call: Call, result: Any
    ) -> None:
        """Write the answer now (the handler returns it already sent), then tell the listeners."""
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            pass  # the bot is gone: the answer never reached it
        for listener in list(self.answer_listeners):
            listener(call, result if call.status == 200 else None)

    # Bot API side ----------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        call = Call(method, await _read_params(request), asyncio.get_running_loop().time())
        self.calls.append(call)
        result: Any = None
        try:
            handler = self._route(call, request.match_info["token"])
            if method == "getUpdates":
                self._answered(call)  # a long poll is seen when it arrives
                if self.deaf_polls:
                    return await self._deaf(request)
            await self._wait_at_hold(call, carried_out=False)
            result = await handler(call.params)
            await self._wait_at_hold(call, carried_out=True)
            response = web.json_response({"ok": True, "result": result})
        except ApiError as exc:
            call.status = exc.status
            response = _error(exc)
        if not call.answered:
            self._answered(call)
        if self.answer_listeners:
            await self._answer_then_tell(request, response, call, result)
        return response

    async def _deaf(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        while not self._closing:
            await response.write(b" ")  # leading whitespace: valid JSON, never complete
            await asyncio.sleep(0.5)
        return response

    def _route(self, call: Call, token: str) -> Callable[[dict[str, Any]], Any]:
        if token != self.token:
            raise ApiError(401, "Unauthorized")
        if self.down:
            raise ApiError(502, "Bad Gateway")
        if self.send_faults is not None and (fault := self.send_faults.draw(call.method)):
            raise fault
        if faults := self._faults.get(call.method):
            status, retry_after = faults.pop(0)
            raise ApiError(status, _describe(status, retry_after), retry_after)
        try:
            telegram_spec.check(call.method, call.params)
        except telegram_spec.SpecError as exc:
            raise ApiError(exc.status, exc.description) from None
        handler = getattr(self, f"_api_{call.method}", None)
        if handler is None:
            raise ApiError(404, "Not Found")
        return handler

    def _answered(self, call: Call) -> None:
        call.answered = True
        for waiter in list(self._waiters):
            if not waiter.future.done() and waiter.matches(call):
                waiter.remaining -= 1
                if waiter.remaining == 0:
                    waiter.future.set_result(call)
                    self._waiters.remove(waiter)

    async def _api_getMe(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Relay",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "has_topics_enabled": any(chat > 0 for chat in self.topics),  # in private chats
        }

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook.url:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                           "use deleteWebhook to delete the webhook first")  # fmt: skip
        offset = int(params.get("offset") or 0)
        if self.on_get_updates is not None:
            self.on_get_updates(offset or None)
        if offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        allowed = params.get("allowed_updates") or None

        def pending() -> list[dict[str, Any]]:
            ups = [u for u in self._updates if not allowed or any(k in u for k in allowed)]
            return ups[: int(params.get("limit") or 100)]

        deadline = asyncio.get_running_loop().time() + float(params.get("timeout") or 0)
        while not (found := pending()) and not self._closing:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                break
        return found

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        msg = self._new_message(chat_id, params) | {"text": self._visible(params)}
        if markup := params.get("reply_markup"):
            msg["reply_markup"] = markup
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        msg = self._stored(params)
        if "text" not in msg:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        text, markup = self._visible(params), params.get("reply_markup") or None
        if markup is not None and not markup.get("inline_keyboard"):
            markup = None  # an empty keyboard is no keyboard
        if text == msg["text"] and markup == msg.get("reply_markup"):
            raise ApiError(400, "Bad Request: message is not modified: specified new message "
                           "content and reply markup are exactly the same")  # fmt: skip
        msg["text"] = text
        _set_markup(msg, markup)
        return msg

    async def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> dict[str, Any]:
        msg = self._stored(params)
        _set_markup(msg, params.get("reply_markup"))
        return msg

    async def _api_deleteMessage(self, params: dict[str, Any]) -> bool:
        self.messages.pop((int(params["chat_id"]), int(params["message_id"])), None)
        return True

    def reactions(self, chat_id: int, message_id: int) -> list[str]:
        """The bot's reaction on a message now: [] or [emoji]."""
        return list(self._reactions.get((chat_id, message_id), []))

    async def _api_setMessageReaction(self, params: dict[str, Any]) -> bool:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if key not in self.messages and key not in self.sent_by_users:
            raise ApiError(400, "Bad Request: MESSAGE_ID_INVALID")
        if album := self.sent_by_users.get(key, {}).get("media_group_id"):
            key = min(k for k, m in self.sent_by_users.items() if m.get("media_group_id") == album)
        reaction = params.get("reaction") or []
        if len(reaction) > 1:
            raise ApiError(400, "Bad Request: REACTIONS_TOO_MANY")
        emoji = [r.get("emoji") for r in reaction if r.get("type") == "emoji"]
        if len(emoji) != len(reaction):
            raise ApiError(400, "Bad Request: REACTION_INVALID")  # a bot has no custom emoji
        allowed = self.chat_reactions.get(key[0], REACTION_EMOJI)
        if any(e not in REACTION_EMOJI or e not in allowed for e in emoji):
            raise ApiError(400, "Bad Request: REACTION_INVALID")
        self._reactions[key] = emoji
        return True

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        if not self.drafts_supported:
            raise ApiError(404, "Not Found")
        chat_id = int(params["chat_id"])
        if chat_id < 0:
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if not int(params.get("draft_id") or 0):
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        self._topic(chat_id, params)
        text = str(params.get("text", ""))
        if str(params.get("parse_mode", "")).upper() == "HTML":
            text = parse_html(text)
        if _utf16_len(text) > 4096:
            raise ApiError(400, "Bad Request: text is too long")
        self.drafts.append((chat_id, int(params["draft_id"]), text))
        return True

    async def _api_answerCallbackQuery(self, _: dict[str, Any]) -> bool:
        return True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> bool:
        self._topic(int(params["chat_id"]), params)
        return True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> bool:
        commands = list(params.get("commands") or [])
        if language := params.get("language_code"):  # the menu shown to users of that language
            self.localized_commands[str(language)] = commands
        else:
            self.commands = commands
        return True

    async def _api_getMyCommands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        language = params.get("language_code")
        return self.localized_commands.get(str(language), []) if language else self.commands

    async def _api_getChatMember(self, params: dict[str, Any]) -> dict[str, Any]:
        chat, user_id = int(params["chat_id"]), int(params["user_id"])
        user = self._user(user_id, None, None)
        if user_id not in self.chat_admins.get(chat, set()):
            return {"status": "member", "user": user}
        rights = (
            "can_be_edited is_anonymous can_manage_chat can_delete_messages can_manage_video_chats"
            " can_restrict_members can_promote_members can_change_info can_invite_users"
            " can_post_stories can_edit_stories can_delete_stories"
        ).split()
        return {"status": "administrator", "user": user} | dict.fromkeys(rights, False)

    async def _api_setWebhook(self, params: dict[str, Any]) -> bool:
        try:
            self.webhook.set(params)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        return True

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook.delete(bool(params.get("drop_pending_updates")))
        return True

    async def _api_getWebhookInfo(self, _: dict[str, Any]) -> dict[str, Any]:
        return self.webhook.info()

    # files users send ------------------------------------------------------------------------
    def _keep(self, content: bytes, folder: str, suffix: str) -> dict[str, Any]:
        n = next(self._file_ids)
        file_id = f"AgAC{folder}{n:04d}"
        self._files[file_id] = (f"{folder}/file_{n}{suffix}", content)
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(content)}

    def upload_photo(self, *sizes: bytes, tell_size: bool = True) -> list[dict[str, Any]]:
        """A photo in the sizes Telegram makes of it (smallest first), as the `photo` field."""
        out = []
        for i, content in enumerate(sizes, 1):
            size = self._keep(content, "photos", ".jpg") | {"width": 90 * i, "height": 60 * i}
            if not tell_size:
                del size["file_size"]
            out.append(size)
        return out

    def upload_document(self, content: bytes, file_name: str, mime_type: str) -> dict[str, Any]:
        kept = self._keep(content, "documents", "")
        return kept | {"file_name": file_name, "mime_type": mime_type}

    def upload_voice(self, content: bytes, duration: int) -> dict[str, Any]:
        return self._keep(content, "voice", ".oga") | {
            "duration": duration,
            "mime_type": "audio/ogg",
        }

    async def _api_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id"))
        if file_id not in self._files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, content = self._files[file_id]
        if len(content) > 20 * 1024 * 1024:
            raise ApiError(400, "Bad Request: file is too big")
        unique = f"u{file_id}"
        return {"file_id": file_id, "file_unique_id": unique, "file_size": len(content)} | {
            "file_path": path
        }

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        found = [(fid, c) for fid, (p, c) in self._files.items() if p == path]
        if not found:
            return web.Response(status=404)
        self.downloads.append(found[0][0])
        return web.Response(body=found[0][1], content_type="application/octet-stream")

    # documents and photos the bot sends -------------------------------------------------------
    def document(self, chat_id: int, message_id: int) -> tuple[str, bytes]:
        """The file name and content of the document (or photo) on the bot's message."""
        return self._documents[(chat_id, message_id)]

    async def _api_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._sent_file(params, "document")

    async def _api_sendPhoto(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._sent_file(params, "photo")

    async def _api_sendVoice(self, params: dict[str, Any]) -> dict[str, Any]:
        """A voice note: Telegram plays Ogg/Opus as one (it refuses other uploads here)."""
        upload = params.get("voice")
        if isinstance(upload, web.FileField):
            head = upload.file.read(64)
            upload.file.seek(0)
            if not (head.startswith(b"OggS") and b"OpusHead" in head):
                raise ApiError(400, "Bad Request: wrong file type: voice must be OGG/Opus")
        return self._sent_file(params, "voice")

    def _sent_file(self, params: dict[str, Any], field: str) -> dict[str, Any]:
        upload = params.get(field)
        if not isinstance(upload, web.FileField):
            raise ApiError(400, f"Bad Request: there is no {field} in the request")
        chat_id = int(params["chat_id"])
        content = upload.file.read()
        n = len(self._documents) + 1
        kept = {"file_id": f"doc{n}", "file_unique_id": f"udoc{n}", "file_size": len(content)}
        msg = self._new_message(chat_id, params)
        if field == "photo":
            msg["photo"] = [kept | {"width": 90, "height": 60}]
        elif field == "voice":
            msg["voice"] = kept | {"duration": 1, "mime_type": "audio/ogg"}
        else:
            msg["document"] = kept | {"file_name": upload.filename}
        if "caption" in params:
            msg["caption"] = self._caption(params)
        if markup := params.get("reply_markup"):
            msg["reply_markup"] = markup
        self.messages[(chat_id, msg["message_id"])] = msg
        self._documents[(chat_id, msg["message_id"])] = (upload.filename, content)
        return msg

    async def _api_editMessageCaption(self, params: dict[str, Any]) -> dict[str, Any]:
        msg = self._stored(params)
        if "document" not in msg:
            raise ApiError(400, "Bad Request: there is no caption in the message to edit")
        caption, markup = self._caption(params), params.get("reply_markup") or None
        if markup is not None and not markup.get("inline_keyboard"):
            markup = None
        if caption == msg.get("caption") and markup == msg.get("reply_markup"):
            raise ApiError(400, "Bad Request: message is not modified")
        msg["caption"] = caption
        _set_markup(msg, markup)
        return msg

    def _caption(self, params: dict[str, Any]) -> str:
        caption = str(params.get("caption", ""))
        if str(params.get("parse_mode", "")).upper() == "HTML":
            caption = parse_html(caption)
        if _utf16_len(caption) > 1024:
            raise ApiError(400, "Bad Request: message caption is too long")
        return caption

    # helpers ---------------------------------------------------------------------------------
    def _new_message(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any]:
        """A message the bot sends to `chat_id`, in the topic its params name (if any)."""
        topic = self._topic(chat_id, params)
        kind = "private" if chat_id > 0 else "supergroup" if chat_id in self.topics else "group"
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chat(chat_id, kind, None),
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Relay", "username": BOT_USERNAME},
        }
        if topic is not None:
            msg |= {"message_thread_id": topic, "is_topic_message": True}
        return msg

    def _topic(self, chat_id: int, params: dict[str, Any]) -> int | None:
        """The topic a send names; Telegram refuses one the chat does not have."""
        topic = params.get("message_thread_id")
        if topic is None:
            return None
        if int(topic) not in self.topics.get(chat_id, {}):
            raise ApiError(400, "Bad Request: message thread not found")
        return int(topic)

    def _visible(self, params: dict[str, Any]) -> str:
        text = str(params.get("text", ""))
        if str(params.get("parse_mode", "")).upper() == "HTML":
            if self.bad_entities:
                self.bad_entities = False
                raise ApiError(400, "Bad Request: can't parse entities: Can't find end tag")
            text = parse_html(text)
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if _utf16_len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        return text

    def _stored(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if key not in self.messages:
            raise ApiError(400, "Bad Request: message to edit not found")
        return self.messages[key]

    def _chat(self, chat_id: int, chat_type: str, first_name: str | None) -> dict[str, Any]:
        if chat_type == "private":
            return {"id": chat_id, "type": "private", "first_name": first_name or f"U{chat_id}"}
        chat = {"id": chat_id, "type": chat_type, "title": f"Group {chat_id}"}
        if chat_id in self.topics:
            chat |= {"type": "supergroup", "is_forum": True}
        return chat

    @staticmethod
    def _user(user_id: int, username: str | None, first_name: str | None) -> dict[str, Any]:
        user: dict[str, Any] = {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name or f"User{user_id}",
        }
        if username:
            user["username"] = username
        return user


async def _read_params(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        return dict(await request.json())
    params: dict[str, Any] = {}
    for key, value in (await request.post()).items():
        if not isinstance(value, str) or key in _STRING_KEYS:
            params[key] = value
            continue
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


def _error(exc: ApiError) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": exc.status, "description": exc.description}
    if exc.retry_after is not None:
        body["parameters"] = {"retry_after": exc.retry_after}
    return web.json_response(body, status=exc.status)


def _set_markup(msg: dict[str, Any], markup: Any) -> None:
    if markup and markup.get("inline_keyboard"):
        msg["reply_markup"] = markup
    else:
        msg.pop("reply_markup", None)


def _describe(status: int, retry_after: int | None) -> str:
    if status == 429:
        return f"Too Many Requests: retry after {retry_after}"
    return {502: "Bad Gateway", 500: "Internal Server Error"}.get(status, f"Error {status}")


def _auto_entities(text: str) -> list[dict[str, Any]]:
    def entity(kind: str, m: re.Match[str]) -> dict[str, Any]:
        offset = _utf16_len(text[: m.start()])
        return {"type": kind, "offset": offset, "length": _utf16_len(m[0])}

    found = [entity("mention", m) for m in _MENTION.finditer(text)]
    if m := _COMMAND.match(text):
        found.insert(0, entity("bot_command", m))
    return found

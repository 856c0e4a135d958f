"""A fake Discord (REST API + gateway websocket) for tests, good enough for real discord.py 2.x.

One aiohttp server on 127.0.0.1 with an OS-chosen port serves the REST API under ``/api/v10``
and the gateway at ``/gateway`` (``/gateway/resume`` is the ``resume_gateway_url``)::

    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as fake:
        config = DiscordConfig(enabled=True, token=fake.token, api_base_url=fake.api_base_url)
        ...  # start the bot
        await fake.inject_message(CHANNEL, ALICE, "hi", guild_id=GUILD, mentions_bot=True)
        call = await fake.wait_for_call("POST", r"/channels/\\d+/messages")
        assert call.json["content"] == "..."

Gateway: HELLO, IDENTIFY -> READY + GUILD_CREATE (one per guild, with its text channels and the
bot as member), HEARTBEAT -> HEARTBEAT_ACK, RESUME -> the events after the given ``seq`` then
RESUMED, sequence numbers. A wrong token closes with 4004; ``privileged_intents=False`` closes
with 4014 when the client asks for message content.

Sessions, as Discord keeps them: events of a session whose connection is gone are kept, and a
RESUME (on any new connection, from any process) gets those after its ``seq``. A session is
forgotten when its client closes the connection with 1000 or 1001, when ``session_ttl_s`` has
passed since its connection went, on a new IDENTIFY for its shard, and by ``end_sessions()``; a
RESUME of a forgotten or unknown session, or with another token, gets INVALID_SESSION (op 9,
``d: false``), after which the client identifies. ``session_id(shard)`` and ``sequence_of(message
id)`` tell a shard's session and the sequence a message's MESSAGE_CREATE had.

Shards: each IDENTIFY with ``shard: [id, count]`` opens that shard's session (an id outside the
count closes with 4010); a guild's events go to shard ``(guild_id >> 22) % count``, DMs to shard
0. ``guild_on_shard`` makes guild ids for a shard, ``identified()`` lists the IDENTIFYs,
``wait_for_shard`` waits for a shard's session, and ``shards`` / ``max_concurrency`` are what
``GET /gateway/bot`` recommends.

REST: everything discord.py calls at start-up, messages
(create/edit/delete), typing, DM channels, interaction callbacks and webhook follow-ups, and
bulk command sync; a wrong bot token gets 401. Anything else is recorded and answered 404.

Control: ``inject_message`` (returns the message), ``inject_button`` / ``inject_slash`` (return an
:class:`Interaction` that records how and how fast it was answered), ``drop_connection`` (close with
the resumable code 4000), ``deafen`` (the connection stays open, no ACK, no event; HELLO's
``heartbeat_interval_ms`` is a constructor argument), ``calls`` (REST requests in order, each with
the JSON answered), ``await wait_for_call(...)``, ``gateway_ops`` (what the client sent),
``connections`` (the path of every websocket the client opened), ``messages`` (every message as it
is now, edits applied), ``commands`` (synced slash commands per guild, ``None`` for global),
``attachment(message id, file name)`` (a file uploaded with a message, read back), ``add_role`` and
``member_roles`` (what GET /guilds/{id}/members/{id} answers).

Threads, as Discord has them: ``POST /channels/{id}/messages/{id}/threads`` starts a public
thread on a message (its id is the message's; a second start answers 400 with code 160004; a name
must be 1 to 100 characters), announced by THREAD_CREATE; ``create_thread(channel, guild, name,
owner)`` is one a user starts. A thread is a channel: messages are posted to and injected in it
by its id. ``archive_thread(id, locked=)`` archives one: posting unarchives it (THREAD_UPDATE),
unless it is locked (400, code 50083); ``delete_thread(id)`` deletes one (THREAD_DELETE; then 404,
code 10003, for everything sent there). ``threads`` holds each thread's channel JSON.

Reactions: ``PUT`` / ``DELETE /channels/{id}/messages/{id}/reactions/{emoji}/@me`` add and take
off the bot's own reaction (204 both; taking off one not there is no error), on a message of
that channel (else 404, code 10008), with a Unicode emoji or a custom one as ``name:id`` (none
is known here: 400, code 10014); in a channel of ``no_reactions`` the bot lacks Add Reactions
(403, code 50013). A message's JSON carries ``reactions`` as Discord's does;
``bot_reactions(message id)`` lists the bot's own, in the order they were added.

Nonces, as Discord has them: a message created with a ``nonce`` (at most 25 characters, else 400
with code 50035) carries it back; with ``enforce_nonce`` a second create by the bot with a nonce
used in the last ``NONCE_WINDOW_S`` seconds creates nothing and returns the first message.
``on_created``, when set, is awaited after a message is created and before it is answered: a
test can kill the bot there, in the send window (the platform has the message, the bot never
hears so). ``on_request``, when set, is awaited as any REST request arrives, before it is
handled (a test can kill the bot in the middle of its work on an event).

Components: a create or edit is checked against Discord's rules (``discord_components``):
with IS_COMPONENTS_V2 (1 << 15) in ``flags`` the message is its components (no content, text
displays, separators, containers; 40 components and 4,000 characters of text at most), the flag
is never taken off again, and without it only action rows are taken; a refusal is 400 with code
50035. ``refuse_components_v2 = True`` refuses every v2 message (a fallback's test).

Files users send: ``upload(content, filename, content_type)`` (``duration=`` makes a voice
message) keeps the bytes and returns the attachment JSON for ``inject_message(attachments=...)``.
Every attachment URL (a user's or the bot's) is served by ``GET /attachments/...``, as Discord's
CDN does; ``downloads`` lists the URLs fetched.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import itertools
import json
import re
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes import discord_components

__all__ = ["Call", "FakeDiscord", "Interaction"]

_DISCORD_EPOCH_MS = 1420070400000
_MESSAGE_CONTENT_INTENT = 1 << 15
_EPHEMERAL = 64
_ACK_DEADLINE_S = 3.0
NONCE_WINDOW_S = 300.0  # "the past few minutes" that enforce_nonce looks back

Json = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One REST request the client made."""

    method: str
    path: str  # below /api/v10, e.g. "/channels/42/messages"
    json: Any
    query: Mapping[str, str]
    at: float  # loop time when it arrived
    status: int = 0
    response: Any = None  # the JSON answered, if any
    files: Mapping[str, bytes] = field(default_factory=dict)  # uploads: file name -> content


@dataclass
class Interaction:
    """An injected interaction and how it was answered."""

    id: int
    token: str
    payload: Json
    created_at: float
    callback_type: int | None = None
    acked_after_s: float | None = None


@dataclass
class _Session:
    id: str
    shard: int
    seq: int = 0
    log: list[Json] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    dropped_at: float | None = None  # loop time its last connection went (None: connected)


def _json(data: Any, status: int = 200) -> web.Response:
    # discord.py only parses a body whose content-type is exactly "application/json"
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


def _error(status: int, message: str, code: int = 0) -> web.Response:
    return _json({"message": message, "code": code}, status)


class FakeDiscord:
    """Fake Discord server; use as ``async with FakeDiscord(...) as fake``. See module doc."""

    def __init__(
        self,
        *,
        token: str = "fake-bot-token",
        guilds: Mapping[int, Sequence[int]] | None = None,
        users: Mapping[int, str] | None = None,
        bot_name: str = "relaybot",
        privileged_intents: bool = True,
        shards: int = 1,
        max_concurrency: int = 1,
        heartbeat_interval_ms: int = 41250,
        session_ttl_s: float = 120.0,
    ) -> None:
        self.token = token
        self.recommended_shards = shards  # what GET /gateway/bot recommends
        self.max_concurrency = max_concurrency  # IDENTIFYs allowed per 5 s (by bucket)
        self.shard_count = 1  # the count the bot identified with: routes the guilds' events
        self.guilds: dict[int, list[int]] = {g: list(c) for g, c in (guilds or {}).items()}
        self.users: dict[int, str] = dict(users or {})
        self.privileged_intents = privileged_intents
        self.unavailable_logins = 0  # answer this many GET /users/@me with 503 (Discord is down)
        self._ids = itertools.count(1)
        self.bot_id = self._snowflake()
        self.application_id = self.bot_id
        self.bot_name = bot_name
        self.calls: list[Call] = []
        self.gateway_ops: list[Json] = []
        self.connections: list[str] = []  # request path of every websocket opened
        self.messages: dict[int, Json] = {}
        self.interactions: dict[int, Interaction] = {}
        self.commands: dict[int | None, list[Json]] = {}  # guild id (None = global) -> synced
        self.user_locales: dict[int, str] = {}  # user id → the locale their app sends
        self.dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self.threads: dict[int, Json] = {}  # thread id -> its channel JSON (see Threads above)
        self.deleted_threads: set[int] = set()
        self.no_reactions: set[int] = set()  # channels where the bot may not add reactions
        self._originals: dict[str, int] = {}  # interaction token -> its response message id
        self._attachments: dict[tuple[int, str], bytes] = {}  # (message id, file name) -> content
        self._cdn: dict[str, bytes] = {}  # attachment URL path -> content
        self.downloads: list[str] = []  # attachment URLs fetched, in order
        self._bot_roles: dict[int, int] = {}  # guild id -> the bot's managed role there
        self.roles: dict[int, list[Json]] = {}  # guild id -> roles besides @everyone and the bot's
        self.member_roles: dict[tuple[int, int], list[int]] = {}  # (guild, user) -> role ids
        self._sessions: dict[int, _Session] = {}  # shard id -> its gateway session
        self.heartbeat_interval_ms = heartbeat_interval_ms  # what HELLO asks of the client
        self.session_ttl_s = session_ttl_s  # how long a session outlives its connection
        self._deaf: set[web.WebSocketResponse] = set()  # connections that went quiet (deafen)
        self._nonces: dict[str, tuple[float, int]] = {}  # nonce -> (when, message id)
        self.on_created: Callable[[Json], Awaitable[None]] | None = None  # see Nonces above
        self.on_request: Callable[[Call], Awaitable[None]] | None = None  # see Nonces above
        self.refuse_components_v2 = False  # True: every components-v2 message is refused (400)
        self._cond = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port = 0

    # ---- lifecycle

    @property
    def port(self) -> int:
        return self._port

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/gateway/resume", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        app.router.add_get("/attachments/{tail:.+}", self._serve_attachment)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for session in self._sessions.values():
            if session.ws is not None:
                await session.ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()

    # ---- control side

    async def wait_for_call(
        self,
        method: str,
        path_regex: str,
        predicate: Callable[[Call], bool] | None = None,
        timeout: float = 5.0,
        *,
        after: int = 0,
    ) -> Call:
        """The first call from index ``after`` on matching all criteria, waiting for it."""

        def find() -> Call | None:
            for call in self.calls[after:]:
                if call.method == method and re.fullmatch(path_regex, call.path):
                    if predicate is None or predicate(call):
                        return call
            return None

        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(lambda: find() is not None)
        found = find()
        assert found is not None
        return found

    async def wait_for_gateway_op(self, op: int, timeout: float = 5.0, *, after: int = 0) -> Json:
        """The first payload with opcode ``op`` the client sent from index ``after`` on."""
        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(lambda: any(p["op"] == op for p in self.gateway_ops[after:]))
        return next(p for p in self.gateway_ops[after:] if p["op"] == op)

    def calls_to(self, method: str, path_regex: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and re.fullmatch(path_regex, c.path)]

    def channel_messages(self, channel_id: int) -> list[Json]:
        """Current state (edits applied) of the messages in a channel, oldest first."""
        return [m for m in self.messages.values() if m["channel_id"] == str(channel_id)]

    async def inject_message(
        self,
        channel_id: int,
        author_id: int,
        content: str,
        guild_id: int | None = None,
        mentions_bot: bool = False,
        author_bot: bool = False,
        reference: int | str | None = None,
        mentions_bot_role: bool = False,
        attachments: Sequence[Json] = (),
    ) -> Json:
        """A user (or bot) posts ``content``; ``reference`` is the id of the message replied to.

        ``mentions_bot`` / ``mentions_bot_role`` put ``<@bot>`` / ``<@&bot's role>`` in front."""
        mentions = []
        if mentions_bot:
            mentions.append(self._bot_user())
            if f"<@{self.bot_id}>" not in content:
                content = f"<@{self.bot_id}> {content}"
        author = self._user(author_id, bot=author_bot)
        msg = self._message(channel_id, author, content, guild_id=guild_id, mentions=mentions)
        msg["attachments"] = list(attachments)
        if any("waveform" in a for a in attachments):
            msg["flags"] = 1 << 13  # IS_VOICE_MESSAGE
        if mentions_bot_role and guild_id is not None:
            msg["mention_roles"] = [str(self.bot_role_id(guild_id))]
            msg["content"] = f"<@&{self.bot_role_id(guild_id)}> {content}"
        if reference is not None:
            msg["type"] = 19
            msg["message_reference"] = {"message_id": str(reference), "channel_id": str(channel_id)}
            msg["referenced_message"] = self.messages.get(int(reference))
        self.messages[int(msg["id"])] = msg
        await self._dispatch("MESSAGE_CREATE", msg, guild_id)
        return msg

    async def create_thread(
        self, channel_id: int, guild_id: int, name: str, owner_id: int, *, on: int | None = None
    ) -> int:
        """A user starts a thread in `channel_id` (on message `on`, else a standalone one)."""
        thread_id = on if on is not None else self._snowflake()
        thread = self._thread(thread_id, channel_id, guild_id, name, owner_id)
        await self._dispatch("THREAD_CREATE", thread | {"newly_created": True}, guild_id)
        return thread_id

    async def archive_thread(self, thread_id: int, *, locked: bool = False) -> None:
        thread = self.threads[thread_id]
        thread["thread_metadata"] |= {"archived": True, "locked": locked}
        await self._dispatch("THREAD_UPDATE", thread, int(thread["guild_id"]))

    async def delete_thread(self, thread_id: int) -> None:
        thread = self.threads.pop(thread_id)
        self.deleted_threads.add(thread_id)
        gone = {k: thread[k] for k in ("id", "guild_id", "parent_id", "type")}
        await self._dispatch("THREAD_DELETE", gone, int(thread["guild_id"]))

    def _thread(self, thread_id: int, parent: int, guild_id: int, name: str, owner: int) -> Json:
        thread: Json = {
            "id": str(thread_id),
            "type": 11,  # a public thread
            "guild_id": str(guild_id),
            "parent_id": str(parent),
            "owner_id": str(owner),
            "name": name,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _now(),
                "locked": False,
            },
        }
        self.threads[thread_id] = thread
        return thread

    async def _start_thread(self, call: Call, channel_id: str, message_id: str) -> web.Response:
        body = call.json or {}
        name = str(body.get("name") or "")
        source = self.messages.get(int(message_id))
        if source is None or source["channel_id"] != channel_id:
            return _error(404, "Unknown Message", 10008)
        if int(message_id) in self.threads or int(message_id) in self.deleted_threads:
            return _error(400, "A thread has already been created for this message", 160004)
        if not 1 <= len(name) <= 100:
            return _error(400, "Invalid Form Body: name must be 1 to 100 characters", 50035)
        guild_id = int(source["guild_id"])
        thread = self._thread(int(message_id), int(channel_id), guild_id, name, self.bot_id)
        await self._dispatch("THREAD_CREATE", thread | {"newly_created": True}, guild_id)
        return _json(thread, 201)

    def _guild_of(self, channel_id: int) -> int | None:
        if channel_id in self.threads:
            return int(self.threads[channel_id]["guild_id"])
        return next((g for g, cs in self.guilds.items() if channel_id in cs), None)

    async def _thread_refuses(self, channel_id: int) -> web.Response | None:
        """Discord's answer to a post in a deleted or locked archived thread (None: it takes it;
        an archived one that is not locked is unarchived by the post)."""
        if channel_id in self.deleted_threads:
            return _error(404, "Unknown Channel", 10003)
        thread = self.threads.get(channel_id)
        if thread is None or not thread["thread_metadata"]["archived"]:
            return None
        if thread["thread_metadata"]["locked"]:
            return _error(400, "Thread is locked", 50083)
        thread["thread_metadata"]["archived"] = False
        await self._dispatch("THREAD_UPDATE", thread, int(thread["guild_id"]))
        return None

    async def inject_button(
        self, custom_id: str, user_id: int, channel_id: int, message_id: int
    ) -> Interaction:
        """``user_id`` presses the button ``custom_id`` on ``message_id``.

        The interaction carries the message as it is now, as Discord's does: pressing after the
        bot removed the buttons is a double click that raced the edit."""
        message = self.messages[message_id]
        guild_id = int(message["guild_id"]) if "guild_id" in message else None
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._interaction(3, data, user_id, channel_id, guild_id, message=message)

    async def inject_slash(
        self,
        name: str,
        user_id: int,
        channel_id: int,
        guild_id: int | None = None,
        options: Mapping[str, str] | None = None,
    ) -> Interaction:
        """``user_id`` runs ``/name`` (with string ``options``); the command must have been
        synced (guild, else global)."""
        synced = [*self.commands.get(guild_id, []), *self.commands.get(None, [])]
        command = next((c for c in synced if c["name"] == name), None)
        if command is None:
            raise LookupError(f"/{name} was not synced for guild {guild_id}")
        given = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        data = {"id": command["id"], "name": name, "type": 1, "options": given}
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        return await self._interaction(2, data, user_id, channel_id, guild_id)

    def add_role(self, guild_id: int, name: str, permissions: int = 0) -> int:
        """A role in a guild (before the bot connects: GUILD_CREATE carries it); returns its id.
        ``member_roles[(guild_id, user_id)]`` gives it to members."""
        role_id = self._snowflake()
        role = {"id": str(role_id), "name": name, "permissions": str(permissions), "position": 2}
        role |= {"color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}
        self.roles.setdefault(guild_id, []).append(role)
        return role_id

    async def drop_connection(self, code: int = 4000, *, shard: int = 0) -> None:
        """Close a shard's gateway websocket with a resumable code; later events are kept for
        RESUME."""
        session = self._sessions.get(shard)
        assert session is not None and session.ws is not None, "not connected"
        ws, session.ws = session.ws, None
        session.dropped_at = asyncio.get_running_loop().time()
        await ws.close(code=code)

    def deafen(self, shard: int = 0) -> None:
        """A shard's connection stays open but goes quiet: no heartbeat ACK, no event (they are
        kept for RESUME); a new connection hears again."""
        session = self._sessions.get(shard)
        assert session is not None and session.ws is not None, "not connected"
        self._deaf.add(session.ws)

    async def send_again(self, interaction: Interaction) -> None:
        """Send an interaction's event again, as a resumed session gets what came after the
        sequence it resumed from (Discord takes no second answer to it)."""
        payload = interaction.payload
        await self._dispatch(
            "INTERACTION_CREATE", payload, int(payload.get("guild_id") or 0) or None
        )

    def session_id(self, shard: int = 0) -> str | None:
        """The id of a shard's gateway session (None: it has none)."""
        session = self._sessions.get(shard)
        return session.id if session is not None else None

    def sequence_of(self, message_id: int | str) -> int:
        """The sequence number the MESSAGE_CREATE of `message_id` had in its session."""
        return next(
            frame["s"]
            for session in self._sessions.values()
            for frame in session.log
            if frame["t"] == "MESSAGE_CREATE" and frame["d"]["id"] == str(message_id)
        )

    def end_sessions(self) -> None:
        """Forget every gateway session, as Discord does a while after its connection dropped:
        a RESUME then gets INVALID_SESSION (not resumable)."""
        self._sessions.clear()

    def shard_of(self, guild_id: int | None) -> int:
        """The shard a guild's events go to (DMs: shard 0), as Discord routes them."""
        return 0 if guild_id is None else (guild_id >> 22) % self.shard_count

    @staticmethod
    def guild_on_shard(shard: int, shard_count: int, n: int = 1) -> int:
        """A guild id (the `n`-th) whose events go to `shard` of `shard_count`."""
        return ((n * shard_count + shard) << 22) | n

    async def wait_for_shard(self, shard: int, timeout: float = 10.0) -> None:
        """Until `shard` has a live gateway session (READY and its guilds sent)."""

        def live() -> bool:
            session = self._sessions.get(shard)
            return session is not None and session.ws is not None and not session.ws.closed

        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(live)

    def identified(self) -> list[tuple[int, int]]:
        """The [shard id, shard count] of every IDENTIFY, in order."""
        return [tuple(p["d"].get("shard") or (0, 1)) for p in self.gateway_ops if p["op"] == 2]

    # ---- payloads

    def _snowflake(self) -> int:
        return ((int(time.time() * 1000) - _DISCORD_EPOCH_MS) << 22) | (next(self._ids) & 0x3FFFFF)

    def bot_role_id(self, guild_id: int) -> int:
        """The id of the role Discord manages for the bot in a guild (named like the bot)."""
        return self._bot_roles.setdefault(guild_id, self._snowflake())

    def _bot_user(self) -> Json:
        return self._user(self.bot_id, bot=True, name=self.bot_name)

    def _user(self, user_id: int, *, bot: bool = False, name: str | None = None) -> Json:
        name = name or self.users.get(user_id, f"user{user_id}")
        return {
            "id": str(user_id),
            "username": name.lower(),
            "global_name": name,
            "discriminator": "0",
            "avatar": None,
            "bot": bot,
        }

    def _member(self, user: Json | None = None) -> Json:
        member: Json = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False, "flags": 0}
        if user is not None:
            member["user"] = user
        return member

    def _channel(self, channel_id: int, guild_id: int | None) -> Json:
        if guild_id is None:
            return {"id": str(channel_id), "type": 1, "recipients": []}
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(guild_id),
            "name": f"channel-{channel_id}",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
        }

    def _guild(self, guild_id: int) -> Json:
        return {
            "id": str(guild_id),
            "name": f"guild-{guild_id}",
            "unavailable": False,
            "owner_id": "1",
            "member_count": 2,
            "large": False,
            "features": [],
            "emojis": [],
            "stickers": [],
            "roles": [
                {"id": str(guild_id), "name": "@everyone", "permissions": "1071698660929"}
                | {"position": 0, "color": 0, "hoist": False, "managed": False}
                | {"mentionable": False, "flags": 0},
                {"id": str(self.bot_role_id(guild_id)), "name": self.bot_name}
                | {"permissions": "1071698660929", "position": 1, "color": 0, "hoist": False}
                | {"managed": True, "mentionable": True, "flags": 0}
                | {"tags": {"bot_id": str(self.bot_id)}},
                *self.roles.get(guild_id, []),
            ],
            "channels": [self._channel(c, guild_id) for c in self.guilds[guild_id]],
            "threads": [],
            "members": [
                self._member(self._bot_user()) | {"roles": [str(self.bot_role_id(guild_id))]}
            ],
            "joined_at": _now(),
        }

    def _message(
        self,
        channel_id: int,
        author: Json,
        content: str,
        *,
        guild_id: int | None = None,
        mentions: list[Json] | None = None,
        components: list[Json] | None = None,
        flags: int = 0,
    ) -> Json:
        msg: Json = {
            "id": str(self._snowflake()),
            "channel_id": str(channel_id),
            "type": 0,
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions or [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "flags": flags,
            "components": components or [],
        }
        if guild_id is not None:
            msg["guild_id"] = str(guild_id)
            msg["member"] = self._member()
        return msg

    async def _interaction(
        self,
        type_: int,
        data: Json,
        user_id: int,
        channel_id: int,
        guild_id: int | None,
        message: Json | None = None,
    ) -> Interaction:
        user = self._user(user_id)
        payload: Json = {
            "id": str(self._snowflake()),
            "application_id": str(self.application_id),
            "type": type_,
            "token": secrets.token_urlsafe(24),
            "version": 1,
            "data": data,
            "channel_id": str(channel_id),
            "channel": self._channel(channel_id, guild_id),
            "app_permissions": "1071698660929",
            "locale": self.user_locales.get(user_id, "en-US"),
            "attachment_size_limit": 8 * 1024 * 1024,
            "authorizing_integration_owners": {"0": str(guild_id)}
            if guild_id
            else {"1": user["id"]},
            "context": 0 if guild_id else 1,
            "entitlements": [],
        }
        if guild_id is not None:
            payload["guild_id"] = str(guild_id)
            payload["guild_locale"] = "en-US"
            payload["member"] = self._member(user) | {"permissions": "1071698660929"}
        else:
            payload["user"] = user
        if message is not None:
            payload["message"] = message
        loop = asyncio.get_running_loop()
        record = Interaction(int(payload["id"]), payload["token"], payload, loop.time())
        self.interactions[record.id] = record
        await self._dispatch("INTERACTION_CREATE", payload, guild_id)
        return record

    # ---- gateway

    async def _dispatch(self, event: str, data: Json, guild_id: int | None = None) -> None:
        """Send an event on the shard of `guild_id` (DMs: shard 0)."""
        session = self._sessions.get(self.shard_of(guild_id))
        if session is None:
            raise RuntimeError(f"no gateway session on shard {self.shard_of(guild_id)}")
        await self._emit(session, event, data)

    async def _emit(self, session: _Session, event: str, data: Json) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(frame)
        if session.ws is not None and not session.ws.closed and session.ws not in self._deaf:
            await session.ws.send_str(json.dumps(frame))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoclose=False)
        await ws.prepare(request)
        self.connections.append(request.path)
        hello = {"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}}
        await ws.send_str(json.dumps(hello))
        async for msg in ws:
            if msg.type is WSMsgType.CLOSE:
                if msg.data in (1000, 1001):  # the client ends its session: not resumable
                    self._forget(lambda session: session.ws is ws)
                await ws.close()
                break
            if msg.type is not WSMsgType.TEXT:
                continue
            payload = json.loads(msg.data)
            async with self._cond:
                self.gateway_ops.append(payload)
                self._cond.notify_all()
            await self._gateway_op(ws, payload)
        for session in self._sessions.values():
            if session.ws is ws:
                session.dropped_at = asyncio.get_running_loop().time()
        return ws

    def _expired(self, session: _Session) -> bool:
        gone = session.dropped_at
        return gone is not None and asyncio.get_running_loop().time() - gone > self.session_ttl_s

    def _forget(self, which: Callable[[_Session], bool]) -> None:
        for shard, session in list(self._sessions.items()):
            if which(session):
                del self._sessions[shard]

    async def _gateway_op(self, ws: web.WebSocketResponse, payload: Json) -> None:
        op, d = payload["op"], payload.get("d")
        if op == 1:  # HEARTBEAT
            if ws not in self._deaf:
                await ws.send_str(json.dumps({"op": 11}))
        elif op == 2:  # IDENTIFY
            if d["token"] != self.token:
                await ws.close(code=4004, message=b"Authentication failed.")
            elif d.get("intents", 0) & _MESSAGE_CONTENT_INTENT and not self.privileged_intents:
                await ws.close(code=4014, message=b"Disallowed intent(s).")
            elif not 0 <= (shard := d.get("shard") or [0, 1])[0] < shard[1]:
                await ws.close(code=4010, message=b"Invalid shard.")
            else:
                await self._identify(ws, *shard)
        elif op == 6:  # RESUME
            now = asyncio.get_running_loop().time()
            self._forget(
                lambda s: s.dropped_at is not None and now - s.dropped_at > self.session_ttl_s
            )
            session = next((s for s in self._sessions.values() if s.id == d["session_id"]), None)
            if session is None or d["token"] != self.token:
                await ws.send_str(json.dumps({"op": 9, "d": False}))
                return
            session.ws, session.dropped_at = ws, None
            for frame in session.log:
                if frame["s"] > (d["seq"] or 0):
                    await ws.send_str(json.dumps(frame))
            await self._emit(session, "RESUMED", {})

    async def _identify(self, ws: web.WebSocketResponse, shard: int, shard_count: int) -> None:
        old = self._sessions.get(shard)
        if old is not None and old.ws is not None:
            await old.ws.close(code=4009)  # a new session replaces the old one
        self.shard_count = shard_count
        session = self._sessions[shard] = _Session(id=secrets.token_hex(16), shard=shard, ws=ws)
        guilds = [g for g in self.guilds if self.shard_of(g) == shard]
        ready = {
            "v": 10,
            "user": self._bot_user(),
            "guilds": [{"id": str(g), "unavailable": True} for g in guilds],
            "session_id": session.id,
            "resume_gateway_url": self.gateway_url + "/resume",
            "application": {"id": str(self.application_id), "flags": 0},
            "private_channels": [],
            "shard": [shard, shard_count],
        }
        await self._emit(session, "READY", ready)
        for guild_id in guilds:
            await self._emit(session, "GUILD_CREATE", self._guild(guild_id))
        async with self._cond:
            self._cond.notify_all()

    # ---- REST

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        body, files = await self._body(request)
        call = Call(
            request.method,
            path,
            body,
            dict(request.query),
            asyncio.get_running_loop().time(),
            files=files,
        )
        if self.on_request is not None:
            await self.on_request(call)
        response = await self._route(request, call)
        body = response.body if isinstance(response.body, bytes) and response.body else None
        call = dataclasses.replace(
            call, status=response.status, response=json.loads(body) if body else None
        )
        async with self._cond:
            self.calls.append(call)
            self._cond.notify_all()
        return response

    @staticmethod
    async def _body(request: web.Request) -> tuple[Any, dict[str, bytes]]:
        """The JSON of a request and the files uploaded with it (multipart: ``payload_json``
        plus ``files[n]``, as discord.py sends an upload)."""
        if request.content_type != "multipart/form-data":
            raw = await request.read()
            return (json.loads(raw) if raw else None), {}
        form = await request.post()
        files = {
            value.filename: value.file.read()
            for key, value in form.items()
            if key.startswith("files[") and isinstance(value, web.FileField)
        }
        payload = form.get("payload_json")
        return (json.loads(payload) if isinstance(payload, str) else None), files

    def attachment(self, message_id: int, filename: str) -> bytes:
        """The content of the file `filename` uploaded with message `message_id`."""
        return self._attachments[(message_id, filename)]

    async def _route(self, request: web.Request, call: Call) -> web.Response:
        needs_token = not call.path.startswith(("/interactions/", "/webhooks/"))
        if needs_token and request.headers.get("Authorization") != f"Bot {self.token}":
            return _error(401, "401: Unauthorized")
        for method, pattern, handler in self._routes:
            m = re.fullmatch(pattern, call.path)
            if m and method == call.method:
                response: web.Response = await handler(self, call, *m.groups())
                return response
        return _error(404, "404: Not Found")

    async def _get_me(self, call: Call) -> web.Response:
        if self.unavailable_logins > 0:  # discord.py retries 5xx itself, except a 503
            self.unavailable_logins -= 1
            return _error(503, "Service Unavailable")
        return _json(self._bot_user())

    async def _get_application(self, call: Call) -> web.Response:
        owner = self._user(1, name="owner")
        return _json(
            {"id": str(self.application_id), "name": self.bot_name, "description": "", "icon": None}
            | {"bot_public": True, "bot_require_code_grant": False, "verify_key": "0" * 64}
            | {"owner": owner, "flags": 0, "team": None}
        )

    async def _get_gateway(self, call: Call) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0}
        limit["max_concurrency"] = self.max_concurrency
        shards = self.recommended_shards
        return _json({"url": self.gateway_url, "shards": shards, "session_start_limit": limit})

    async def _post_message(self, call: Call, channel_id: str) -> web.Response:
        body = call.json or {}
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > 25:
            return _error(400, "Invalid Form Body (nonce: Must be 25 or fewer in length.)", 50035)
        if (refused := self._components_refused(body, {})) is not None:
            return refused
        if (refused := await self._thread_refuses(int(channel_id))) is not None:
            return refused
        if body.get("enforce_nonce") and nonce is not None:
            seen = self._nonces.get(str(nonce))
            if seen is not None and time.monotonic() - seen[0] < NONCE_WINDOW_S:
                if (first := self.messages.get(seen[1])) is not None:
                    return _json(first)  # created once: the first message, nothing new
        guild_id = self._guild_of(int(channel_id))
        msg = self._message(
            int(channel_id),
            self._bot_user(),
            body.get("content") or "",
            guild_id=guild_id,
            components=body.get("components"),
            flags=int(body.get("flags") or 0),
        )
        if body.get("message_reference"):
            msg["type"] = 19
            msg["message_reference"] = body["message_reference"]
        msg["attachments"] = [self._attach(int(msg["id"]), n, c) for n, c in call.files.items()]
        if nonce is not None:
            msg["nonce"] = str(nonce)
            self._nonces[str(nonce)] = (time.monotonic(), int(msg["id"]))
        self.messages[int(msg["id"])] = msg
        if self.on_created is not None:
            await self.on_created(msg)
        return _json(msg)

    def _attach(self, message_id: int, filename: str, content: bytes) -> Json:
        self._attachments[(message_id, filename)] = content
        return self._cdn_file(message_id, filename, content, "text/plain; charset=utf-8")

    def _cdn_file(self, folder: int, filename: str, content: bytes, content_type: str) -> Json:
        attachment_id = str(self._snowflake())
        path = f"/attachments/{folder}/{attachment_id}/{filename}"
        self._cdn[path] = content
        url = f"http://127.0.0.1:{self._port}{path}?ex=1&is=2&hm=3"  # signed, as Discord's are
        return {"id": attachment_id, "filename": filename, "size": len(content), "url": url} | {
            "proxy_url": url,
            "content_type": content_type,
        }

    def upload(
        self, content: bytes, filename: str, content_type: str, *, duration: float | None = None
    ) -> Json:
        """A file a user attaches to a message (a voice message when `duration` is given)."""
        attachment = self._cdn_file(self._snowflake(), filename, content, content_type)
        if duration is not None:
            waveform = base64.b64encode(bytes(range(0, 256, 4))).decode()
            attachment |= {"duration_secs": duration, "waveform": waveform}
        return attachment

    async def _serve_attachment(self, request: web.Request) -> web.Response:
        content = self._cdn.get(request.path)
        if content is None:
            return web.Response(status=404)
        self.downloads.append(str(request.url))
        return web.Response(body=content, content_type="application/octet-stream")

    async def _patch_message(self, call: Call, channel_id: str, message_id: str) -> web.Response:
        msg = self.messages.get(int(message_id))
        if msg is None or msg["channel_id"] != channel_id:
            return _error(404, "Unknown Message", 10008)
        body = call.json or {}
        if (refused := self._components_refused(body, msg)) is not None:
            return refused
        for key in ("content", "components", "flags"):
            if key in body:
                msg[key] = body[key] if body[key] is not None else msg[key]
        if "content" in body and body["content"] is None:
            msg["content"] = ""  # null clears it (components v2 needs it empty)
        msg["edited_timestamp"] = _now()
        return _json(msg)

    def _components_refused(self, body: Json, stored: Json) -> web.Response | None:
        """Discord's components rules (``discord_components``) on `stored` as `body` leaves it."""
        after = stored | {k: body[k] for k in ("content", "components", "flags") if k in body}
        if "content" in body and body["content"] is None:
            after["content"] = ""
        v2 = bool(int(after.get("flags") or 0) & discord_components.IS_COMPONENTS_V2)
        if v2 and self.refuse_components_v2:
            return _error(400, "Invalid Form Body (flags: components v2 refused here)", 50035)
        was_v2 = bool(int(stored.get("flags") or 0) & discord_components.IS_COMPONENTS_V2)
        why = discord_components.check(after, was_v2=was_v2)
        return None if why is None else _error(400, why, 50035)

    async def _delete_message(self, call: Call, channel_id: str, message_id: str) -> web.Response:
        if self.messages.pop(int(message_id), None) is None:
            return _error(404, "Unknown Message", 10008)
        return web.Response(status=204)

    def bot_reactions(self, message_id: int) -> list[str]:
        """The bot's own reactions on a message, in the order they were added."""
        reactions = self.messages[message_id].get("reactions", [])
        return [r["emoji"]["name"] for r in reactions if r["me"]]

    async def _react(
        self, call: Call, channel_id: str, message_id: str, emoji: str
    ) -> web.Response:
        msg = self.messages.get(int(message_id))
        if msg is None or msg["channel_id"] != channel_id:
            return _error(404, "Unknown Message", 10008)
        if re.search(r"[A-Za-z0-9]", emoji):  # name:id, a custom emoji: none exists here
            return _error(400, "Unknown Emoji", 10014)
        reactions: list[Json] = msg.setdefault("reactions", [])
        found = next((r for r in reactions if r["emoji"]["name"] == emoji), None)
        if call.method == "DELETE":
            if found is not None and found["me"]:
                found["me"], found["count"] = False, found["count"] - 1
                if not found["count"]:
                    reactions.remove(found)
            return web.Response(status=204)
        if int(channel_id) in self.no_reactions:
            return _error(403, "Missing Permissions", 50013)
        if found is None:
            reactions.append({"count": 1, "me": True, "emoji": {"id": None, "name": emoji}})
        elif not found["me"]:
            found["me"], found["count"] = True, found["count"] + 1
        return web.Response(status=204)

    async def _typing(self, call: Call, channel_id: str) -> web.Response:
        if int(channel_id) in self.deleted_threads:
            return _error(404, "Unknown Channel", 10003)
        return web.Response(status=204)

    async def _get_channel(self, call: Call, channel_id: str) -> web.Response:
        if int(channel_id) in self.threads:
            return _json(self.threads[int(channel_id)])
        guild = next((g for g, chans in self.guilds.items() if int(channel_id) in chans), None)
        if guild is None:
            return _error(404, "Unknown Channel", 10003)
        return _json(self._channel(int(channel_id), guild))

    async def _get_guild(self, call: Call, guild_id: str) -> web.Response:
        if int(guild_id) not in self.guilds:
            return _error(404, "Unknown Guild", 10004)
        return _json(self._guild(int(guild_id)))

    async def _get_member(self, call: Call, guild_id: str, user_id: str) -> web.Response:
        roles = self.member_roles.get((int(guild_id), int(user_id)), [])
        member = self._member(self._user(int(user_id))) | {"roles": [str(r) for r in roles]}
        return _json(member)

    async def _dm_channel(self, call: Call) -> web.Response:
        user_id = int(call.json["recipient_id"])
        channel_id = self.dm_channels.setdefault(user_id, self._snowflake())
        channel = self._channel(channel_id, None) | {"recipients": [self._user(user_id)]}
        return _json(channel)

    async def _sync_commands(self, call: Call, app_id: str, guild_id: str | None) -> web.Response:
        synced = [
            c | {"id": str(self._snowflake()), "application_id": app_id, "version": "1"}
            for c in call.json
        ]
        if guild_id:
            synced = [c | {"guild_id": guild_id} for c in synced]
        self.commands[int(guild_id) if guild_id else None] = synced
        return _json(synced)

    async def _interaction_callback(
        self, call: Call, interaction_id: str, token: str
    ) -> web.Response:
        record = self.interactions.get(int(interaction_id))
        if record is None or record.token != token:
            return _error(404, "Unknown interaction", 10062)
        if record.callback_type is not None:
            return _error(400, "Interaction has already been acknowledged.", 40060)
        record.acked_after_s = call.at - record.created_at
        if record.acked_after_s > _ACK_DEADLINE_S:
            return _error(404, "Unknown interaction", 10062)
        record.callback_type = call.json["type"]
        data = call.json.get("data") or {}
        response: Json = {"interaction": {"id": interaction_id, "type": record.payload["type"]}}
        resource: Json = {"type": record.callback_type}
        if record.callback_type == 4:  # CHANNEL_MESSAGE_WITH_SOURCE
            msg = self._message(
                int(record.payload["channel_id"]),
                self._bot_user(),
                data.get("content") or "",
                flags=data.get("flags") or 0,
                components=data.get("components"),
            )
            self.messages[int(msg["id"])] = msg
            resource["message"] = msg
            self._originals[token] = int(msg["id"])
            response["interaction"]["response_message_id"] = msg["id"]
            response["interaction"]["response_message_ephemeral"] = bool(msg["flags"] & _EPHEMERAL)
        elif record.callback_type == 5:  # DEFERRED_CHANNEL_MESSAGE: "thinking..."
            flags = data.get("flags") or 0
            msg = self._message(
                int(record.payload["channel_id"]), self._bot_user(), "", flags=flags
            )
            self.messages[int(msg["id"])] = msg
            self._originals[token] = int(msg["id"])
        elif record.callback_type == 7:  # UPDATE_MESSAGE
            msg = self.messages[int(record.payload["message"]["id"])]
            msg.update({k: v for k, v in data.items() if k in ("content", "components")})
            resource["message"] = msg
        response["resource"] = resource
        return _json(response)

    async def _webhook_send(self, call: Call, app_id: str, token: str) -> web.Response:
        record = next((i for i in self.interactions.values() if i.token == token), None)
        if record is None:
            return _error(404, "Unknown Webhook", 10015)
        body = call.json or {}
        msg = self._message(
            int(record.payload["channel_id"]),
            self._bot_user(),
            body.get("content") or "",
            flags=body.get("flags") or 0,
            components=body.get("components"),
        )
        msg["webhook_id"] = app_id
        self.messages[int(msg["id"])] = msg
        return _json(msg)

    async def _webhook_edit(
        self, call: Call, app_id: str, token: str, message_id: str
    ) -> web.Response:
        record = next((i for i in self.interactions.values() if i.token == token), None)
        if record is None:
            return _error(404, "Unknown Webhook", 10015)
        mid = self._originals.get(token) if message_id == "@original" else int(message_id)
        msg = self.messages.get(mid) if mid is not None else None
        if msg is None:
            return _error(404, "Unknown Message", 10008)
        msg.update({k: v for k, v in (call.json or {}).items() if k in ("content", "components")})
        return _json(msg)

    _routes: Sequence[tuple[str, str, Callable[..., Any]]] = (
        ("GET", r"/users/@me", _get_me),
        ("GET", r"(?:/oauth2)?/applications/@me", _get_application),
        ("GET", r"/gateway/bot", _get_gateway),
        ("GET", r"/gateway", _get_gateway),
        ("POST", r"/channels/(\d+)/messages", _post_message),
        ("POST", r"/channels/(\d+)/messages/(\d+)/threads", _start_thread),
        ("PATCH", r"/channels/(\d+)/messages/(\d+)", _patch_message),
        ("DELETE", r"/channels/(\d+)/messages/(\d+)", _delete_message),
        ("PUT", r"/channels/(\d+)/messages/(\d+)/reactions/([^/]+)/@me", _react),
        ("DELETE", r"/channels/(\d+)/messages/(\d+)/reactions/([^/]+)/@me", _react),
        ("POST", r"/channels/(\d+)/typing", _typing),
        ("POST", r"/users/@me/channels", _dm_channel),
        ("GET", r"/guilds/(\d+)/members/(\d+)", _get_member),
        ("GET", r"/guilds/(\d+)", _get_guild),
        ("GET", r"/channels/(\d+)", _get_channel),
        ("PUT", r"/applications/(\d+)/commands()", _sync_commands),
        ("PUT", r"/applications/(\d+)/guilds/(\d+)/commands", _sync_commands),
        ("POST", r"/interactions/(\d+)/([^/]+)/callback", _interaction_callback),
        ("POST", r"/webhooks/(\d+)/([^/]+)", _webhook_send),
        ("PATCH", r"/webhooks/(\d+)/([^/]+)/messages/(@original|\d+)", _webhook_edit),
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()

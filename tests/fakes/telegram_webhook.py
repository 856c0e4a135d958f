"""The fake Bot API's webhook side: what Telegram does once a bot has called setWebhook.

    tg.webhook.url                    # set by the bot's setWebhook ("" when none)
    tg.inject_message(...)            # queued, then POSTed to the URL as Telegram does
    await tg.webhook.wait_delivered(update["update_id"])
    await tg.webhook.wait_until(lambda: ...)     # checked after each delivery
    await tg.webhook.post(update, secret="wrong")   # one POST by hand: its HTTP status

Delivery follows Telegram: each queued update is POSTed as JSON with the secret in
``X-Telegram-Bot-Api-Secret-Token``; a 2xx answer takes it off the queue, anything else (or no
answer) is recorded as the last error and the update is sent again after ``retry_s``. Chats are
delivered concurrently (at most ``max_connections`` requests at a time), each chat's updates one
after another in order. ``paused`` holds deliveries back (to post a copy by hand first);
``deliveries`` records every attempt; ``answer_listeners`` are told of each answer as it is read,
so a test can act (kill the bot) right after a 200. ``info()`` is getWebhookInfo's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

Update = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One POST of an update to the webhook."""

    update_id: int
    status: int | None  # None: no HTTP answer (refused, reset, timed out)
    error: str  # "" when 2xx
    at: float  # loop time the answer (or the failure) came


@dataclass(slots=True, eq=False)
class FakeWebhook:
    """The webhook state of one fake bot and the task that delivers its updates."""

    queue: Callable[[], list[Update]]  # the fake's pending updates, oldest first
    retry_s: float = 0.1
    timeout_s: float = 60.0  # how long an answer may take
    url: str = ""
    secret: str | None = None
    allowed_updates: list[str] | None = None
    max_connections: int = 40
    paused: bool = False
    deliveries: list[Delivery] = field(default_factory=list)
    answer_listeners: list[Callable[[Update, int | None], None]] = field(default_factory=list)
    last_error_date: int | None = None
    last_error_message: str | None = None
    _task: asyncio.Task[None] | None = None
    _kick: asyncio.Event = field(default_factory=asyncio.Event)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _in_flight: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # update id → POST
    _busy: set[Any] = field(default_factory=set)  # chats with a POST in flight

    # -- Bot API methods -----------------------------------------------------------------------
    def set(self, params: dict[str, Any]) -> None:
        """setWebhook (an empty url deletes it). Raises ValueError with Telegram's description."""
        url = str(params.get("url") or "")
        if not url:
            self.delete()
            return
        parts = urlsplit(url)
        local = parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost")
        if parts.scheme != "https" and not local:
            raise ValueError("Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        secret = params.get("secret_token")
        if secret is not None and not (
            0 < len(str(secret)) <= 256 and set(str(secret)) <= _SECRET_CHARS
        ):
            raise ValueError("Bad Request: secret token contains unallowed characters")
        self.url, self.secret = url, (str(secret) if secret is not None else None)
        self.allowed_updates = params.get("allowed_updates") or None
        self.max_connections = int(params.get("max_connections") or 40)
        if params.get("drop_pending_updates"):
            self.queue().clear()
        if self._task is None:
            self._task = asyncio.create_task(self._deliver_all(), name="fake-webhook")
        self.kick()

    def delete(self, drop_pending: bool = False) -> None:
        """deleteWebhook: deliveries stop (those in flight are dropped, and come again by
        getUpdates); the URL is forgotten."""
        self.url, self.secret = "", None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for task in self._in_flight.values():
            task.cancel()
        self._in_flight.clear()
        self._busy.clear()
        if drop_pending:
            self.queue().clear()

    def info(self) -> dict[str, Any]:
        """getWebhookInfo."""
        result: dict[str, Any] = {
            "url": self.url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.queue()),
        }
        if self.url:
            result["max_connections"] = self.max_connections
            if self.allowed_updates is not None:
                result["allowed_updates"] = self.allowed_updates
        if self.last_error_date is not None:
            result["last_error_date"] = self.last_error_date
            result["last_error_message"] = self.last_error_message
        return result

    async def aclose(self) -> None:
        task = self._task
        self.delete()  # cancels it
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- control side --------------------------------------------------------------------------
    def kick(self) -> None:
        """Look at the queue again (called when an update is queued)."""
        self._kick.set()

    def resume(self) -> None:
        self.paused = False
        self.kick()

    async def post(
        self,
        update: Update,
        *,
        secret: str | None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> int:
        """POST `update` once, as Telegram would, with `secret` as the header (None: without
        it) and any other `headers`; returns the HTTP status."""
        headers = dict(headers or {})
        if secret is not None:
            headers[SECRET_HEADER] = secret
        async with (
            aiohttp.ClientSession() as http,
            http.post(url or self.url, json=update, headers=headers) as resp,
        ):
            await resp.read()
            return resp.status

    async def wait_delivered(self, update_id: int, timeout: float = 10) -> Delivery:
        """The first 2xx delivery of `update_id` (past or future)."""

        def found() -> Delivery | None:
            return next(
                (d for d in self.deliveries if d.update_id == update_id and d.error == ""), None
            )

        async with asyncio.timeout(timeout):
            while (done := found()) is None:
                changed = self._changed
                await changed.wait()
        return done

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 10) -> None:
        """Until `condition` (of ``deliveries``, say) holds; it is checked after each one."""
        async with asyncio.timeout(timeout):
            while not condition():
                await self._changed.wait()

    async def wait_failed(self, update_id: int, timeout: float = 10) -> Delivery:
        """The first failed delivery of `update_id` (past or future)."""
        async with asyncio.timeout(timeout):
            while True:
                failed = [d for d in self.deliveries if d.update_id == update_id and d.error]
                if failed:
                    return failed[0]
                await self._changed.wait()

    # -- delivery ------------------------------------------------------------------------------
    async def _deliver_all(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            while True:
                await self._kick.wait()
                self._kick.clear()
                if not self.paused:
                    self._start(http)

    def _start(self, http: aiohttp.ClientSession) -> None:
        """POST what may go now: each chat's oldest update, while connections are free."""
        waiting: set[Any] = set()  # chats whose oldest update is not sent yet
        for update in list(self.queue()):
            if self.allowed_updates and not any(k in update for k in self.allowed_updates):
                self.queue().remove(update)  # Telegram does not send what was not asked for
                continue
            chat = _chat_of(update)
            uid = int(update["update_id"])
            if uid in self._in_flight or chat in self._busy or chat in waiting:
                waiting.add(chat)
                continue
            if len(self._in_flight) >= self.max_connections:
                return
            self._busy.add(chat)
            task = asyncio.create_task(self._deliver(http, update, chat))
            self._in_flight[uid] = task

    async def _deliver(self, http: aiohttp.ClientSession, update: Update, chat: Any) -> None:
        uid = int(update["update_id"])
        headers = {SECRET_HEADER: self.secret} if self.secret is not None else {}
        status: int | None = None
        try:
            async with http.post(self.url, json=update, headers=headers) as resp:
                await resp.read()
                status = resp.status
                error = "" if 200 <= status < 300 else f"Wrong response from the webhook: {status}"
        except TimeoutError:
            error = "Read timeout expired"
        except aiohttp.ClientConnectorError:
            error = "Connection refused"
        except aiohttp.ClientError as exc:
            error = f"Connection failed: {type(exc).__name__}"
        self.deliveries.append(Delivery(uid, status, error, asyncio.get_running_loop().time()))
        for listener in list(self.answer_listeners):
            listener(update, status)
        if not error:
            with contextlib.suppress(ValueError):
                self.queue().remove(update)
        else:
            self.last_error_date, self.last_error_message = int(time.time()), error
        self._changed.set()
        self._changed = asyncio.Event()
        if error:
            await asyncio.sleep(self.retry_s)  # Telegram tries again later
        self._in_flight.pop(uid, None)
        self._busy.discard(chat)
        self.kick()


def _chat_of(update: Update) -> Any:
    """The chat an update belongs to (its own id when it has none)."""
    for key in ("message", "edited_message"):
        if key in update:
            return update[key]["chat"]["id"]
    query = update.get("callback_query")
    if query and query.get("message"):
        return query["message"]["chat"]["id"]
    return ("update", update["update_id"])

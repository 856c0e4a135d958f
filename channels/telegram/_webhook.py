"""Telegram webhook mode: an aiohttp web server takes the updates Telegram posts, one a request.

Why not PTB's own webhook server (``Updater.start_webhook``): it answers 200 as soon as an update
is in its in-memory queue, before any handler has run, so a crash then loses an update Telegram
believes delivered (and it logs an update it cannot read in full, text included). Here the answer
is 200 only once ``Application.process_update`` has returned: the handlers await the engine's
``handle_inbound``, which returns once the message is committed to the inbox. Whatever a crash,
a failed handler or a timeout cuts off, Telegram sends again, and the inbox answers a redelivered
message once.

A request without the secret Telegram was given (header ``X-Telegram-Bot-Api-Secret-Token``) is
answered 401 before its body is read, never handled, and logged once per source. A body over
1 MiB gets 413, one that does not arrive within 10 s 408. The update is read by the poller's
``parse_update``: one PTB cannot read is logged without its text and answered 200, since sending
it again would not help. An update whose handling failed (the store unreachable, say) is answered
500 so that it comes again, until it has failed for ``give_up_s``; then it is answered 200 and
logged as dropped, so one update that can never be handled does not hold up the rest for good.
Handling that outlasts 30 s is answered 503 and goes on (its redelivery is answered once).

Several instances behind one load balancer can all run this: each sets the same URL and secret
at start (setWebhook is idempotent) and none deletes the webhook when it stops, so updates wait
at Telegram while no instance listens. Switching to polling deletes it (``TelegramChannel``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web
from telegram import Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application, ContextTypes

from channels.telegram._updates import ALLOWED_UPDATES, TOKEN_REJECTED, parse_update
from engine import Backoff

log = logging.getLogger("channels.telegram")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BODY = 1 << 20  # an update is a few KB; Telegram sends no files in it
_READ_S = 10.0  # for the body to arrive
_HANDLE_S = 30.0  # for the update to be handled (stored) before the answer is 503
_FINISH_S = 10.0  # on stop: for requests being handled to finish
_SOURCES_LOGGED = 256  # refused sources remembered (each is logged once)
_FAILURES_KEPT = 1024  # failing updates remembered


class Webhook:
    """Serves the webhook until cancelled; see the module docstring."""

    def __init__(
        self,
        app: Application,
        process: Callable[[Update], Awaitable[None]],
        *,
        url: str,
        listen: tuple[str, int],
        secret: str,
        retry_initial_s: float,
        give_up_s: float = 600.0,  # a failing update is answered 500 this long, then dropped
    ) -> None:
        self._app = app
        self._process = process
        self._url = url
        self._listen = listen
        self._secret = secret.encode()
        self._retry_initial_s = retry_initial_s
        self._give_up_s = give_up_s
        self._refused: set[str] = set()  # sources whose refusal was logged
        self._failing: set[int] = set()  # updates whose handler raised, while being handled
        self._failures: OrderedDict[int, float] = OrderedDict()  # update id → first failure
        app.add_error_handler(self._note_failure)  # PTB calls every error handler

    async def run(self) -> None:
        web_app = web.Application(client_max_size=MAX_BODY)
        web_app.router.add_post(urlsplit(self._url).path or "/", self._receive)
        runner = web.AppRunner(
            web_app, access_log=None, handle_signals=False, shutdown_timeout=_FINISH_S
        )
        await runner.setup()
        try:
            await self._bind(runner)
            await self._set_webhook()
            await asyncio.Event().wait()  # serve until cancelled
        finally:
            await runner.cleanup()  # requests being handled finish (bounded)

    async def _bind(self, runner: web.AppRunner) -> None:
        host, port = self._listen
        backoff = Backoff(self._retry_initial_s)
        while True:
            try:
                await web.TCPSite(runner, host, port).start()
                return
            except OSError as exc:
                log.error(
                    "Telegram webhook: cannot listen on %s:%d (%s); check [telegram] "
                    "webhook_listen. Retrying in %gs",
                    host,
                    port,
                    exc.strerror or exc,
                    backoff.upcoming_s,
                )
            await backoff.sleep()

    async def _set_webhook(self) -> None:
        """setWebhook, retried with backoff while Telegram cannot be reached or refuses."""
        bot = self._app.bot
        backoff = Backoff(self._retry_initial_s)
        while True:
            try:
                await bot.set_webhook(
                    self._url, allowed_updates=ALLOWED_UPDATES, secret_token=self._secret.decode()
                )
                break
            except InvalidToken:  # its message contains the token: never log it
                log.error(TOKEN_REJECTED, backoff.max_s)
            except TelegramError as exc:
                log.error(
                    "Telegram refused or did not answer setWebhook for %s (%s); check [telegram]"
                    " webhook_url. Retrying in %gs",
                    self._url,
                    exc,
                    backoff.upcoming_s,
                )
            await backoff.sleep()
        host, port = self._listen
        log.info(
            "Telegram: webhook for @%s at %s, listening on %s:%d",
            bot.username,
            self._url,
            host,
            port,
        )

    # -- one request ---------------------------------------------------------------------------

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            self._refuse(request)
            return web.Response(status=401)
        try:
            async with asyncio.timeout(_READ_S):
                body = await request.read()  # over MAX_BODY: aiohttp answers 413
        except TimeoutError:
            return web.Response(status=408)
        try:
            raw = json.loads(body)
        except ValueError:
            log.warning("Telegram webhook: a request with the secret but no JSON; answered 400")
            return web.Response(status=400)
        update = parse_update(raw, self._app.bot)
        if update is None:
            return web.Response()  # logged by parse_update; sending it again would not help
        return await self._handle(update)

    async def _handle(self, update: Update) -> web.Response:
        uid = update.update_id
        # A task of the Application: Application.stop awaits it, even once this answer is gone.
        work = self._app.create_task(self._process(update), name="telegram-webhook")
        try:
            await asyncio.wait_for(asyncio.shield(work), _HANDLE_S)
        except TimeoutError:
            log.warning(
                "Telegram update %s still being handled after %gs; answered 503 (it comes again)",
                uid,
                _HANDLE_S,
            )
            return web.Response(status=503)
        except Exception:  # raised by `process`: the update was not recorded (logged there)
            self._failing.add(uid)
        if uid not in self._failing:
            self._failures.pop(uid, None)
            return web.Response()
        self._failing.discard(uid)
        return self._failed(uid)

    def _failed(self, uid: int) -> web.Response:
        """500 (Telegram sends it again) until the update has failed for give_up_s."""
        now = asyncio.get_running_loop().time()
        first = self._failures.setdefault(uid, now)
        while len(self._failures) > _FAILURES_KEPT:
            self._failures.popitem(last=False)
        if now - first < self._give_up_s:
            return web.Response(status=500)
        del self._failures[uid]
        log.error(
            "Telegram update %s has failed for %gs; answered 200 and dropped", uid, now - first
        )
        return web.Response()

    async def _note_failure(self, update: object, _: ContextTypes.DEFAULT_TYPE) -> None:
        if isinstance(update, Update):  # the adapter's own error handler logs the error
            self._failing.add(update.update_id)

    def _refuse(self, request: web.Request) -> None:
        """Log a refused request once per source (the proxy's X-Forwarded-For, if any, and the
        peer), never what it sent."""
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")[0].strip()
        source = f"{forwarded} via {request.remote}" if forwarded else str(request.remote)
        if source in self._refused or len(self._refused) > _SOURCES_LOGGED:
            return
        self._refused.add(source)
        if len(self._refused) > _SOURCES_LOGGED:
            log.warning("Telegram webhook: refused requests from many sources; no longer logged")
            return
        log.warning(
            "Telegram webhook: refused a request from %s without the right secret (401); "
            "later ones from there are not logged",
            source,
        )

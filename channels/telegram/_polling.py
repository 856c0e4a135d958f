"""Long polling: getUpdates in a loop that confirms a batch to Telegram only once every update
in it has been handled, and that nothing wedges (see :class:`Poller`). In webhook mode
``_webhook`` receives instead."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError, TimedOut

from channels.telegram._http import not_sent
from channels.telegram._updates import ALLOWED_UPDATES, TOKEN_REJECTED, parse_update, unreadable
from engine import Backoff
from engine.metrics import api_retry
from tools.errors import StoreUnavailable

log = logging.getLogger("channels.telegram")

POLLING_CONFLICT = (
    "Telegram refuses to deliver updates (409 Conflict): another relaybot or program is polling"
    " this bot token, or a webhook is set for it; stop the other one. Polling again with backoff,"
    " up to %gs apart"
)
_READ_MARGIN_S = 5.0  # how long past the long poll's own timeout an answer may take
UNREACHABLE = "Telegram Bot API unreachable, polling again in %gs (%s)"
DEAF_POLL = (
    "Telegram: getUpdates got no answer within %gs (the long poll asks for %gs) although the "
    "connection is open; abandoned and polling again on a new connection"
)
_FINISH_S = 10.0  # on stop: how long a batch in progress may take to finish, and to confirm it
_STORE_S = 5.0  # the longest pause before a batch the store refused is fetched again


class Poller:
    """getUpdates in a loop, handing each update to `handle` (the Application's
    ``process_update``). A batch runs chat by chat: chats concurrently, each chat's updates one
    after another in the order they arrived. The next request, whose offset confirms the batch to
    Telegram, goes out only once every update of the batch has been handled, so a crash never
    loses a confirmed update (the engine's inbox answers a redelivered message once).

    An update the store could not record (:class:`tools.StoreUnavailable`: the database is
    unreachable, its disk full or read-only) holds the batch back: it is not confirmed, its
    chat's later updates wait, and the batch is fetched again after a pause (the inbox takes
    each message once).

    Nothing wedges it: an update that fails otherwise is logged and passed over; an update PTB
    cannot even parse is skipped (logged once by id and reason, never its text) and confirmed
    with the rest, which is why the batch is fetched as JSON and parsed update by update (PTB's
    ``get_updates`` fails the whole batch and logs it raw). A rejected token (401) and another
    poller on the same token (409) are reported once each, in words a person can act on, and
    retried with backoff. A getUpdates that stays unanswered past its long-poll timeout plus a
    margin (a proxy or connection that keeps the socket open and says nothing, or trickles
    keep-alive bytes that defeat the socket's read timeout) is abandoned by a watchdog of its
    own and sent again, reported once per episode.
    """

    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[None]],
        *,
        timeout_s: float,
        retry_initial_s: float,
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._timeout_s = timeout_s
        self._retry_initial_s = retry_initial_s
        self._offset: int | None = None  # the first update not handled yet
        self._confirmed: int | None = None  # the offset of the last getUpdates that succeeded

    async def run(self) -> None:
        """Polls until cancelled. A batch in progress then finishes (bounded), and Telegram is
        told which updates were handled."""
        try:
            await self._poll()
        finally:
            if self._offset != self._confirmed:
                await self._confirm()

    async def _poll(self) -> None:
        backoff = Backoff(self._retry_initial_s)
        reported: type[Exception] | None = None  # the trouble already logged, once per episode
        unrecorded: Backoff | None = None  # while the store cannot record updates
        while True:
            try:
                batch = await self._fetch(self._timeout_s)
            except (TimeoutError, TimedOut) as exc:  # sent, connected, but no answer came
                if isinstance(exc, TimedOut) and not_sent(exc):  # no connection at all
                    log.warning(UNREACHABLE, backoff.upcoming_s, exc)
                else:
                    if reported is not TimeoutError:  # once per episode
                        log.warning(
                            DEAF_POLL, self._timeout_s + 2 * _READ_MARGIN_S, self._timeout_s
                        )
                    reported = TimeoutError
            except RetryAfter as exc:
                wait = _seconds(exc.retry_after)
                log.warning("Telegram asked to wait %gs before polling again", wait)
                api_retry("telegram")
                await asyncio.sleep(wait)
                continue
            except InvalidToken:  # its message may contain the token: never log it
                if reported is not InvalidToken:
                    log.error(TOKEN_REJECTED, backoff.max_s)
                reported = InvalidToken
            except Conflict:
                if reported is not Conflict:
                    log.error(POLLING_CONFLICT, backoff.max_s)
                reported = Conflict
            except TelegramError as exc:
                log.warning(UNREACHABLE, backoff.upcoming_s, exc)
            except Exception as exc:  # a reply that is not the JSON the Bot API sends
                log.error("could not read Telegram's answer to getUpdates (%s)", unreadable(exc))
            else:
                if reported is not None:
                    log.info("Telegram: polling works again")
                reported = None
                updates, next_offset = self._read(batch)
                if next_offset is None:
                    backoff.reset()
                    continue
                try:
                    await _finish_when_cancelled(self._run_batch(updates, next_offset))
                except StoreUnavailable:
                    if unrecorded is None:  # once per episode; the store says why
                        log.warning(
                            "Telegram: updates not confirmed while the store cannot record "
                            "them; Telegram keeps them, fetched again every few seconds"
                        )
                    unrecorded = unrecorded or Backoff(self._retry_initial_s, max_s=_STORE_S)
                    await unrecorded.sleep()
                    continue
                if unrecorded is not None:
                    log.info("Telegram: updates are recorded again")
                unrecorded = None
                backoff.reset()
                continue
            api_retry("telegram")
            await backoff.sleep()

    async def _fetch(self, timeout_s: float) -> list[object]:
        """One getUpdates, as JSON (its offset confirms what came before)."""
        offset = self._offset
        params = {"offset": offset, "timeout": timeout_s, "allowed_updates": ALLOWED_UPDATES}
        # Bot._post: PTB's own request path (rate limiter, error mapping) without parsing; its
        # read timeout bounds a silence, the watchdog (a margin later) a trickle as well.
        post = self._bot._post("getUpdates", params, read_timeout=timeout_s + _READ_MARGIN_S)
        # asyncio.timeout, not wait_for: on Python 3.11 a wait_for whose answer arrives as the
        # task is cancelled returns the answer and loses the cancellation, and stop() then
        # waited forever for a poller that went on polling.
        async with asyncio.timeout(timeout_s + 2 * _READ_MARGIN_S):
            batch = await post
        self._confirmed = offset
        return batch if isinstance(batch, list) else []

    def _read(self, batch: list[object]) -> tuple[list[Update], int | None]:
        """The updates of `batch` that PTB can parse, and the offset that confirms the whole
        batch, unreadable updates included (None for an empty batch)."""
        ids = [u["update_id"] for u in batch if isinstance(u, dict) and _is_id(u.get("update_id"))]
        updates = [u for raw in batch if (u := parse_update(raw, self._bot)) is not None]
        return updates, (max(ids) + 1 if ids else None)

    async def _run_batch(self, updates: Sequence[Update], next_offset: int) -> None:
        chats: dict[tuple[str, int], list[Update]] = {}
        for update in updates:
            chat = update.effective_chat
            key = ("chat", chat.id) if chat is not None else ("update", update.update_id)
            chats.setdefault(key, []).append(update)
        done = await asyncio.gather(
            *(self._in_order(chat) for chat in chats.values()), return_exceptions=True
        )
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome  # not recorded: the batch stays unconfirmed
        self._offset = next_offset

    async def _in_order(self, updates: list[Update]) -> None:
        for update in updates:
            try:
                await self._handle(update)  # handler errors go to PTB's error handler
            except StoreUnavailable:
                raise  # this chat's later updates must not overtake it
            except Exception:
                log.exception("Telegram update %s failed", update.update_id)

    async def _confirm(self) -> None:
        try:
            await asyncio.wait_for(self._fetch(0), _FINISH_S)
        except (TelegramError, TimeoutError) as exc:
            log.warning("could not confirm the handled updates, they will come again: %s", exc)


async def _finish_when_cancelled(work: Awaitable[None]) -> None:
    """Await `work`; when cancelled meanwhile, give it _FINISH_S more, then cancel it."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        log.info("Telegram: stopping once the updates being handled are done")
        if not (await asyncio.wait({task}, timeout=_FINISH_S))[0]:
            log.warning("stopped with Telegram updates still being handled; they come again")
            task.cancel()
            await asyncio.wait({task})
        raise


def _seconds(period: int | timedelta) -> float:
    return period.total_seconds() if isinstance(period, timedelta) else float(period)


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

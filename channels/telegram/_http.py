"""python-telegram-bot's requests over aiohttp instead of httpx.

PTB's own ``HTTPXRequest`` spends about 1 ms of CPU per Bot API call in httpx; aiohttp (already
installed for discord.py) does the same call for about a third of that, and a bot makes three
calls per answer (getUpdates, sendChatAction, sendMessage). ``BaseRequest`` is PTB's extension
point for exactly this; everything above it (rate limiter, retries, error mapping) is PTB's.

aiohttp has no write timeout; the others map onto ``aiohttp.ClientTimeout``. Every Bot API
call passes here, so this is where a failed one is counted (the engine's metrics). PTB's rate
limiter (:func:`rate_limiter`) sits above it and only waits out Telegram's 429s.
"""

from __future__ import annotations

import json

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TelegramError, TimedOut
from telegram.ext import AIORateLimiter
from telegram.request import BaseRequest, RequestData

from engine.metrics import api_error, api_retry


class AiohttpRequest(BaseRequest):
    """One aiohttp session with up to `connections` connections to the Bot API."""

    __slots__ = ("_connect", "_connections", "_pool", "_read", "_session")

    def __init__(
        self,
        connections: int = 256,
        *,
        read_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        pool_timeout: float = 1.0,
    ) -> None:
        self._connections = connections
        self._read, self._connect, self._pool = read_timeout, connect_timeout, pool_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            raise RuntimeError("AiohttpRequest is not initialized")
        connect = _given(connect_timeout, self._connect)
        timeout = aiohttp.ClientTimeout(
            connect=_add(_given(pool_timeout, self._pool), connect),
            sock_connect=connect,
            sock_read=_given(read_timeout, self._read),
        )
        try:
            async with self._session.request(
                method, url, data=_body(request_data), timeout=timeout
            ) as response:
                status, body = response.status, await response.read()
        except aiohttp.ConnectionTimeoutError as exc:  # no connection: nothing was sent
            _failed(url, "connect timeout")
            raise TimedOut("Connect timeout: the request was not sent") from exc
        except TimeoutError as exc:
            _failed(url, "timed out")
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            _failed(url, f"{type(exc).__name__}: {exc}")
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
        if status >= 400:
            _failed(url, f"HTTP {status} {_description(body)}")
            if status == 429:  # the rate limiter waits retry_after and sends it again
                api_retry("telegram")
        return status, body


def not_sent(exc: TelegramError) -> bool:
    """True when a failed request surely did not reach Telegram (safe to send again)."""
    cause = exc.__cause__
    if isinstance(exc, TimedOut):
        return isinstance(cause, aiohttp.ConnectionTimeoutError)
    if type(exc) is NetworkError:
        # No cause: the server (or a gateway) answered 5xx. A connector error: no connection.
        return cause is None or isinstance(cause, TelegramError | aiohttp.ClientConnectorError)
    return False


def _failed(url: str, what: str) -> None:
    """Count a failed call; the Bot API method names it (the URL holds the token)."""
    api_error("telegram", f"{url.rsplit('/', 1)[-1]}: {what}")


def _description(body: bytes) -> str:
    try:
        return str(json.loads(body).get("description", ""))
    except (ValueError, AttributeError):
        return ""


def _body(request_data: RequestData | None) -> aiohttp.FormData | dict[str, str] | None:
    if request_data is None:
        return None
    if not request_data.contains_files:
        return request_data.json_parameters
    form = aiohttp.FormData(request_data.json_parameters)
    for name, value in request_data.multipart_data.items():
        if isinstance(value, tuple):
            filename, content, mime = (*value, None)[:3]
            form.add_field(name, content, filename=filename, content_type=mime)
        else:
            form.add_field(name, value)
    return form


def _given(value: ODVInput[float], default: float) -> float | None:
    return default if isinstance(value, DefaultValue) else value


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def rate_limiter() -> AIORateLimiter:
    # No proactive throttle (PTB's defaults cap the whole bot at 30 messages/s and a group at
    # 20/min, edits included): Telegram's 429 answers are the authority, and every request
    # waits out their retry_after.
    return AIORateLimiter(overall_max_rate=0, group_max_rate=0, max_retries=5)

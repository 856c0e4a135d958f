"""Who may use the web console, through its real HTTP server (aiohttp) in a real daemon (App)
with the real python-telegram-bot over the fake Bot API: a session ends when its owner leaves
`[access] admins` (by a reload), and failed sign-ins are limited per address, with a ceiling
over all of them that cannot lock an owner with a good link out."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest

from bot._reload import Reloader
from bot.app import App
from bot.config import Config
from engine.store import CONSOLE_CLI
from tests.fakes.openai_server import FakeOpenAI, echo
from tests.fakes.telegram_server import FakeTelegram
from tests.test_console_web import free_port, to

OWNER, CO_OWNER = 11, 33


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def configs(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    listen = f"127.0.0.1:{free_port()}"

    def config(*owners: int) -> Config:
        telegram = {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "allowed_users": [str(OWNER), str(CO_OWNER)],
            "poll_timeout_s": 5,
        }
        return make_config(
            telegram=telegram,
            access={"admins": [f"telegram:{o}" for o in owners]},
            web={"listen": listen},
        )

    return config


async def link(tg: FakeTelegram, owner: int) -> str:
    """A sign-in link's token, asked for with /console in the owner's private chat."""
    links = to(owner, "/signin?t=")
    before = sum(1 for call in tg.calls_of("sendMessage") if links(call.params))
    tg.inject_message(owner, owner, "/console")
    sent = await tg.wait_for_call("sendMessage", links, count=before + 1)
    found = re.search(r"/signin\?t=(\S+)", sent.params["text"])
    assert found is not None
    return found.group(1)


def browser(source: str = "127.0.0.1") -> aiohttp.ClientSession:
    """A client with its own cookies, connecting from `source` (any loopback address)."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.CookieJar(unsafe=True))


async def sign_in(client: aiohttp.ClientSession, base: str, token: str) -> tuple[int, str]:
    async with client.post(f"{base}/signin", data={"t": token}) as answer:
        return answer.status, await answer.text()


async def overview(client: aiohttp.ClientSession, base: str) -> int:
    async with client.get(f"{base}/") as answer:
        body = await answer.text()
        assert (answer.status == 200) == ("<h1>Overview</h1>" in body)
        return answer.status


async def test_a_session_ends_when_its_owner_is_removed_by_a_reload(
    configs: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.default = echo
    config = configs(OWNER, CO_OWNER)
    base = f"http://{config.web.listen}"
    async with App(config) as app, browser() as owner, browser() as co_owner, browser() as shell:
        assert (await sign_in(owner, base, await link(tg, OWNER)))[0] == 200
        assert (await sign_in(co_owner, base, await link(tg, CO_OWNER)))[0] == 200
        from_server = await app.store.console.new_link(CONSOLE_CLI, 600)  # console-link
        assert (await sign_in(shell, base, from_server))[0] == 200
        unused = await link(tg, CO_OWNER)
        assert [await overview(c, base) for c in (owner, co_owner, shell)] == [200] * 3

        reloader = Reloader(app, None)
        assert await reloader.apply(configs(OWNER))  # the co-owner is removed
        assert [await overview(c, base) for c in (owner, co_owner, shell)] == [200, 401, 200]
        status, body = await sign_in(co_owner, base, unused)  # a link made before
        assert status == 401 and "no longer one of the bot" in body
        assert await overview(co_owner, base) == 401

        assert await reloader.apply(configs(OWNER, CO_OWNER))  # back: the old session is over
        assert await overview(co_owner, base) == 401
        assert (await sign_in(co_owner, base, await link(tg, CO_OWNER)))[0] == 200
        assert await overview(co_owner, base) == 200


async def test_failed_sign_ins_are_limited_per_address_and_never_lock_an_owner_out(
    configs: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.default = echo
    config = configs(OWNER)
    base = f"http://{config.web.listen}"
    guess = "A" * 43  # the shape of a link, and wrong

    async def guesses(source: str, count: int) -> list[int]:
        async with browser(source) as client:
            return [(await sign_in(client, base, guess))[0] for _ in range(count)]

    async with App(config):
        # one address: five failures, then refused without a look (429)
        assert await guesses("127.0.0.2", 6) == [401] * 5 + [429]
        assert await guesses("127.0.0.3", 1) == [401]  # another address is not
        async with browser("127.0.0.2") as owner:  # an owner behind that address (a proxy)
            status, body = await sign_in(owner, base, await link(tg, OWNER))
            assert status == 200 and "<h1>Overview</h1>" in body
        # many addresses: past the ceiling (50) every failure is refused without a look...
        for n in range(10, 18):  # 6 failures so far, and 44 more
            assert await guesses(f"127.0.0.{n}", 5) == [401] * 5
        assert await guesses("127.0.0.18", 4) == [401] * 4
        assert await guesses("127.0.0.40", 1) == [429]
        # ...but a good link still signs its owner in, from anywhere
        async with browser("127.0.0.41") as owner:
            status, body = await sign_in(owner, base, await link(tg, OWNER))
            assert status == 200 and "<h1>Overview</h1>" in body

"""The web console follows a reload (issue 39): `[web] listen` added starts it, changed moves
it, removed stops it, and `relaybot console-link` (run against the file, as on the server) then
prints a link that signs in where the console is; an address that cannot be listened on refuses
the whole reload, and the console and every other setting stay as they were. The real App with
python-telegram-bot against the fake Bot API, the fake LLM, the console's real aiohttp server."""

from __future__ import annotations

import io
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot import _operate
from bot._reload import Reloader, read_checked
from bot.app import App
from bot.config import load_config
from tests.fakes.openai_server import FakeOpenAI, echo
from tests.fakes.telegram_server import FakeTelegram
from tests.test_reload_keys import changed, free_port, toml
from tools.errors import ConfigError

OWNER = 7


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def console_link(path: Path) -> str:
    out = io.StringIO()
    await _operate.console_link(load_config(path), out)
    return out.getvalue().strip()


async def signs_in(link: str) -> bool:
    """Whether `link` signs in (pressing its button), and the session then opens the overview."""
    base, _, token = link.partition("/signin?t=")
    jar = aiohttp.CookieJar(unsafe=True)  # keeps the cookie of an address like 127.0.0.1
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.post(f"{base}/signin", data={"t": token}, allow_redirects=False) as r:
            if r.status != 303:
                return False
        async with http.get(f"{base}/") as page:
            return page.status == 200 and "Sign in" not in await page.text()


async def serves(port: int) -> bool:
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/signin") as r:
                return r.status == 200
    except aiohttp.ClientConnectorError:
        return False


async def test_a_reload_starts_moves_and_stops_the_console_and_console_link_follows(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.default = echo
    base: dict[str, Any] = {
        "llm": {"base_url": llm.base_url, "api_key": "sk-first-key-0001", "model": "fake-model"},
        "storage": {"path": str(tmp_path / "relaybot.db")},
        "telegram": {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "poll_timeout_s": 5,
            "allowed_users": [str(OWNER)],
        },
        "access": {"admins": [f"telegram:{OWNER}"]},
        "tools": {"builtins": []},
    }
    path = tmp_path / "config.toml"
    path.write_text(toml(base))
    first, second = free_port(), free_port()
    async with App(read_checked(path)) as app:
        reloader = Reloader(app, path)
        with pytest.raises(ConfigError, match="the console is off"):
            await console_link(path)

        path.write_text(toml(changed(base, {"web.listen": f"127.0.0.1:{first}"})))
        assert await reloader.reload()
        assert await serves(first)
        link = await console_link(path)
        assert link.startswith(f"http://127.0.0.1:{first}/signin?t=")
        assert await signs_in(link)

        path.write_text(toml(changed(base, {"web.listen": f"127.0.0.1:{second}"})))
        assert await reloader.reload()
        assert not await serves(first)
        assert await signs_in(await console_link(path))

        # an address in use: the whole reload is refused, the console stays where it was
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            moved = {"web.listen": f"127.0.0.1:{busy}", "llm.system_prompt": "You are B."}
            path.write_text(toml(changed(base, moved)))
            assert not await reloader.reload()
        assert await serves(second)
        assert app.config.web.listen == f"127.0.0.1:{second}"
        assert not app.dispatcher.live.settings.system_prompt.startswith("You are B.")

        path.write_text(toml(base))
        assert await reloader.reload()
        assert not await serves(second)
        with pytest.raises(ConfigError, match="the console is off"):
            await console_link(path)

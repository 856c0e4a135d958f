"""OAuth 2.1 for a remote MCP server, through the daemon (App, store, dispatcher, the fake LLM
scripted with tool calls, the [web] console) against an OAuth-protected server written with the
SDK's server-side auth (tests/fakes/mcp_oauth_server.py): the owner gets the sign-in link in
private, opening it returns through [web] and the tool works; a restart reuses the stored
token; the store holds no token in plain text; a grant the server dropped sends a new link."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from bot._checks import tool_problems
from bot._mcp_oauth import NO_WEB
from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.ports import free_port
from tests.test_security_mcp import LineWaiter
from tools.builtins._bwrap import secret_paths
from tools.config import McpServerConfig

FAKE = str(Path(__file__).parent / "fakes" / "mcp_oauth_server.py")
LINK = re.compile(r"http://127\.0\.0\.1:\d+/authorize\?\S+")


@contextlib.asynccontextmanager
async def fake_server(*args: str) -> AsyncIterator[str]:
    """tests/fakes/mcp_oauth_server.py on a free port, with `args` after the port: its base URL."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        FAKE,
        str(port),
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with asyncio.timeout(20), httpx.AsyncClient() as client:
            while True:
                try:
                    await client.get(f"{base}/.well-known/oauth-authorization-server")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)  # polling for the process to listen
        yield base
    finally:
        proc.kill()
        await proc.wait()


@pytest.fixture
async def oauth_server() -> AsyncIterator[str]:
    async with fake_server() as base:
        yield base


def oauth_config(make_config: Callable[..., Config], base: str) -> Config:
    server = {"name": "remote", "url": f"{base}/mcp", "auth": "oauth"}
    return make_config(
        mcp={"servers": [server]},
        web={"listen": f"127.0.0.1:{free_port()}"},
        access={"admins": ["test:owner"]},
    )


@pytest.fixture
def config(make_config: Callable[..., Config], oauth_server: str) -> Config:
    return oauth_config(make_config, oauth_server)


async def _running(config: Config) -> App:
    app = App(config, channels=[RecordingChannel()])
    await app.__aenter__()
    app.dispatcher.settings.allowed_users["test"] = {"u1"}
    return app


def _channel(app: App) -> RecordingChannel:
    channel = app.channels[0]
    assert isinstance(channel, RecordingChannel)
    return channel


async def _link(app: App, count: int = 1) -> str:
    shown = await _channel(app).wait_for("private", count, timeout=20)
    assert shown[-1].chat_id == "owner"
    found = LINK.search(shown[-1].text)
    assert found, shown[-1].text
    return found.group(0)


async def _open(link: str) -> httpx.Response:
    """The owner opens the link: the authorization server approves and sends the browser to
    the callback on [web]."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=10) as browser:
        return await browser.get(link)


async def _sign_in(app: App, link: str) -> httpx.Response:
    """Open `link` and wait until the server's tools are registered (they come with it)."""
    logger = logging.getLogger("tools.mcp")
    waiter, level = LineWaiter("MCP server remote started"), logger.level
    logger.addHandler(waiter)
    logger.setLevel(logging.INFO)
    try:
        page = await _open(link)
        await asyncio.wait_for(waiter.seen.wait(), 20)
    finally:
        logger.removeHandler(waiter)
        logger.setLevel(level)
    assert "remote__secret_word" in app.registry.names()
    return page


async def _turn(app: App, said: str) -> str:
    channel = _channel(app)
    before = len(channel.texts(chat_id="c"))
    await app.dispatcher.handle_inbound(channel.message(said, chat_id="c", user_id="u1"))
    await channel.wait_for("send", before + 1, chat_id="c", timeout=30)
    await app.dispatcher.wait_idle("test", "c")
    return channel.texts(chat_id="c")[-1]


def _tool_text(llm: FakeOpenAI) -> str:
    body = llm.requests[-1]
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")


async def test_the_owner_signs_in_by_a_private_link_and_the_token_outlives_a_restart(
    config: Config, llm: FakeOpenAI, tmp_path: Path
) -> None:
    llm.script(tool_call("remote__secret_word", {}), text("Got it."))
    app = await _running(config)
    try:
        key = tmp_path / "mcp-oauth.key"  # made at the start, hidden from commands and servers
        assert key.stat().st_mode & 0o777 == 0o600 and str(key) in secret_paths()
        link = await _link(app)
        assert [s.kind for s in _channel(app).log if s.chat_id == "c"] == []  # not to a group
        assert "remote__secret_word" not in app.registry.names()  # not before the sign-in
        page = await _sign_in(app, link)
        assert page.status_code == 200 and "Signed in" in page.text
        assert str(page.url).startswith(config.web.base_url() or "")
        assert await _turn(app, "the secret word?") == "Got it."
        assert _tool_text(llm) == "swordfish"
    finally:
        await app.__aexit__(None, None, None)
    stored = (tmp_path / "relaybot.db").read_bytes()
    assert b"access_token" not in stored and b"refresh_token" not in stored
    with contextlib.closing(sqlite3.connect(tmp_path / "relaybot.db")) as db:
        rows = dict(db.execute("SELECT kind, sealed FROM mcp_oauth WHERE server = 'remote'"))
    assert set(rows) == {"tokens", "client"}
    assert all(sealed.startswith("gAAAAA") for sealed in rows.values())  # Fernet tokens

    llm.script(tool_call("remote__secret_word", {}), text("Again."))
    app = await _running(config)
    try:
        assert "remote__secret_word" in app.registry.names()  # at the start: no link needed
        assert await _turn(app, "once more?") == "Again."
        assert _tool_text(llm) == "swordfish"
        assert _channel(app).texts("private") == []
    finally:
        await app.__aexit__(None, None, None)


async def test_after_a_restart_an_expired_token_is_refreshed_not_asked_again(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with fake_server("2") as base, httpx.AsyncClient() as client:
        # the signed-in token expires in 2 s (a refreshed one in an hour)
        config = oauth_config(make_config, base)
        app = await _running(config)
        try:
            await _sign_in(app, await _link(app))
        finally:
            await app.__aexit__(None, None, None)
        await asyncio.sleep(2.1)  # not a wait for an event: the token's lifetime passing
        assert (await client.get(f"{base}/test/counts")).json() == {"code": 1, "refresh": 0}
        llm.script(tool_call("remote__secret_word", {}), text("Fresh."))
        app = await _running(config)
        try:
            assert "remote__secret_word" in app.registry.names()
            assert await _turn(app, "the word?") == "Fresh."
            assert _tool_text(llm) == "swordfish"
            assert _channel(app).texts("private") == []
        finally:
            await app.__aexit__(None, None, None)
        assert (await client.get(f"{base}/test/counts")).json() == {"code": 1, "refresh": 1}


async def test_a_grant_the_server_dropped_sends_a_new_link(
    config: Config, oauth_server: str
) -> None:
    app = await _running(config)
    try:
        await _sign_in(app, await _link(app))
    finally:
        await app.__aexit__(None, None, None)
    async with httpx.AsyncClient() as client:
        dropped = (await client.post(f"{oauth_server}/test/revoke")).json()["dropped"]
    assert dropped >= 2  # the access token and the refresh token
    app = await _running(config)
    try:
        await _sign_in(app, await _link(app))
    finally:
        await app.__aexit__(None, None, None)


async def test_a_callback_nobody_waits_for_is_refused(config: Config) -> None:
    app = await _running(config)
    try:
        await _link(app)
        base = config.web.base_url()
        async with httpx.AsyncClient() as browser:
            forged = await browser.get(f"{base}/mcp/oauth/callback?code=x&state=guessed")
        assert forged.status_code == 400
        assert "remote__secret_word" not in app.registry.names()
    finally:
        await app.__aexit__(None, None, None)


def test_auth_is_for_servers_reached_by_url() -> None:
    with pytest.raises(ValueError, match="`auth` and `scopes` apply only to servers reached by"):
        McpServerConfig(name="local", command="x", auth="oauth")
    remote = McpServerConfig(name="r", url="https://e/mcp", auth="oauth", scopes=["read"])
    assert (remote.auth, remote.scopes, remote.client_name) == ("oauth", ["read"], "relaybot")


async def test_without_web_the_log_says_oauth_needs_it(
    make_config: Callable[..., Config], oauth_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = {"name": "remote", "url": f"{oauth_server}/mcp", "auth": "oauth"}
    config = make_config(mcp={"servers": [server]}, access={"admins": ["test:owner"]})
    app = await _running(config)
    try:
        assert "remote__secret_word" not in app.registry.names()
    finally:
        await app.__aexit__(None, None, None)
    assert 'auth = "oauth" needs [web] listen' in caplog.text
    problems = tool_problems(config).problems  # what doctor and check-config report
    assert problems == [f"MCP server remote: {NO_WEB}"]

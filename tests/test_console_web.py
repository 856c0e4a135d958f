"""The web console in a real browser: headless Chromium (Debian's, driven by Playwright) against
the real daemon (App) with the real python-telegram-bot over the fake Bot API and the fake LLM.
Conversations are made through the fakes; the owner gets a link with /console, signs in, reads
each page, cancels a reminder (a running background job) and revokes a grant; a request without
a session gets the sign-in page only, and a form with a stale CSRF token changes nothing.
Screenshots of every page are saved under the test's tmp dir (the path is printed)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, echo, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.ports import free_port
from tests.prerequisites import require
from tools import tool

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OWNER, ANN = 11, 22


def _browser_or_skip() -> Any:
    """Playwright's async API, or a skip (a failure under CI=true: there it must run)."""
    require("chromium")
    from playwright.async_api import async_playwright  # the dev extra's

    return async_playwright


@tool(destructive=True, summary="Wipe {name}")
async def wipe(name: str) -> str:
    """Wipe a file."""
    return f"wiped {name}"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def to(chat: int, text: str | None = None) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat and (text is None or text in p.get("text", ""))


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Config:
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": [str(OWNER), str(ANN)],
        "poll_timeout_s": 5,
    }
    return make_config(
        telegram=telegram,
        access={"admins": [f"telegram:{OWNER}"]},
        tools={"builtins": ["remind_me"]},
        web={"listen": f"127.0.0.1:{free_port()}"},
        pricing={"fake-model": {"input_per_mtok": 2.5, "output_per_mtok": 10}},
    )


async def converse(tg: FakeTelegram, llm: FakeOpenAI) -> None:
    """Ann asks for a reminder (a background job left running) and has a file wiped, pressing
    "Always allow here" (a grant); the owner says hello."""
    llm.script(
        tool_call("remind_me", {"text": "stretch", "in_seconds": 3600}),
        text("I will remind you."),
        tool_call("wipe", {"name": "notes.txt"}),
        text("Wiped notes.txt."),
    )
    llm.default = echo
    tg.inject_message(ANN, ANN, "remind me to stretch in an hour", first_name="Ann")
    await tg.wait_for_call("sendMessage", to(ANN, "I will remind you."))
    tg.inject_message(ANN, ANN, "wipe notes.txt please", first_name="Ann")
    prompt = await tg.wait_for_call("sendMessage", to(ANN, "Wipe notes.txt"))
    always = [b for row in prompt.params["reply_markup"]["inline_keyboard"] for b in row]
    [data] = [b["callback_data"] for b in always if b["text"] == "Always allow here"]
    message = max(m for (c, m) in tg.messages if c == ANN)
    tg.inject_callback(ANN, ANN, message, data)
    await tg.wait_for_call("sendMessage", to(ANN, "Wiped notes.txt."))
    tg.inject_message(OWNER, OWNER, "hello there", first_name="Olga")
    await tg.wait_for_call("sendMessage", to(OWNER, "echo: hello there"))


async def test_an_owner_signs_in_by_link_reads_every_page_cancels_a_job_and_revokes_a_grant(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI, tmp_path: Path
) -> None:
    async_playwright = _browser_or_skip()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nconsole screenshots: {shots}")
    base = f"http://{config.web.listen}"
    db = config.storage.resolved_path()
    async with App(config, extra_tools=[wipe]):
        await converse(tg, llm)
        tg.inject_message(OWNER, OWNER, "/console")
        sent = await tg.wait_for_call("sendMessage", to(OWNER, "/signin?t="))
        link = re.search(r"http://\S+", sent.params["text"])
        assert link is not None and link.group().startswith(f"{base}/signin?t=")
        tg.inject_message(ANN, ANN, "/console")  # not an owner: no link
        refused = await tg.wait_for_call("sendMessage", to(ANN, "Only the bot's owners"))
        assert "/signin" not in refused.params["text"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            context = await browser.new_context(viewport={"width": 1100, "height": 900})
            page = await context.new_page()

            async def shot(name: str) -> None:
                await page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

            # Without a session: the sign-in page, whatever the address.
            for path in ("/", "/conversations", "/conversations/1", "/work", "/nowhere"):
                answer = await page.goto(base + path)
                assert answer is not None and answer.status == 401
                assert await page.inner_text("h1") == "Sign in"
                assert "hello there" not in await page.content()
            await shot("0-signed-out")
            blocked = await page.request.post(base + "/cancel", form={"kind": "job", "id": "x"})
            assert blocked.status == 401

            # Sign in by the link: a button, then the overview.
            await page.goto(link.group())
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_url(base + "/")
            assert await page.inner_text("h1") == "Overview"
            body = await page.inner_text("main")
            assert "telegram" in body and "Answers in the last hour" in body
            cookie = next(c for c in await context.cookies() if c["name"] == "relaybot_console")
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            await shot("1-overview")

            # Conversations: all of them, then Ann's found by her user id and today's date.
            await page.click("text=Conversations")
            assert await page.locator("tbody tr").count() == 2
            await page.fill("#user", str(ANN))
            await page.get_by_role("button", name="Search").click()
            await page.wait_for_load_state()
            assert "user=" not in page.url and str(ANN) not in page.url
            rows = page.locator("tbody tr")
            assert await rows.count() == 1
            await shot("2-conversations")
            await rows.first.locator("a").click()
            await page.wait_for_url(re.compile(r"/conversations/\d+$"))
            said = await page.inner_text("main")
            assert "remind me to stretch in an hour" in said and "Wiped notes.txt." in said
            assert "wipe" in said and "wiped notes.txt" in said  # a call and its result
            assert "executed" in said  # the confirmation and its outcome
            await shot("3-conversation")

            # Usage: what each user spent, a chart drawn on the server, and the figures in tables.
            await page.click("text=Usage")
            assert await page.locator("svg.chart rect").count() >= 2  # Ann and the owner
            per_user = await page.locator("table").first.inner_text()
            assert f"telegram:{ANN}" in per_user and "$0.0" in per_user
            assert "fake-model" in await page.locator("table").nth(1).inner_text()
            await shot("4-usage")

            # Tools and grants: revoke Ann's "always" for wipe.
            await page.click("text=Tools and grants")
            stale = await page.locator("input[name=csrf]").first.get_attribute("value")
            await shot("5-tools")
            await page.get_by_role("button", name="Revoke wipe").click()
            await page.wait_for_load_state()
            assert "Revoked: the bot asks before wipe again" in await page.inner_text("main")
            with sqlite3.connect(db) as conn:
                assert conn.execute("SELECT COUNT(*) FROM grants").fetchone()[0] == 0

            # Jobs: cancel the reminder, after the confirmation step.
            await page.click("text=Jobs and confirmations")
            assert "remind_me" in await page.inner_text("main")
            await shot("6-jobs")
            await page.get_by_role("button", name="Cancel…").first.click()
            await page.wait_for_load_state()
            assert await page.inner_text("h1") == "Cancel?"
            await shot("7-cancel-confirm")
            with sqlite3.connect(db) as conn:
                assert conn.execute("SELECT state FROM jobs").fetchone()[0] == "running"
            await page.get_by_role("button", name="Yes, cancel it").click()
            await page.wait_for_load_state()
            assert "Cancelled the background task remind_me" in await page.inner_text("main")
            await tg.wait_for_call("sendMessage", to(ANN, "cancelled the background task"))
            with sqlite3.connect(db) as conn:
                assert conn.execute("SELECT state FROM jobs").fetchone()[0] == "interrupted"

            for name, title in (("pairing", "Pairing"), ("doctor", "Doctor"), ("errors", "Errors")):
                await page.click(f"header >> text={title}")
                assert await page.inner_text("h1") == title
                await shot(f"8-{name}")

            # Phone-sized: the same page, readable.
            await page.set_viewport_size({"width": 390, "height": 844})
            await page.click("text=Overview")
            await shot("9-overview-phone")

            # Sign out; a new sign-in; the old page's CSRF token is stale: refused, no change.
            await page.get_by_role("button", name="Sign out").click()
            await page.wait_for_load_state()
            answer = await page.goto(base + "/")
            assert answer is not None and answer.status == 401
            reused = await page.goto(link.group())
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_load_state()
            assert "used, expired or wrong" in await page.inner_text("main")  # one use only
            tg.inject_message(OWNER, OWNER, "/console")
            again = await tg.wait_for_call("sendMessage", to(OWNER, "/signin?t="), count=2)
            found = re.search(r"http://\S+", again.params["text"])
            assert found is not None and reused is not None
            await page.goto(found.group())
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_url(base + "/")
            form = {"csrf": stale or "", "channel": "telegram", "chat": str(ANN), "tool": "wipe"}
            refused_post = await page.request.post(base + "/grants/revoke", form=form)
            assert refused_post.status == 403
            assert "nothing was changed" in await refused_post.text()
            await browser.close()

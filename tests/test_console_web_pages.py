"""The console's pages as an owner reads them (issue 40, item 9), in headless Chromium against the
real daemon over the fake Bot API and the fake LLM: the overview counts errors, not channels;
conversations name who wrote; Usage shows tokens when no model has a price; Tools shows a whole
first paragraph; a cancel step names the job by its tool and what it does; timestamps name their
zone; Pairing offers Allow / Deny only to an owner's session (not to a `relaybot console-link`
one) and a Revoke button for each approval."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.async_api import Page

from bot._operate import console_link
from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, echo, error, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.test_console_web import ARGS, CHROMIUM, _browser_or_skip, free_port, tg, to
from tools import tool

__all__ = ["tg"]  # the fixture, shared

OWNER, SAM, ZED = 11, 33, 44
PARAGRAPH = (
    "Look up the weather forecast for a city, for today and the next six days, from the "
    "national service. Use it when the user asks about the weather."
)


@tool
async def forecast(city: str) -> str:
    """Look up the weather forecast for a city, for today and the
    next six days, from the national service. Use it when the user asks about the weather.

    Internals the model needs and the console does not show."""
    return f"sunny in {city}"


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Config:
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": [str(OWNER)],
        "poll_timeout_s": 5,
    }
    return make_config(  # no [pricing]: fake-model has no price
        telegram=telegram,
        access={"admins": [f"telegram:{OWNER}"]},
        tools={"builtins": ["remind_me"]},
        web={"listen": f"127.0.0.1:{free_port()}"},
    )


async def _fact(page: Page, name: str) -> str:
    return await page.locator(f"dt:has-text('{name}') + dd").inner_text()


async def test_the_console_pages_say_what_an_owner_needs(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    async_playwright = _browser_or_skip()
    base = f"http://{config.web.listen}"
    async with App(config, extra_tools=[forecast]):
        llm.script(
            tool_call("remind_me", {"text": "stretch", "in_seconds": 3600}),
            text("I will remind you."),
            error(400, "unsupported option: top_k"),  # two model errors, in one channel
            error(400, "unsupported option: top_k"),
        )
        llm.default = echo
        tg.inject_message(OWNER, OWNER, "remind me to stretch in an hour", first_name="Olga")
        await tg.wait_for_call("sendMessage", to(OWNER, "I will remind you."))
        for n, words in enumerate(("one", "two"), 1):
            tg.inject_message(OWNER, OWNER, words, first_name="Olga")
            await tg.wait_for_call("sendMessage", to(OWNER, "refused this request"), count=n)
        for stranger, name in ((SAM, "Sam"), (ZED, "Zed")):
            tg.inject_message(stranger, stranger, "/start", first_name=name)
            await tg.wait_for_call("sendMessage", to(OWNER, f"{name}, telegram user"))
        tg.inject_message(OWNER, OWNER, "/console")
        sent = await tg.wait_for_call("sendMessage", to(OWNER, "/signin?t="))
        link = re.search(r"http://\S+", sent.params["text"])
        assert link is not None
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = await (await browser.new_context()).new_page()
            await page.goto(link.group())
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_url(base + "/")

            # the overview counts errors (2 of the model), once housekeeping stored them
            for _ in range(200):
                if await _fact(page, "Channel errors in the last hour") == "2":
                    break
                await page.reload()
            assert await _fact(page, "Channel errors in the last hour") == "2"
            loaded = await _fact(page, "Config loaded")
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z][A-Za-z0-9+-]*", loaded)

            await page.click("header >> text=Conversations")
            assert "Olga" in await page.locator("tbody tr").first.inner_text()

            await page.click("header >> text=Usage")
            main = await page.inner_text("main")
            assert "No model here has a price" in main and "not priced" in main
            assert "Tokens per user per day" in await page.locator("svg.chart").inner_html()
            assert await page.locator("svg.chart rect").count() >= 1

            await page.click("header >> text=Tools and grants")
            assert PARAGRAPH in await page.locator("tr", has_text="forecast").inner_text()

            await page.click("header >> text=Jobs and confirmations")
            await page.get_by_role("button", name="Cancel…").first.click()
            await page.wait_for_load_state()
            question = await page.inner_text("main")
            assert "Cancel the background task remind_me in telegram:11 (" in question
            assert "stretch" in question, question

            # an owner's session answers requests, and revokes an approval
            await page.click("header >> text=Pairing")
            sam = page.locator("tr", has_text="Sam")
            assert re.search(r"\d\d:\d\d:\d\d [A-Z]", await sam.inner_text())
            await sam.get_by_role("button", name="Allow").click()
            await page.wait_for_load_state()
            await tg.wait_for_call("sendMessage", to(SAM, "let you in"))
            await page.get_by_role("button", name="Revoke Sam").click()
            await page.wait_for_load_state()
            assert "Revoked: telegram user 33 is no longer let in." in await page.inner_text("main")
            tg.inject_message(SAM, SAM, "still there?", first_name="Sam")
            await tg.wait_for_call("sendMessage", to(SAM, "asked the owner"), count=2)

            # a `relaybot console-link` session: no buttons it cannot use, and why
            out = io.StringIO()
            assert await console_link(config, out) == 0
            cli = await (await browser.new_context()).new_page()
            await cli.goto(out.getvalue().strip())
            await cli.get_by_role("button", name="Sign in").click()
            await cli.wait_for_url(base + "/")
            await cli.click("header >> text=Pairing")
            zed = cli.locator("tr", has_text="Zed")
            assert await zed.get_by_role("button").count() == 0
            assert "Requests are answered by an owner" in await cli.inner_text("main")
            form: dict[str, Any] = {"csrf": await _csrf(cli), "code": "x", "allow": "yes"}
            refused = await cli.request.post(base + "/pairing", form=form)
            assert "Not answered" in await refused.text() and 'role="alert"' in await refused.text()
            await browser.close()


async def _csrf(page: Page) -> str:
    return await page.locator("input[name=csrf]").first.get_attribute("value") or ""

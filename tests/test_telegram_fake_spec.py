"""The fake Bot API refuses what the Bot API spec does not allow (issue 44), so a request the
real API would refuse, or silently ignore, fails in CI. Driven through python-telegram-bot's own
request machinery: its typed methods and, for what it does not know, its raw `do_api_request`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, EndPointNotFound

from tests.fakes.telegram_server import FakeTelegram

CHAT = 42
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBUserWarning")  # raw calls


@pytest.fixture
async def bot() -> AsyncIterator[tuple[Bot, FakeTelegram]]:
    async with FakeTelegram() as tg:
        async with Bot(tg.token, base_url=tg.base_url) as bot:
            yield bot, tg


async def test_a_request_the_spec_allows_goes_through(bot: tuple[Bot, FakeTelegram]) -> None:
    b, tg = bot
    keys = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="y" * 64)]])
    sent = await b.send_message(CHAT, "hello", reply_markup=keys)
    assert tg.calls_of("sendMessage")[-1].params["text"] == "hello"
    assert sent.text == "hello"


async def test_an_unknown_method_is_not_found(bot: tuple[Bot, FakeTelegram]) -> None:
    b, _ = bot
    with pytest.raises(EndPointNotFound):
        await b.do_api_request("sendTelepathy", api_kwargs={"chat_id": CHAT})


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"chat_id": CHAT, "text": "hi", "colour": "red"}, "has no parameter 'colour'"),
        ({"text": "hi"}, "'chat_id' is required"),
        ({"chat_id": CHAT, "text": "hi", "disable_notification": "loud"}, "of type Boolean"),
        ({"chat_id": CHAT, "text": "hi", "message_thread_id": "general"}, "of type Integer"),
        (
            {"chat_id": CHAT, "text": "hi", "reply_parameters": {"message_id": 1, "x": 2}},
            "ReplyParameters has no field 'x'",
        ),
        (
            {
                "chat_id": CHAT,
                "text": "hi",
                "reply_markup": {"inline_keyboard": [[{"text": "Yes", "callback_data": "y" * 65}]]},
            },
            "BUTTON_DATA_INVALID",
        ),
    ],
)
async def test_a_request_outside_the_spec_is_refused(
    bot: tuple[Bot, FakeTelegram], params: dict[str, object], words: str
) -> None:
    b, tg = bot
    with pytest.raises(BadRequest, match="(?i)" + re.escape(words)):
        await b.do_api_request("sendMessage", api_kwargs=params)
    assert tg.calls_of("sendMessage")[-1].status == 400


async def test_a_method_newer_than_the_library_is_checked_too(
    bot: tuple[Bot, FakeTelegram],
) -> None:
    """Bot API 10.1's sendRichMessage: python-telegram-bot 22.8 has no method for it, so it goes
    through the raw request; the fake checks its shape (with 10.2's blocks: the spec overlay)."""
    b, _ = bot
    with pytest.raises(BadRequest, match=r"(?i)'rich_message' is required"):
        await b.do_api_request("sendRichMessage", api_kwargs={"chat_id": CHAT})
    with pytest.raises(BadRequest, match=r"(?i)InputRichMessage has no field 'title'"):
        rich = {"blocks": [], "title": "x"}
        await b.do_api_request(
            "sendRichMessage", api_kwargs={"chat_id": CHAT, "rich_message": rich}
        )

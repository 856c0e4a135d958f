"""Local models as first-class (issue 27): requests strict chat templates accept, honest errors,
a calibrated estimate, summaries and answers that say when the length limit cut them.

The strict-template tests go through the real openai SDK to the fake server with
``strict_template`` on, which refuses what llama.cpp's jinja templates refuse, in its words.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

import openai
import pytest

from bot.app import App
from bot.config import Config
from engine.chat._turns._notices import apology
from engine.context import (
    ContextBudget,
    ContextSettings,
    Window,
    WindowInfo,
    WindowSource,
    for_model,
)
from engine.context._tokens import Ratios
from engine.loop._loop import CUT_NOTE, answer_text
from engine.models import (
    FailoverModel,
    FinishReason,
    Image,
    Message,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    Role,
    ScriptedModel,
    ToolCall,
    Usage,
)
from engine.models._alternate import EARLIER, EMPTY_MESSAGE, NO_REPLY, alternating
from engine.models._openai_shapes import to_openai
from tests.fakes.openai_server import (
    ALTERNATE,
    NO_CONTENT,
    SYSTEM_FIRST,
    FakeOpenAI,
    error,
    hold,
    template_error,
    text,
)
from tests.fakes.recording_channel import RecordingChannel
from tools.errors import (
    ContextOverflow,
    LLMError,
    ModelRefused,
    ModelServerError,
    ModelTimedOut,
    ModelUnreachable,
)

# -- the template rules, one by one --------------------------------------------------------------


def roles(messages: list[Message]) -> list[str]:
    return [m.role.value for m in messages]


def test_consecutive_user_messages_become_one_turn() -> None:
    png = Image("image/png", b"\x89PNG")
    out = alternating(
        [Message.user("one"), Message.user("two", images=[png]), Message.user("three")]
    )
    assert roles(out) == ["user"]
    assert out[0].text == "one\n\ntwo\n\nthree" and out[0].images == [png]


def test_consecutive_assistant_messages_become_one_with_their_calls() -> None:
    call = ToolCall("c1", "add", "{}")
    out = alternating(
        [
            Message.user("q"),
            Message.assistant("It is 3."),
            Message.assistant(None, [call]),
            Message.tool_result("c1", "done"),
        ]
    )
    assert roles(out) == ["user", "assistant", "tool"]
    assert out[1].text == "It is 3." and out[1].tool_calls == [call]


def test_a_user_message_after_an_unanswered_tool_result_gets_a_reply_before_it() -> None:
    out = alternating(
        [
            Message.user("what time is it?"),
            Message.assistant(None, [ToolCall("c1", "current_time", "{}")]),
            Message.tool_result("c1", "12:00"),
            Message.user("hello?"),  # the model was down after the tool ran
        ]
    )
    assert roles(out) == ["user", "assistant", "tool", "assistant", "user"]
    assert out[3].text == NO_REPLY
    body = to_openai("Be brief.", out)
    assert template_error(body) is None


def test_the_first_message_is_a_user_message_and_none_is_empty() -> None:
    out = alternating([Message.assistant("earlier answer"), Message.user("   ")])
    assert roles(out) == ["user", "assistant", "user"]
    assert out[0].text == EARLIER and out[2].text == EMPTY_MESSAGE  # the newest was blank
    out = alternating([Message.user("q"), Message.assistant(""), Message.user("r")])
    assert roles(out) == ["user"] and out[0].text == "q\n\nr"  # the empty answer left out
    empty_result = alternating(
        [
            Message.user("q"),
            Message.assistant(None, [ToolCall("c1", "t", "{}")]),
            Message.tool_result("c1", ""),
        ]
    )
    assert empty_result[-1].text and empty_result[-1].text.strip()


def test_the_system_prompt_goes_once_and_first() -> None:
    body = to_openai("Be brief.", [Message.user("a"), Message.assistant("b"), Message.user("c")])
    assert [m["role"] for m in body] == ["system", "user", "assistant", "user"]
    assert to_openai("", [Message.user("a")])[0]["role"] == "user"  # no empty system message


def test_the_fake_refuses_what_strict_templates_refuse() -> None:
    user = {"role": "user", "content": "hi"}
    assistant = {"role": "assistant", "content": "hello"}
    system = {"role": "system", "content": "be brief"}
    tool = {"role": "tool", "tool_call_id": "c1", "content": "12:00"}
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
    assert template_error([system, user, assistant, user]) is None
    assert template_error([user, call, tool, assistant]) is None
    assert template_error([user, user]) == ALTERNATE
    assert template_error([user, call, tool, user]) == ALTERNATE
    assert template_error([assistant, user]) == ALTERNATE
    assert template_error([user, system]) == SYSTEM_FIRST
    assert template_error([user, {"role": "assistant", "content": ""}]) == NO_CONTENT
    assert template_error([{"role": "user", "content": "  "}]) == NO_CONTENT


# -- through the real SDK --------------------------------------------------------------------------


@pytest.fixture
async def strict() -> Any:
    async with FakeOpenAI(strict_template=True) as server:
        yield server


async def test_the_sdk_meets_llama_cpps_refusal_and_relaybot_does_not(strict) -> None:
    client = openai.AsyncOpenAI(base_url=strict.base_url, api_key="k", max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError, match="roles must alternate"):
            await client.chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            )
    finally:
        await client.close()
    model = OpenAIModel(base_url=strict.base_url, api_key="", model="fake-model", max_retries=0)
    history = [Message.user("a"), Message.user("b")]
    try:
        reply = await model.complete(ModelRequest("sys", history))
    finally:
        await model.aclose()
    assert reply.text == "echo: a\n\nb" and strict.template_refusals == 1  # only the raw one


async def test_after_an_outage_the_next_message_is_answered(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    """The daemon end to end: the server goes away, two messages are stored unanswered, a
    server with a strict template comes back on the same port and answers the next one."""
    port = llm.port
    config = make_config(tools={"builtins": []})
    channel = RecordingChannel()
    async with App(config, channels=[channel]) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await llm.stop()
        for n, words in enumerate(("are you there?", "hello??"), 1):
            await app.dispatcher.handle_inbound(channel.message(words))
            shown = await channel.wait_for("send", n)
            assert "can't reach the language model" in shown[-1].text
        async with FakeOpenAI(port=port, strict_template=True) as back:
            await app.dispatcher.handle_inbound(channel.message("now?"))
            shown = await channel.wait_for("send", 3)
            assert shown[-1].text == "echo: are you there?\n\nhello??\n\nnow?"
            await app.dispatcher.handle_inbound(channel.message("and again"))
            shown = await channel.wait_for("send", 4)
            assert shown[-1].text == "echo: and again"
    assert back.template_refusals == 0
    assert [m["role"] for m in back.requests[0]["messages"]] == ["system", "user"]


# -- each failure its own words ------------------------------------------------------------------


async def failure(llm: FakeOpenAI, **kw: Any) -> Exception:
    kw.setdefault("base_url", llm.base_url)
    kw.setdefault("max_retries", 0)
    model = OpenAIModel(api_key="", model="fake-model", **kw)
    try:
        with pytest.raises(Exception) as caught:
            await model.complete(ModelRequest("", [Message.user("hi")]))
    finally:
        await model.aclose()
    return caught.value


async def test_each_failure_kind_has_its_own_words(llm: FakeOpenAI) -> None:
    llm.reject_unknown_models = True
    llm.models = ["other-model"]
    unknown = await failure(llm)
    llm.models = ["fake-model"]
    llm.script(error(400, "'temperature' must be a number"))
    invalid = await failure(llm)
    llm.script(error(500, "CUDA out of memory"))
    crashed = await failure(llm)
    llm.script(error(500, "Jinja Exception: Conversation roles must alternate"))
    template = await failure(llm)
    llm.script(hold(asyncio.Event(), text("never")))
    slow = await failure(llm, timeout_s=0.3)
    down = await failure(llm, base_url="http://127.0.0.1:9/v1")
    assert isinstance(unknown, ModelRefused) and unknown.kind == "model"
    assert isinstance(invalid, ModelRefused) and invalid.kind == "request"
    assert isinstance(crashed, ModelServerError)
    assert isinstance(template, ModelRefused) and template.kind == "template"
    assert isinstance(slow, ModelTimedOut)
    assert isinstance(down, ModelUnreachable) and "Connect call failed" in str(down)
    failures = (unknown, invalid, crashed, template, slow, down)
    words = [apology(e) for e in failures if isinstance(e, LLMError)]
    assert len(set(words)) == len(failures)
    assert "[llm] model" in words[0] and "later" in words[2] and "too long" in words[4]
    assert "can't reach" in words[5]


async def test_a_refused_request_is_neither_retried_nor_failed_over(llm: FakeOpenAI) -> None:
    async with FakeOpenAI() as fallback:
        primary = OpenAIModel(base_url=llm.base_url, api_key="", model="fake-model", max_retries=2)
        spare = OpenAIModel(base_url=fallback.base_url, api_key="", model="fake-model")
        model = FailoverModel([primary, spare])
        llm.script(error(400, "'temperature' must be a number"))
        try:
            with pytest.raises(ModelRefused):
                await model.complete(ModelRequest("", [Message.user("hi")]))
            llm.script(error(500, "CUDA out of memory"), error(500, "again"), error(500, "again"))
            reply = await model.complete(ModelRequest("", [Message.user("hi")]))
        finally:
            await model.aclose()
    assert len(llm.requests) == 1 + 3  # the refusal once; the server error with its retries
    assert reply.text == "echo: hi" and len(fallback.requests) == 1


# -- the estimate, the window, summaries and cut answers ------------------------------------------


async def test_an_overflows_own_count_sets_the_ratio_exactly() -> None:
    ratios = Ratios(None)
    llama = (
        "request (3300 tokens) exceeds the available context size (4096 tokens), try increasing it"
    )
    learned = await ratios.overflowed("m", 3000, llama)
    assert learned.ratio == pytest.approx(1.1) and learned.window == 4096  # not 1.2 x 1.1
    vague = await ratios.overflowed("m", 3000, "the prompt is too long")
    assert vague.ratio == pytest.approx(1.1 * 1.2)  # no count stated: a fifth more


async def test_a_message_that_fits_after_an_overflow_is_sent(llm: FakeOpenAI) -> None:
    """The server refuses one request and states its count and window; the retry of a message
    that fits the learned window goes out, with no refusal of relaybot's own."""
    llm.context_window, llm.server_kind = 1_500, "llama.cpp"
    model = OpenAIModel(base_url=llm.base_url, api_key="", model="fake-model", max_retries=0)
    budget = ContextBudget(model, None, ContextSettings(window=8_000))  # the window is wrong
    history = [Message.user("w" * 2_400 + " ".join(f"word{i}" for i in range(300)))]
    try:
        fitted = await budget.fit(Window(), list(history), "", [])
        with pytest.raises(ContextOverflow) as refused:
            await model.complete(fitted.request)
        await budget.overflowed(fitted, refused.value)
        again = await budget.fit(Window(), list(history), "", [], harder=True)
        reply = await model.complete(again.request)
    finally:
        await model.aclose()
    assert reply.text and reply.text.startswith("echo:") and llm.refused == 1
    assert (await budget.ratios.get("fake-model")).window == 1_500


async def test_a_window_not_asked_at_start_up_is_asked_again_once_the_server_answers() -> None:
    asked: list[str] = []

    async def discover(name: str) -> WindowInfo:
        asked.append(name)
        if len(asked) == 1:  # the server was down
            return WindowInfo(32_000, WindowSource.DEFAULT, "down", reached=False)
        return WindowInfo(4_096, WindowSource.SERVER, "told")

    model = ScriptedModel(lambda r: ModelResponse("ok", [], FinishReason.STOP, Usage(50, 2)))
    budget = ContextBudget(model, None, ContextSettings(discover=discover))
    first = await budget.fit(Window(), [Message.user("hi")], "", [])
    assert (await budget.window()).tokens == 32_000
    await budget.learn(first, Usage(50, 2))  # a reply: the server is back
    assert (await budget.window()).tokens == 4_096 and len(asked) == 2
    second = await budget.fit(Window(), [Message.user("hi")], "", [])
    await budget.learn(second, Usage(50, 2))
    assert len(asked) == 2  # asked once more, not on every reply
    assert second.request.output_room == 512  # the answer's room: an eighth of the window


async def test_a_summary_has_its_own_output_budget_and_a_cut_one_is_not_stored() -> None:
    cut_every_time = True

    def answer(request: ModelRequest) -> ModelResponse:
        if request.tools or request.max_output_tokens is None:
            return ModelResponse("answer", [], FinishReason.STOP, Usage(100, 5))
        finish = FinishReason.LENGTH if cut_every_time else FinishReason.STOP
        return ModelResponse("summary " * 20, [], finish, Usage(0, request.max_output_tokens))

    model = ScriptedModel(answer)
    budget = ContextBudget(model, None, ContextSettings(window=2_000, keep_recent_turns=1))
    history: list[Message] = []
    for i in range(8):
        history += [Message.user(f"question {i} " + "x" * 900), Message.assistant("fine")]
    history.append(Message.user("last"))
    window = Window()
    with pytest.raises(ContextOverflow):  # unfolded, the history does not fit
        await budget.fit(window, list(history), "", [])
    summaries = [r for r in model.requests if r.max_output_tokens is not None]
    assert len(summaries) == 2  # asked, cut, asked again for half the words, cut: given up
    words = [int(re.findall(r"at most (\d+) words", r.system)[0]) for r in summaries]
    assert words[1] == words[0] // 2
    assert summaries[0].max_output_tokens and summaries[0].max_output_tokens >= 2 * words[0]
    assert window.summary is None  # nothing stored as a summary
    cut_every_time = False
    model.requests.clear()
    await budget.fit(window, list(history), "", [])
    assert window.summary is not None and window.summary.text.startswith("summary")


def test_an_answer_cut_by_the_length_limit_says_so() -> None:
    cut = ModelResponse("Once upon a time there", [], FinishReason.LENGTH)
    assert answer_text(cut) == "Once upon a time there" + CUT_NOTE
    whole = ModelResponse("The end.", [], FinishReason.STOP)
    assert answer_text(whole) == "The end."
    stored = [Message.user("a story"), Message.assistant(answer_text(cut)), Message.user("go on")]
    assert for_model(stored)[1].text == "Once upon a time there"  # the note is not sent back


async def test_a_local_model_without_a_cap_gets_the_answers_room(llm: FakeOpenAI) -> None:
    local = OpenAIModel(base_url=llm.base_url, api_key="", model="fake-model")
    capped = OpenAIModel(
        base_url=llm.base_url, api_key="", model="fake-model", options={"max_tokens": 150}
    )
    hosted = OpenAIModel(base_url=None, api_key="", model="gpt-4o-mini")
    turn = ModelRequest("", [Message.user("hi")], output_room=1_024)
    summary = ModelRequest("", [Message.user("sum up")], max_output_tokens=300)
    try:
        await local.complete(turn)
        await capped.complete(turn)
        await capped.complete(summary)
    finally:
        await local.aclose()
        await capped.aclose()
    assert [r.get("max_tokens") for r in llm.requests] == [1_024, 150, 300]
    assert all("max_completion_tokens" not in r for r in llm.requests)
    assert hosted._cap(turn) is None and hosted._cap(summary) is None  # OpenAI's own limits


async def test_the_log_names_a_refused_connection_unreachable(
    llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    down = await failure(llm, base_url="http://127.0.0.1:9/v1")
    assert "unreachable" in str(down) and "timed out" not in str(down)
    assert Role.USER  # the neutral layer is what the loop sees
    logging.getLogger(__name__).info("%s", down)

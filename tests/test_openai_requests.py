"""How a plain OpenAI-compatible request travels: its first attempt on its own session, what
follows a failure through the SDK (its retry rules and delays), and what a user is told when
there is no answer. Real openai SDK and aiohttp against the fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import sys

import pytest

from engine import ModelRequest
from engine.models import Message, OpenAIModel
from tests.fakes.openai_server import FakeOpenAI, error, text
from tools.errors import ContextOverflow, ModelAuthError, ModelRefused, ModelUnreachable

FAST = {"retry-after-ms": "1"}


def request(words: str = "hello") -> ModelRequest:
    return ModelRequest(system="be brief", messages=[Message.user(words)])


@pytest.fixture
async def llm():
    async with FakeOpenAI(api_key="sk-right") as server:
        yield server


async def test_a_plain_answer_never_loads_the_sdk_and_sends_the_key(llm) -> None:
    llm.script(text("hi there"))
    model = OpenAIModel(base_url=llm.base_url, api_key="sk-right", model="m", max_retries=0)
    try:
        reply = await model.complete(request())
    finally:
        await model.aclose()
    assert reply.text == "hi there"
    assert llm.auth_headers == ["Bearer sk-right"]
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": "hello"}
    assert model._sdk is None  # no SDK client was built for it


async def test_a_rate_limit_and_a_busy_server_are_retried_after_the_delay_asked(llm) -> None:
    llm.script(error(429, "slow down", headers=FAST), error(503, "busy", headers=FAST), text("ok"))
    model = OpenAIModel(base_url=llm.base_url, api_key="sk-right", model="m", max_retries=2)
    try:
        reply = await model.complete(request())
    finally:
        await model.aclose()
    assert reply.text == "ok" and len(llm.requests) == 3
    assert llm.requests[0] == llm.requests[1] == llm.requests[2]  # the same request each time


async def test_retries_end_and_the_error_says_what_the_server_said(llm) -> None:
    llm.default = lambda body: error(500, "the GPU fell over", headers=FAST)
    model = OpenAIModel(base_url=llm.base_url, api_key="sk-right", model="m", max_retries=1)
    try:
        with pytest.raises(Exception) as failed:
            await model.complete(request())
    finally:
        await model.aclose()
    assert len(llm.requests) == 2
    assert "the model endpoint answered 500: the GPU fell over" in str(failed.value)


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (400, "This model's maximum context length is 8192 tokens", ContextOverflow),
        (401, "Incorrect API key provided.", ModelAuthError),
        (404, "The model `m` does not exist", ModelRefused),
    ],
)
async def test_a_refusal_is_not_retried_and_keeps_its_kind(llm, status, message, kind) -> None:
    llm.default = lambda body: error(status, message)
    model = OpenAIModel(base_url=llm.base_url, api_key="sk-right", model="m", max_retries=2)
    try:
        with pytest.raises(kind) as failed:
            await model.complete(request())
    finally:
        await model.aclose()
    assert len(llm.requests) == 1
    # a 404 also names the models the server lists (engine/models/_probe.py)
    said = f"the model endpoint answered {status}: {message}"
    assert str(failed.value) == said + ("; the server offers: fake-model" if status == 404 else "")


async def test_an_endpoint_that_refuses_connections_is_unreachable_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    model = OpenAIModel(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="k", model="m", max_retries=0
    )
    try:
        with pytest.raises(ModelUnreachable, match="unreachable"):
            await asyncio.wait_for(model.complete(request()), 10)
    finally:
        await model.aclose()
    assert "openai" not in sys.modules or model._sdk is None

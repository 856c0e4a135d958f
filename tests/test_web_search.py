"""web_search against a fake SearXNG and a fake Brave API on 127.0.0.1, through the real App and
the fake LLM: small results the model answers from, safe search on, the key only in the header,
errors in words, not offered without a backend, the SSRF guard for endpoints not the operator's,
and doctor's check of the backend."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from bot.doctor import run_doctor
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.fakes.search_server import FakeSearch
from tools.builtins import WebSearch
from tools.config import WebSearchConfig

PARIS = (
    "Paris - Wikipedia",
    "https://en.wikipedia.org/wiki/Paris",
    "Paris is the capital of France.",
)
LYON = ("Lyon", "https://en.wikipedia.org/wiki/Lyon", "Lyon is a city in France.")
JUNK = ("Not a web page", "javascript:alert(1)", "never shown")


@pytest.fixture
async def search() -> AsyncIterator[FakeSearch]:
    async with FakeSearch() as server:
        server.results = [PARIS, LYON, JUNK]
        yield server


async def ask(config: Config, llm: FakeOpenAI, query: dict[str, Any]) -> tuple[str, str]:
    """The user asks; the model searches, then answers. Returns (tool result, answer)."""
    llm.script(tool_call("web_search", query), text("Paris, says Wikipedia."))
    channel = RecordingChannel()
    async with App(config, channels=[channel]) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(channel.message("What is the capital of France?"))
        [answer] = await channel.wait_for("send")
    return llm.requests[-1]["messages"][-1]["content"], answer.text


async def test_searxng_results_are_small_safe_and_answered_from(
    make_config: Callable[..., Config], llm: FakeOpenAI, search: FakeSearch
) -> None:
    config = make_config(
        tools={
            "builtins": ["web_search"],
            "web_search": {"backend": "searxng", "url": search.searxng_url, "max_results": 2},
        }
    )
    result, answer = await ask(config, llm, {"query": "capital of  France"})
    assert answer == "Paris, says Wikipedia."
    assert result == (
        "Results for 'capital of France':\n"
        f"1. {PARIS[0]}\n   {PARIS[1]}\n   {PARIS[2]}\n"
        f"2. {LYON[0]}\n   {LYON[1]}\n   {LYON[2]}"
    )
    [request] = search.requests
    assert request.query == {"q": "capital of France", "format": "json", "safesearch": "1"}
    offered = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert offered == ["web_search"]


async def test_brave_with_its_key_from_the_environment(
    make_config: Callable[..., Config],
    llm: FakeOpenAI,
    search: FakeSearch,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("BRAVE_TEST_KEY", search.brave_key)
    web_search = {
        "backend": "brave",
        "url": search.brave_url,
        "api_key_env": "BRAVE_TEST_KEY",
        "safe_search": "strict",
    }
    config = make_config(tools={"builtins": ["web_search"], "web_search": web_search})
    caplog.set_level(logging.DEBUG)
    result, _ = await ask(config, llm, {"query": "capital of France", "max_results": 1})
    assert (
        result == f"Results for 'capital of France':\n1. {PARIS[0]}\n   {PARIS[1]}\n   {PARIS[2]}"
    )
    [request] = search.requests
    assert request.query == {"q": "capital of France", "count": "1", "safesearch": "strict"}
    assert request.headers["X-Subscription-Token"] == search.brave_key
    assert search.brave_key not in caplog.text and search.brave_key not in str(llm.requests)

    monkeypatch.setenv("BRAVE_TEST_KEY", "wrong-key")
    result, _ = await ask(config, llm, {"query": "again"})
    assert result == "The search failed: brave refused the API key (HTTP 401)"


async def test_errors_are_told_in_words_and_private_endpoints_need_the_operator(
    search: FakeSearch,
) -> None:
    searxng = WebSearch(WebSearchConfig(backend="searxng", url=search.searxng_url))
    search.status = 403
    failed = await searxng.execute({"query": "x"})
    assert (
        failed.is_error and "JSON format may be off: add json to search.formats" in failed.for_llm
    )
    search.status = 502
    assert "searxng answered HTTP 502" in (await searxng.execute({"query": "x"})).for_llm
    search.status = None
    searxng.trusted = False  # as for a public API's own endpoint: the SSRF guard applies
    refused = await searxng.execute({"query": "x"})
    assert "Refused: 127.0.0.1 is a loopback address" in refused.for_llm
    assert len(search.requests) == 2  # the guarded request never left


async def test_not_offered_without_a_backend(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(tools={"builtins": ["web_search", "current_time"]})
    channel = RecordingChannel()
    async with App(config, channels=[channel]) as app:
        assert app.registry.names() == ["current_time"]


async def test_doctor_checks_the_backend(
    make_config: Callable[..., Config], search: FakeSearch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(tools={"web_search": {"backend": "searxng", "url": search.searxng_url}})
    await run_doctor(config)
    assert f"web_search: OK - searxng at {search.searxng_url} answers (2 results" in (
        capsys.readouterr().out
    )
    search.status = 403
    assert await run_doctor(config) == 1
    out = capsys.readouterr().out
    assert "web_search: FAILED - searxng at" in out and "fix: check [tools.web_search] url" in out

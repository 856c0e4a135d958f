"""The web console with two instances on one PostgreSQL store (real Apps, the real
python-telegram-bot against the fake Bot API, the fake model): the console of the instance that
does not run a reminder shows it and cancels it, and the instance running it stops it (the
cluster's signal) and tells the chat; a link made by one instance signs in on the other."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from bot.app import App
from bot.config import Config
from engine.store import JobState
from tests.fakes.openai_server import FakeOpenAI, echo, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.ports import free_port
from tests.postgres import PostgresServer
from tests.test_console_web import ANN, OWNER, to


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_the_console_of_one_instance_cancels_a_job_the_other_runs(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, postgres: PostgresServer
) -> None:
    url = postgres.new_database()
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": [str(OWNER), str(ANN)],
        "poll_timeout_s": 5,
    }

    def config(name: str, **web: str) -> Config:
        return make_config(
            telegram=telegram,
            access={"admins": [f"telegram:{OWNER}"]},
            tools={"builtins": ["remind_me"]},
            storage={"url": url},
            instance={"id": name, "lease_s": 4},
            web=web,
        )

    a_port, b_port = free_port(), free_port()
    llm.script(tool_call("remind_me", {"text": "stretch", "in_seconds": 3600}), text("Noted."))
    llm.default = echo
    async with App(config("a", listen=f"127.0.0.1:{a_port}")) as a:
        tg.inject_message(ANN, ANN, "remind me in an hour", first_name="Ann")
        await tg.wait_for_call("sendMessage", to(ANN, "Noted."))
        [job] = await a.store.jobs.in_state(JobState.RUNNING)
        assert a.dispatcher.background.runner.running == [job.id]  # runs on a
        running = a.dispatcher.background.runner._tasks[job.id]
        tg.inject_message(OWNER, OWNER, "/console")  # a link made by whichever instance
        sent = await tg.wait_for_call("sendMessage", to(OWNER, "/signin?t="))
        token = re.search(r"t=(\S+)", sent.params["text"])
        assert token is not None
        async with App(config("b", listen=f"127.0.0.1:{b_port}")) as b:
            assert b.dispatcher.background.runner.running == []
            base = f"http://127.0.0.1:{b_port}"
            async with httpx.AsyncClient(base_url=base) as http:
                signed = await http.post("/signin", data={"t": token.group(1)})
                assert signed.status_code == 303  # b accepts the link
                overview = await http.get("/")
                assert "a</td>" in overview.text and "b</td>" in overview.text  # both
                work = await http.get("/work")
                assert "remind_me" in work.text
                csrf = re.search(r'name="csrf" value="([^"]+)"', work.text)
                assert csrf is not None
                form = {"csrf": csrf.group(1), "kind": "job", "id": job.id, "confirmed": "yes"}
                done = await http.post("/cancel", data=form)
                assert "Cancelled the background task remind_me" in done.text
            await tg.wait_for_call("sendMessage", to(ANN, "cancelled the background task"))
            await asyncio.wait({running}, timeout=10)  # the signal reaches a: its task stops
            assert running.cancelled() and a.dispatcher.background.runner.running == []
            stored = await b.store.jobs.get(job.id)
            assert stored is not None and stored.state is JobState.INTERRUPTED

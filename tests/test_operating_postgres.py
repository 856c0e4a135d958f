"""Operating relaybot on a PostgreSQL store: /metrics and `relaybot status` while an instance runs,
`relaybot backup` pointing to pg_dump, `relaybot forget` while an instance runs, and
/forget_me on one instance stopping the user's job running on another. Real instances (the App)
on a real server (tests/postgres.py); the commands run as subprocesses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from bot.app import App
from bot.config import Config
from engine import Action
from engine.store.postgres import PgStore
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.ports import free_port
from tests.postgres import PostgresServer
from tests.test_operating import relaybot, scrape, value
from tools import ToolContext, tool

release: dict[str, asyncio.Event] = {}


@tool(destructive=True, summary="Wipe {target}")
async def wipe(target: str) -> str:
    """Wipe a target for good."""
    return f"wiped {target}"


@tool(background=True)
async def long_report(topic: str, ctx: ToolContext) -> str:
    """Prepare a report in the background."""
    await release.setdefault("job", asyncio.Event()).wait()
    return f"report on {topic}"


def cli_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "cli.toml"
    path.write_text(f'[llm]\napi_key = "sk-cli-0123456789"\n\n[storage]\nurl = "{url}"\n')
    return path


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def instance(make_config: Callable[..., Config], url: str, name: str, **more: object) -> Config:
    return make_config(storage={"url": url}, instance={"id": name, "lease_s": 5}, **more)


async def test_backup_of_a_postgresql_store_says_to_use_pg_dump(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.new_database().replace("postgresql://", "postgresql://postgres:pw@", 1)
    code, out, err = await relaybot(
        "backup", str(tmp_path / "copy"), "-c", str(cli_config(tmp_path, url))
    )
    assert code == 1 and out == ""
    assert "PostgreSQL database" in err and "pg_dump --format=custom" in err and "pg_restore" in err
    assert "pw" not in err.replace("pg_", "")  # the password stays out of the example
    asked = url.replace("postgres:pw@", "postgres@") + "?sslmode=disable&password=pw"
    code, _, err = await relaybot(
        "backup", str(tmp_path / "copy"), "-c", str(cli_config(tmp_path, asked))
    )
    assert "pg_dump --format=custom" in err and "sslmode=disable" in err
    assert "pw" not in err.replace("pg_", "")  # as a parameter too
    assert files_in(tmp_path) == ["cli.toml"]  # no backup file
    named = tmp_path / "env.toml"
    named.write_text('[llm]\napi_key = "sk-cli-0123456789"\n\n[storage]\nurl_env = "RB_DB"\n')
    copy = str(tmp_path / "copy")
    code, _, err = await relaybot("backup", copy, "-c", str(named), env={"RB_DB": url})
    assert code == 1 and "pg_dump --format=custom" in err
    assert '"$RB_DB"' in err  # the variable, which holds the password too


async def test_metrics_and_status_while_an_instance_runs(
    postgres: PostgresServer,
    make_config: Callable[..., Config],
    llm: FakeOpenAI,
    tmp_path: Path,
) -> None:
    url = postgres.new_database()
    port = free_port()
    channel = RecordingChannel()
    config = instance(make_config, url, "bot-1", metrics={"listen": f"127.0.0.1:{port}"})
    async with App(config, channels=[channel], extra_tools=(wipe,)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        before = await scrape(port)
        llm.script(tool_call("wipe", {"target": "db"}))
        await app.dispatcher.handle_inbound(channel.message("wipe the db", chat_id="a"))
        await channel.wait_for("confirm", 1)
        after = await scrape(port)
        cli = cli_config(tmp_path, url)
        code, shown, err = await relaybot("status", "-c", str(cli))
        assert code == 0, err
        code, raw, err = await relaybot("status", "--json", "-c", str(cli))
        assert code == 0, err
        code, out, err = await relaybot("forget", "--user", "test:u1", "--yes", "-c", str(cli))
        assert code == 0 and "Deleted" in out and "1 confirmation" in out, err  # while it runs

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("relaybot_messages_received_total", channel="test") == 1
    assert moved("relaybot_store_operation_duration_seconds_count", operation="write") > 0
    assert moved("relaybot_store_operation_duration_seconds_count", operation="read") > 0
    assert value(after, "relaybot_confirmations_pending") == 1
    assert value(after, "relaybot_store_size_bytes", file="db") > 0
    assert 'relaybot_store_size_bytes{file="wal"}' not in after  # the server's own business

    assert "instances: 1 running (bot-1)" in shown and "postgresql://" in shown
    assert "confirmations pending: 1\n  test:a  user u1: Wipe db (wipe), expires in" in shown
    status = json.loads(raw)
    assert status["instances"] == ["bot-1"] and status["schema_version"] > 0

    async with PgStore(url) as store:
        assert (await store.ops.status()).confirmations == []


async def test_forget_me_on_one_instance_stops_the_job_running_on_another(
    postgres: PostgresServer, make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    url = postgres.new_database()
    here, there = RecordingChannel(), RecordingChannel()
    release["job"] = asyncio.Event()
    tools = (long_report,)
    async with App(instance(make_config, url, "a"), channels=[here], extra_tools=tools) as a:
        a.dispatcher.settings.allowed_users["test"] = {"u1", "u2"}
        llm.script(tool_call("long_report", {"topic": "mine"}), text("Started."))
        await a.dispatcher.handle_inbound(here.message("report", chat_id="dm-u1", user_id="u1"))
        await here.wait_for("send", 1, chat_id="dm-u1")
        [job_id] = a.dispatcher.background.runner.running
        job = a.dispatcher.background.runner._tasks[job_id]
        async with App(instance(make_config, url, "b"), channels=[there], extra_tools=tools) as b:
            b.dispatcher.settings.allowed_users["test"] = {"u1", "u2"}
            done = await b.dispatcher.handle_action(Action("test", "dm-u1", "u1", "forget:yes:u1"))
            assert done.text.startswith("Done: I deleted") and "background job" in done.text
            finished, _ = await asyncio.wait([job], timeout=10)
            assert finished == {job} and job.cancelled()  # stopped where it ran, never reported
            assert await b.store.jobs.get(job_id) is None
    release["job"].set()

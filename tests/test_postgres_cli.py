"""The PostgreSQL store from the command line: its config keys, `relaybot doctor` on it, and
`relaybot migrate-store` copying a SQLite store into an empty database (and refusing a
non-empty one)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from bot.config import parse_config
from engine import ToolCall
from engine.models import Message
from engine.store import ConfirmationState, JobState, SqliteStore
from engine.store.postgres import PgStore
from tests.postgres import PostgresServer
from tests.test_store_contract import confirmation, inbound
from tools.errors import ConfigError


async def relaybot(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *argv,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_doctor_checks_the_server_the_schema_and_the_round_trip(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.new_database(migrated=False)
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-x"\n\n'
        '[storage]\nurl_env = "RB_DB"\n'
    )
    code, out = await relaybot("doctor", "-c", str(cfg), env={"RB_DB": url})
    line = next(x for x in out.splitlines() if "store" in x and "postgresql://" in x)
    assert "PostgreSQL 1" in line and "schema v" in line and "round trip" in line, out
    missing = url.replace(url.split("/")[3].split("?")[0] + "?", "no_such_db?")
    code, out = await relaybot("doctor", "-c", str(cfg), env={"RB_DB": missing})
    assert code != 0 and "store: FAILED - cannot open the store" in out, out


async def test_migrate_store_copies_everything_and_refuses_a_non_empty_target(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    source = tmp_path / "relaybot.db"
    async with SqliteStore(source) as lite:
        conv = await lite.conversations.active("t", "c1", is_private=False)
        await lite.conversations.append(conv.id, Message.user("hi", speaker="Ann"))
        await lite.conversations.append(
            conv.id, Message.assistant(None, [ToolCall("k1", "delete", "{}")])
        )
        await lite.inbox.accept(inbound("hi", "m1"))
        await lite.confirmations.add(confirmation(conv.id))
        await lite.jobs.add(conv, "j1", "u1", "remind_me", {"at": "x"}, resumable=True)
        await lite.memory.add("t:u1", "likes tea")
        await lite.schedules.add_schedule("t", "c1", "u1", "hi", "interval", "300", "UTC", 5.0)
    url = postgres.new_database(migrated=False)
    code, out = await relaybot("migrate-store", "--from", str(source), "--to", url)
    assert code == 0, out
    async with PgStore(url) as pg:
        again = await pg.conversations.active("t", "c1")
        assert again.id == conv.id and not again.is_private
        assert await pg.conversations.history(again.id) == [
            Message.user("hi", speaker="Ann"),
            Message.assistant(None, [ToolCall("k1", "delete", "{}")]),
        ]
        conf = await pg.confirmations.get("abc123")
        assert conf is not None and conf.state is ConfirmationState.PENDING
        job = await pg.jobs.get("j1")
        assert job is not None and job.state is JobState.RUNNING and job.resumable
        assert [n.text for n in await pg.memory.items("t:u1")] == ["likes tea"]
        assert len(await pg.schedules.chat_schedules("t", "c1")) == 1
        newer = await pg.conversations.active("t", "c2")  # ids go on after the copied ones
        assert newer.id > again.id
    code, out = await relaybot("migrate-store", "--from", str(source), "--to", url)
    assert code == 1 and "not empty" in out, out


def test_storage_url_is_checked_and_its_password_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match=r"storage.url: must be a PostgreSQL URL"):
        parse_config({"storage": {"url": "mysql://bot@db/relaybot"}})
    with pytest.raises(ConfigError, match="url or url_env, not both"):
        parse_config({"storage": {"url": "postgresql://db/x", "url_env": "DB"}})
    config = parse_config({"storage": {"url_env": "RB_TEST_DB"}})
    with pytest.raises(ConfigError, match=r"storage\.url_env: the environment variable RB_TEST_DB"):
        config.storage.resolved_url()
    monkeypatch.setenv("RB_TEST_DB", "postgresql://bot:s3cret-pw@db.example/relaybot")
    assert config.storage.describe() == "postgresql://bot:***@db.example/relaybot"
    assert "s3cret-pw" in config.secrets()  # redacted from every log line
    # libpq also takes the password as a parameter: hidden and redacted the same
    monkeypatch.setenv(
        "RB_TEST_DB", "postgresql://bot@db.example/relaybot?password=p4ss&sslmode=require"
    )
    assert config.storage.describe() == (
        "postgresql://bot@db.example/relaybot?password=***&sslmode=require"
    )
    assert "p4ss" in config.secrets()
    assert parse_config({}).storage.resolved_url() is None  # SQLite, as before

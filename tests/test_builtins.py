"""Built-ins: the factory, current_time, send_message, remind_me and notes (real SQLite store)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import jsonschema
import pytest

from engine.store import SqliteStore
from tests.fakes.clock import ManualClock
from tools import Tier, ToolContext, ToolRetry
from tools.builtins import BUILTIN_NAMES, RemindMe, builtin_tools
from tools.config import ToolsConfig, apply_policy
from tools.errors import ConfigError
from tools.registry import ToolRegistry


@pytest.fixture
async def store(tmp_path):
    async with SqliteStore(tmp_path / "relaybot.db") as store:
        yield store


@pytest.fixture
async def registry(store, tmp_path):
    config = ToolsConfig(
        builtins=list(BUILTIN_NAMES),
        workspace=tmp_path,
        web_search={"backend": "searxng", "url": "http://127.0.0.1:9"},
    )
    registry = ToolRegistry()
    for tool in builtin_tools(config, memory=store.memory):
        registry.register(tool)
    return registry


def ctx(user: str = "u1", channel: str = "telegram", sent: list[str] | None = None) -> ToolContext:
    async def send(text: str) -> None:
        if sent is not None:
            sent.append(text)

    return ToolContext(
        channel=channel, chat_id="c1", user_id=user, send=send, call_id="call_1", is_private=True
    )


# -- the factory ------------------------------------------------------------------------------


def test_default_builtins_are_the_safe_ones(store):
    tools = builtin_tools(ToolsConfig(), memory=store.memory)
    assert [t.name for t in tools] == [
        "current_time",
        "fetch_url",
        "remind_me",
        "send_message",
        "remember",
        "recall",
        "forget",
        "schedule_task",
        "list_schedules",
        "cancel_schedule",
    ]  # and web_search, once a backend is configured
    assert [t.name for t in tools if t.tier is Tier.DESTRUCTIVE] == ["forget"]


def test_all_builtins_register_with_valid_schemas(registry):
    # delegate runs a tool loop: the engine makes it (tests/test_delegate.py)
    assert registry.names() == sorted(set(BUILTIN_NAMES) - {"delegate"})
    for tool in registry.select():
        assert tool.description
        jsonschema.Draft202012Validator.check_schema(tool.strict_parameters())
    destructive = {n for n in registry.names() if registry.get(n).destructive}
    assert destructive == {"forget", "write_file", "delete_file", "run_command"}


def test_unknown_builtin_is_a_config_error_naming_the_key(store):
    with pytest.raises(ConfigError) as info:
        builtin_tools(ToolsConfig(builtins=["current_time", "curent_time"]), memory=store.memory)
    assert info.value.key == "tools.builtins"
    assert "'curent_time'" in info.value.reason


def test_workspace_tools_need_a_workspace(store, tmp_path):
    with pytest.raises(ConfigError) as info:
        builtin_tools(ToolsConfig(builtins=["read_file"]), memory=store.memory)
    assert info.value.key == "tools.workspace"
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match="not an existing directory"):
        builtin_tools(ToolsConfig(builtins=["run_command"], workspace=missing), memory=store.memory)


async def test_without_a_store_notes_tools_are_listed_but_fail():
    registry = ToolRegistry()
    for tool in builtin_tools(ToolsConfig(), memory=None):  # e.g. `relaybot tools`
        registry.register(tool)
    result = await registry.execute("recall", {}, ctx())
    assert result.is_error and "no notes store" in result.for_llm


def test_instances_are_fresh_so_policy_never_leaks(store):
    config = ToolsConfig(builtins=["current_time"], confirm=["current_time", "no_such_tool"])
    first = ToolRegistry()
    first.register(builtin_tools(config, memory=store.memory)[0])
    warnings = apply_policy(first, config)
    assert first.get("current_time").tier is Tier.DESTRUCTIVE
    assert warnings == ["tools.confirm: no tool named 'no_such_tool'"]
    again = builtin_tools(ToolsConfig(builtins=["current_time"]), memory=store.memory)[0]
    assert again.tier is Tier.SAFE


def test_confirm_never_lowers_and_dm_only_hides_in_groups(registry):
    config = ToolsConfig(confirm=["recall"], dm_only=["recall", "remember"])
    assert apply_policy(registry, config) == []
    assert registry.get("recall").destructive and registry.get("forget").destructive
    offered = config.offered(registry.names(), group=True)
    assert "recall" not in offered and "remember" not in offered and "forget" in offered
    assert config.offered(registry.names(), group=False) == registry.names()


# -- current_time and send_message ------------------------------------------------------------


async def test_current_time_in_a_zone(registry):
    result = await registry.execute("current_time", {"timezone": "Asia/Tokyo"})
    assert not result.is_error
    assert "JST" in result.for_llm and "+0900" in result.for_llm
    utc = await registry.execute("current_time", "{}")
    assert "UTC" in utc.for_llm and str(datetime.now(UTC).year) in utc.for_llm


async def test_current_time_unknown_zone_is_retryable(registry):
    result = await registry.execute("current_time", {"timezone": "Mars/Olympus"})
    assert result.is_error and result.retryable
    assert "Unknown time zone 'Mars/Olympus'" in result.for_llm
    assert "Europe/" in result.for_llm


async def test_send_message_posts_to_the_current_chat(registry):
    sent: list[str] = []
    result = await registry.execute("send_message", {"text": "Working on it…"}, ctx(sent=sent))
    assert sent == ["Working on it…"]
    assert result.silent and not result.is_error


# -- remind_me --------------------------------------------------------------------------------


T0 = datetime(2030, 5, 1, 10, 0, tzinfo=UTC).timestamp()  # the fake clock's start


def test_remind_me_job_args_are_absolute():
    tool = RemindMe(ManualClock(T0))
    assert tool.background and tool.resumable
    stored = tool.job_args(tool.validate({"text": "tea", "in_seconds": 600}))
    assert stored == {"text": "tea", "at": "2030-05-01T10:10:00+00:00"}
    # an absolute time is kept (normalised to UTC); stored args validate again on resume
    stored = tool.job_args({"text": "x", "at": "2030-05-31T09:00:00+01:00"})
    assert stored["at"] == "2030-05-31T08:00:00+00:00"
    assert tool.validate(stored) == stored
    assert "2030-05-31 08:00 UTC: x" in tool.describe_call(stored)


def test_remind_me_measures_one_year_by_its_clock():
    tool = RemindMe(ManualClock(T0))
    assert tool.validate({"text": "x", "at": "2031-05-01T10:00:00Z"})  # 365 days: allowed
    with pytest.raises(ToolRetry, match="one year"):
        tool.validate({"text": "x", "at": "2031-05-03T10:00:00Z"})


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"text": "x"}, "exactly one of"),
        ({"text": "x", "in_seconds": 5, "at": "2030-01-01T00:00:00Z"}, "exactly one of"),
        ({"text": "x", "at": "next tuesday"}, "Cannot read the time"),
        ({"text": "x", "in_seconds": -5}, "minimum"),
        ({"text": "x", "at": "2999-01-01T00:00:00Z"}, "one year"),
    ],
)
async def test_remind_me_bad_times_go_back_to_the_model(registry, args, problem):
    prepared = registry.prepare("remind_me", args)
    assert prepared.is_error and prepared.retryable
    assert problem in prepared.for_llm


async def test_remind_me_due_now_fires_at_once():
    clock = ManualClock(T0)
    registry = ToolRegistry()
    for tool in builtin_tools(ToolsConfig(builtins=["remind_me"]), memory=None, clock=clock):
        registry.register(tool)  # the daemon's clock reaches remind_me through the assembly
    at = datetime.fromtimestamp(T0, UTC).isoformat()
    result = await asyncio.wait_for(registry.execute("remind_me", {"text": "stretch", "at": at}), 5)
    assert result.for_user == "⏰ Reminder: stretch"
    assert not result.is_error and clock.naps == 0  # it never waited


async def test_remind_me_waits_for_its_time_by_its_clock():
    clock = ManualClock(T0)
    tool = RemindMe(clock)
    args = tool.job_args({"text": "soon", "in_seconds": 300})
    waiting = asyncio.create_task(tool.execute(args))
    await clock.napped(1)  # it waits for the clock, not for real seconds
    await clock.advance(299)
    assert not waiting.done()
    await clock.advance(1)
    result = await asyncio.wait_for(waiting, 5)
    assert result.for_user == "⏰ Reminder: soon"  # on time: no "sent late"


async def test_remind_me_long_overdue_fires_once_and_says_so():
    tool = RemindMe(ManualClock(T0))
    result = await tool.execute({"text": "pay rent", "at": "2020-05-01T10:00:00+00:00"})
    assert result.for_user == "⏰ Reminder: pay rent (due 2020-05-01 10:00 UTC; sent late)"


# -- notes ------------------------------------------------------------------------------------


async def test_notes_round_trip(registry):
    me = ctx("alice")
    saved = await registry.execute("remember", {"text": "Prefers metric units"}, me)
    assert saved.for_llm.startswith("Saved as note #")
    await registry.execute("remember", {"text": "Allergic to peanuts"}, me)
    listed = await registry.execute("recall", {}, me)
    lines = listed.for_llm.splitlines()
    assert len(lines) == 2 and "Allergic to peanuts" in lines[0]  # newest first
    found = await registry.execute("recall", {"query": "metric"}, me)
    assert "Prefers metric units" in found.for_llm and "peanuts" not in found.for_llm
    note_id = int(saved.for_llm.split("#")[1].rstrip("."))
    call = registry.prepare("forget", {"note_id": note_id})
    assert call.tool.describe_call(call.args) == f"Delete note #{note_id}"
    gone = await registry.run(call, me)
    assert gone.for_llm == f"Deleted note #{note_id}."
    again = await registry.execute("forget", {"note_id": note_id}, me)
    assert again.is_error and f"no note #{note_id}" in again.for_llm
    assert "metric" not in (await registry.execute("recall", {}, me)).for_llm


async def test_notes_are_private_to_each_user(registry, store):
    alice, bob = ctx("alice"), ctx("bob")
    saved = await registry.execute("remember", {"text": "alice's secret"}, alice)
    note_id = int(saved.for_llm.split("#")[1].rstrip("."))
    assert (await registry.execute("recall", {}, bob)).for_llm == "No notes saved yet."
    # the same user id on another platform is another person
    other = ctx("alice", channel="discord")
    assert "secret" not in (await registry.execute("recall", {}, other)).for_llm
    stolen = await registry.execute("forget", {"note_id": note_id}, bob)
    assert stolen.is_error
    assert "alice's secret" in (await registry.execute("recall", {}, alice)).for_llm
    assert await store.memory.items("telegram:alice", None, 10)


async def test_notes_without_a_user_are_refused(registry):
    result = await registry.execute("remember", {"text": "x"}, ToolContext(channel="telegram"))
    assert result.is_error and "who is asking" in result.for_llm

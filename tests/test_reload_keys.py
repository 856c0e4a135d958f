"""Every key of the config, reloaded (issue 39): one table, a row per key of the schema.

A row changes its key in the config file and calls the reload that SIGHUP calls
(`Reloader.reload`, as `relaybot run` does); then it observes the change where the next turn
meets it: in the request the fake LLM receives, in what the bot answers over the fake Bot API,
in the console's HTTP answers, or, where a turn cannot show it, in the part that reads it at use
(the object the next turn runs with). A key that waits for a restart must be named in the
reload's one log line and in `relaybot status`, and nothing else may be. Each row starts from
the first file (the previous row's key changed back), so a key's effect also goes away. The real
App with python-telegram-bot against the fake Bot API and the fake LLM; a second fake LLM for
the endpoint keys. The table must name every key of the schema (bot/_in_force.py lists them),
and README's list of what needs a restart must be the table's.
"""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot import _operate
from bot._in_force import readme_list, restart_keys, schema_keys
from bot._lock import lock_store
from bot._reload import Reloader, read_checked
from bot.app import App
from bot.config import load_config
from engine.i18n import translator
from engine.store import CONSOLE_CLI
from tests.fakes.media import png
from tests.fakes.openai_server import FakeOpenAI, echo, error, images_in, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tools.builtins import user_owner

ROOT = Path(__file__).resolve().parent.parent
USER, OWNER, OTHER, STRANGER = 101, 7, 202, 303
DROP = object()  # a key taken out of the file
SKILL = "---\nname: greeting\ndescription: Greets people in the house style.\n---\nSay hi.\n"
PLUGIN = '''
from tools import tool


@tool
def order_status(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is shipped"
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toml(data: dict[str, Any]) -> str:
    """`data` as TOML: tables of plain values, lists, and lists of tables."""
    lines: list[str] = []

    def table(path: str, items: dict[str, Any], header: str) -> None:
        plain = {k: v for k, v in items.items() if not isinstance(v, dict) and not _tables(v)}
        if path:
            lines.append(f"{header[0]}{path}{header[1]}")
        lines.extend(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in plain.items())
        for k, v in items.items():
            if isinstance(v, dict):
                table(f"{path}.{json.dumps(k)}" if path else json.dumps(k), v, "[]")
            elif _tables(v):
                for each in v:
                    table(f"{path}.{json.dumps(k)}" if path else json.dumps(k), each, ("[[", "]]"))

    table("", data, "[]")
    return "\n".join(lines) + "\n"


def _tables(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def changed(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(base))
    for key, value in changes.items():
        *path, last = key.split(".")
        here = out
        for part in path:
            here = here.setdefault(part, {})
        if value is DROP:
            here.pop(last, None)
        else:
            here[last] = value
    return out


@dataclass
class Rig:
    app: App
    tg: FakeTelegram
    llm: FakeOpenAI
    other: FakeOpenAI  # a second endpoint
    reloader: Reloader
    path: Path
    base: dict[str, Any]
    logs: list[str]
    tmp: Path
    port: int = field(default_factory=free_port)

    @property
    def settings(self) -> Any:
        return self.app.dispatcher.live.settings

    @property
    def loop(self) -> Any:
        return self.app.dispatcher.live.tooling.loop

    def tool(self, name: str) -> Any:
        return self.loop.registry.get(name)

    async def reload(self, changes: dict[str, Any]) -> bool:
        self.path.write_text(toml(changed(self.base, changes)))
        return await self.reloader.reload()

    async def say(self, words: str, user: int = USER, **kw: Any) -> str:
        """`words` from `user` in their DM; the bot's next message there."""
        sent = len([c for c in self.tg.calls_of("sendMessage") if c.params["chat_id"] == user])
        self.tg.inject_message(user, user, words, **kw)
        call = await self.tg.wait_for_call(
            "sendMessage", lambda p: p.get("chat_id") == user, count=sent + 1
        )
        return str(call.params["text"])

    async def turn(self, words: str = "hello", server: FakeOpenAI | None = None) -> dict[str, Any]:
        """A turn; the request the model got."""
        server = server or self.llm
        before = len(server.requests)
        answer = await self.say(words)
        assert len(server.requests) > before, f"the turn reached no model: {answer}"
        return server.requests[-1]

    async def answered_by_model(self, words: str, user: int = USER) -> bool:
        before = len(self.llm.requests)
        await self.say(words, user)
        return len(self.llm.requests) > before

    async def get(self, path: str, **kw: Any) -> tuple[int, str, Any]:
        async with aiohttp.ClientSession() as http:
            async with http.request(kw.pop("method", "GET"), self.url(path), **kw) as r:
                return r.status, await r.text(), r.headers

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def shown(observed: Any) -> Any:
    """What a probe saw, short: a request as its messages' roles and texts."""
    if isinstance(observed, dict) and "messages" in observed:
        return [(m["role"], str(m.get("content"))[-80:]) for m in observed["messages"]]
    return observed


def system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def tools_of(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


def last_tool_result(body: dict[str, Any]) -> str:
    return str([m for m in body["messages"] if m["role"] == "tool"][-1]["content"])


Probe = Callable[[Rig], Awaitable[Any]]


@dataclass(frozen=True)
class Row:
    key: str
    value: Any
    probe: Probe | None = None  # None: the key waits for a restart
    expect: Any = None  # what the probe sees; None: the value itself; a callable: a check
    also: dict[str, Any] = field(default_factory=dict)  # other keys the change needs


def seen(read: Callable[[Rig], Any]) -> Probe:
    async def probe(rig: Rig) -> Any:
        return read(rig)

    return probe


async def _photo(rig: Rig) -> bool:
    photo = rig.tg.upload_photo(png("cat", width=8, height=8))
    rig.llm.default = echo
    before = len(rig.llm.requests)
    await rig.say("what is this?", photo=photo)
    return len(rig.llm.requests) > before and bool(images_in(rig.llm.requests[-1]))


async def _scheduled(rig: Rig, calls: int) -> str:
    for n in range(calls):
        rig.llm.script(tool_call("schedule_task", {"task": f"water {n}", "every_minutes": 60}))
    rig.llm.script(text("Scheduled."))
    await rig.say("water the plants every hour")
    return last_tool_result(rig.llm.requests[-1])


async def _authorization(rig: Rig) -> str | None:
    await rig.turn()
    return rig.llm.auth_headers[-1]


async def _console_link(rig: Rig) -> str:
    return await rig.say("/console", OWNER)


async def _signed_in_cookie(rig: Rig) -> str:
    token = await rig.app.store.console.new_link(CONSOLE_CLI, 60, "admin")  # relaybot console-link
    _, _, headers = await rig.get(
        "/signin", method="POST", data={"t": token}, allow_redirects=False
    )
    return str(headers.get("Set-Cookie", ""))


def fetch(attr: str) -> Probe:
    return seen(lambda r: getattr(r.tool("fetch_url"), attr))


def search(attr: str) -> Probe:
    return seen(lambda r: getattr(r.tool("web_search").config, attr))


SEARXNG = {"tools.web_search.backend": "searxng", "tools.web_search.url": "http://127.0.0.1:9"}
FALLBACK = [{"base_url": "http://127.0.0.1:9/v1", "model": "fb", "api_key": "sk-fallback-0001"}]
DISCORD_TOKEN = "A" * 24 + "." + "B" * 6 + "." + "C" * 27
RESTART = "waits for a restart"


def rows(rig_tmp: Path) -> list[Row]:
    ws = rig_tmp / "ws"
    return [
        # [llm]
        Row(
            "llm.provider",
            "anthropic",
            seen(lambda r: type(r.loop.model).__name__),
            "AnthropicModel",
            {"llm.model": "claude-sonnet-4-5"},
        ),
        Row("llm.base_url", "OTHER", lambda r: r.turn(server=r.other), lambda b: b["model"]),
        Row("llm.api_key", "sk-another-key-0002", _authorization, "Bearer sk-another-key-0002"),
        Row(
            "llm.api_key_env",
            "RB_RELOAD_KEY",
            _authorization,
            "Bearer sk-env-key-0003",
            {"llm.api_key": DROP},
        ),
        Row("llm.model", "model-b", lambda r: r.turn(), lambda b: b["model"] == "model-b"),
        Row("llm.request_timeout_s", 7.0, seen(lambda r: r.loop.model.sdk.timeout)),
        Row("llm.max_retries", 1, seen(lambda r: r.loop.model.max_retries)),
        Row("llm.temperature", 0.3, lambda r: r.turn(), lambda b: b["temperature"] == 0.3),
        Row("llm.max_tokens", 99, lambda r: r.turn(), lambda b: b["max_tokens"] == 99),
        Row("llm.options", {"top_p": 0.5}, lambda r: r.turn(), lambda b: b["top_p"] == 0.5),
        Row(
            "llm.models_allowed",
            ["model-c"],
            seen(lambda r: list(r.app.dispatcher.chat_settings.models)),
        ),
        Row("llm.vision", True, _photo, True),
        Row("llm.stream", True, lambda r: r.turn(), lambda b: b.get("stream") is True),
        Row("llm.max_iterations", 1, seen(lambda r: r.loop.max_iterations)),
        Row(
            "llm.system_prompt",
            "You are B.",
            lambda r: r.turn(),
            lambda b: system(b).startswith("You are B."),
        ),
        Row(
            "llm.fallback",
            FALLBACK,
            seen(lambda r: [m.name for m in r.loop.model.models]),
            ["fake-model", "fb"],
        ),
        Row(
            "llm.failover_cooldown_s",
            42.0,
            seen(lambda r: r.loop.model.cooldown_s),
            None,
            {"llm.fallback": FALLBACK},
        ),
        # reasoning models (issue 43): the model of the next turn is built from them
        Row("llm.api", "responses", seen(lambda r: type(r.loop.model).__name__), "ResponsesModel"),
        Row(
            "llm.reasoning_effort",
            "low",
            seen(lambda r: r.loop.model.options.get("reasoning_effort")),
        ),
        Row(
            "llm.reasoning_summary",
            False,
            seen(lambda r: r.loop.model.summary),
            None,
            {"llm.api": "responses"},
        ),
        Row(
            "llm.store_responses",
            True,
            seen(lambda r: r.loop.model.store),
            None,
            {"llm.api": "responses"},
        ),
        Row(
            "llm.thinking_tokens",
            2048,
            seen(lambda r: r.loop.model.thinking),
            None,
            {"llm.provider": "anthropic", "llm.model": "claude-sonnet-4-5"},
        ),
        Row("llm.reasoning_back", True, seen(lambda r: r.loop.model.reasoning_back)),
        Row("llm.context_window", 64_000, seen(lambda r: r.loop.context.settings.window)),
        Row(
            "llm.max_output_tokens", 500, seen(lambda r: r.loop.context.settings.max_output_tokens)
        ),
        # [storage]
        Row("storage.path", str(rig_tmp / "elsewhere.db")),
        Row(
            "storage.keep_days",
            30.0,
            seen(lambda r: r.app.dispatcher.housekeeping.retention().keep_days),
        ),
        Row(
            "storage.retention_days",
            3.0,
            seen(lambda r: r.app.dispatcher.housekeeping.retention().settled_days),
        ),
        Row("storage.wal_limit_mb", 64.0),
        Row(
            "storage.url",
            "postgresql://relaybot@127.0.0.1:9/relaybot",
            None,
            None,
            {"storage.path": DROP},
        ),
        Row("storage.url_env", "RB_RELOAD_PG_URL"),
        Row("instance.id", "bot-2"),
        Row("instance.lease_s", 9.0),
        # [engine]
        Row(
            "engine.history_limit",
            2,
            lambda r: r.turn(),
            lambda b: len([m for m in b["messages"] if m["role"] != "system"]) <= 2,
        ),
        Row("engine.max_tool_output_chars", 300, seen(lambda r: r.loop.calls.max_output_chars)),
        Row("engine.retry_budget", 5, seen(lambda r: r.loop.calls.retry_budget)),
        Row("engine.max_parallel_tools", 2, seen(lambda r: r.loop.calls.max_parallel_tools)),
        Row(
            "engine.shutdown_grace_s",
            3.0,
            seen(lambda r: r.app.dispatcher.settings.shutdown_grace_s),
        ),
        Row(
            "engine.max_quote_chars",
            0,
            seen(lambda r: r.app.dispatcher.intake.live.settings.max_quote_chars),
        ),
        Row(
            "engine.tool_progress",
            False,
            seen(lambda r: r.app.dispatcher.turns.settings.tool_progress),
        ),
        Row(
            "engine.language",
            "de",
            lambda r: r.say("/reset"),
            translator("de").gettext("Started a fresh conversation."),
        ),
        # [context]
        Row("context.budget", 4_000, seen(lambda r: r.loop.context.settings.budget)),
        Row(
            "context.keep_recent_turns",
            3,
            seen(lambda r: r.loop.context.settings.keep_recent_turns),
        ),
        Row(
            "context.tool_result_chars",
            300,
            seen(lambda r: r.loop.context.settings.tool_result_chars),
        ),
        # [access]
        Row("access.max_message_chars", 100, lambda r: r.answered_by_model("x" * 150), False),
        Row(
            "access.admins",
            [f"telegram:{USER}"],
            lambda r: r.say("/console", USER),
            lambda words: "/signin?t=" in words,
            {"web.listen": "PORT"},
        ),
        Row("access.pairing", False, seen(lambda r: r.settings.pairing.enabled)),
        # [limits]
        Row(
            "limits.messages_per_minute",
            1,
            seen(lambda r: r.app.dispatcher.limits.settings.messages_per_minute),
        ),
        Row("limits.tokens_per_day", 1, lambda r: r.answered_by_model("and now?"), False),
        Row(
            "limits.tool_calls_per_turn",
            2,
            seen(lambda r: r.app.dispatcher.turns.settings.tool_calls_per_turn),
        ),
        Row(
            "limits.usd_per_day", 0.5, seen(lambda r: r.app.dispatcher.limits.settings.usd_per_day)
        ),
        Row("limits.images_per_day", 0, seen(lambda r: r.app.pictures[0].painter.per_day())),
        # [media]
        Row(
            "media.max_image_mb",
            0.5,
            seen(lambda r: r.app.dispatcher.turns.images.max_bytes()),
            512 * 1024,
        ),
        Row(
            "media.max_images_per_turn",
            1,
            seen(lambda r: r.app.dispatcher.media.settings.max_images_per_turn),
        ),
        Row("media.max_text_kb", 5, seen(lambda r: r.app.dispatcher.media.settings.max_text_kb)),
        Row("media.max_audio_s", 30, seen(lambda r: r.app.dispatcher.media.settings.max_audio_s)),
        Row("media.transcription_model", "whisper-2"),
        Row("media.speech_model", "tts-2"),
        Row("media.speech_voice", "nova"),
        Row(
            "media.max_speech_chars", 100, seen(lambda r: r.app.dispatcher.turns.voice.max_chars())
        ),
        Row("media.image_model", "dall-e-2"),
        Row("media.image_size", "512x512"),
        Row(
            "pricing",
            {"fake-model": {"input_per_mtok": 1.0}},
            seen(lambda r: r.app.dispatcher.turns.meter.prices().of("fake-model") is not None),
            True,
        ),
        # [schedules]
        Row(
            "schedules.catch_up_s",
            5.0,
            seen(lambda r: r.app.dispatcher.schedules.settings().catch_up_s),
        ),
        Row(
            "schedules.max_per_chat",
            1,
            lambda r: _scheduled(r, 2),
            lambda said: "the most allowed" in said,
        ),
        Row(
            "schedules.min_interval_s",
            7_200.0,
            lambda r: _scheduled(r, 1),
            lambda said: "the shortest interval allowed" in said,
        ),
        Row(
            "memory.max_tokens", 0, lambda r: r.turn(), lambda b: "Likes green tea" not in system(b)
        ),
        # [skills]
        Row(
            "skills.dirs",
            [str(rig_tmp / "skills2")],
            lambda r: r.turn(),
            lambda b: "greeting" in system(b),
        ),
        Row(
            "skills.only_in",
            {"greeting": ["telegram:1"]},
            lambda r: r.turn(),
            lambda b: "greeting" not in system(b),
            {"skills.dirs": [str(rig_tmp / "skills2")]},
        ),
        Row("skills.max_file_kb", 1, seen(lambda r: r.app.generation.skills.max_file_bytes), 1024),
        Row("skills.listing_tokens", 500, seen(lambda r: r.app.generation.skills.listing_tokens)),
        # [telegram], [discord]: the connection is made at start; who may use the bot is not
        Row(
            "telegram.enabled",
            False,
            None,
            None,
            {"discord.enabled": True, "discord.token": DISCORD_TOKEN},  # a channel is needed
        ),
        Row("telegram.token", "123456:" + "A" * 35, None, None, {"telegram.token_env": DROP}),
        Row("telegram.token_env", "RB_OTHER_TG_TOKEN"),
        Row("telegram.api_base_url", "http://127.0.0.1:9/bot"),
        Row("telegram.api_file_url", "http://127.0.0.1:9/file"),
        Row(
            "telegram.allowed_users",
            [str(USER), str(OTHER)],
            lambda r: r.answered_by_model("hi", OTHER),
            True,
        ),
        Row("telegram.group_mode", "all"),
        Row("telegram.poll_timeout_s", 6),
        Row(
            "telegram.mode",
            "webhook",
            None,
            None,
            {
                "telegram.webhook_url": "https://bot.example/tg",
                "telegram.webhook_secret_env": "RB_HOOK",
            },
        ),
        Row("telegram.webhook_url", "https://bot.example/tg"),
        Row("telegram.webhook_listen", "127.0.0.1:8444"),
        Row("telegram.webhook_secret_env", "RB_HOOK"),
        Row("telegram.status_reactions", True),
        Row("discord.enabled", True, None, None, {"discord.token": DISCORD_TOKEN}),
        Row("discord.token", DISCORD_TOKEN),
        Row("discord.token_env", "RB_OTHER_DC_TOKEN"),
        Row("discord.api_base_url", "http://127.0.0.1:9"),
        Row(
            "discord.allowed_users",
            ["42"],
            seen(lambda r: r.settings.allowed_users["discord"]),
            {"42"},
        ),
        Row("discord.allowed_guilds", ["43"]),
        Row("discord.respond_in_guilds", "all"),
        Row("discord.reply_in_thread", True),
        Row("discord.command_guilds", ["44"]),
        Row("discord.admin_roles", ["Mods"]),
        Row("discord.shard_count", 2),
        Row("discord.shard_ids", [0], None, None, {"discord.shard_count": 2}),
        Row("discord.status_reactions", True),
        Row("discord.gateway_timeout_s", 9.0),
        Row(
            "console.allowed_users",
            ["5"],
            seen(lambda r: r.settings.allowed_users["console"]),
            {"5"},
        ),
        # [tools]
        Row(
            "tools.builtins",
            ["current_time", "fetch_url", "remember"],
            lambda r: r.turn(),
            lambda b: "remember" in tools_of(b),
        ),
        Row(
            "tools.confirm",
            ["current_time"],
            seen(lambda r: r.tool("current_time").tier.name),
            "DESTRUCTIVE",
        ),
        Row(
            "tools.dm_only",
            ["current_time"],
            seen(lambda r: r.app.dispatcher.turns.settings.dm_only),
            {"current_time"},
        ),
        Row(
            "tools.plugins",
            ["reload_plugin"],
            lambda r: r.turn(),
            lambda b: "order_status" in tools_of(b),
        ),
        Row(
            "tools.always_ask", ["fetch_url"], seen(lambda r: r.settings.always_ask), {"fetch_url"}
        ),
        Row(
            "tools.trusted_sources",
            ["example.org", "mcp:wiki"],
            seen(lambda r: (r.loop.calls.containment.domains, r.loop.calls.containment.servers)),
            ({"example.org"}, {"wiki"}),
        ),
        Row(
            "tools.confirmation_timeout_s",
            30.0,
            seen(lambda r: r.loop.calls.confirmation_timeout_s),
        ),
        Row(
            "tools.workspace",
            str(ws),
            seen(lambda r: r.tool("read_file") is not None),
            True,
            {"tools.builtins": ["current_time", "fetch_url", "read_file"]},
        ),
        Row("tools.allow_private_urls", False, fetch("allow_private")),
        Row("tools.fetch_allow_hosts", ["example.org"], fetch("allow_hosts"), {"example.org"}),
        Row("tools.fetch_max_bytes", 2_000_000, fetch("max_bytes")),
        Row("tools.fetch_max_chars", 5_000, fetch("max_chars")),
        Row("tools.fetch_timeout_s", 7.0, fetch("fetch_timeout_s")),
        Row(
            "tools.command_timeout_s",
            9.0,
            seen(lambda r: r.tool("run_command").command_timeout_s),
            None,
            {"tools.workspace": str(ws), "tools.builtins": ["run_command"]},
        ),
        Row(
            "tools.command_output_max",
            999,
            seen(lambda r: r.tool("run_command").output_max),
            None,
            {"tools.workspace": str(ws), "tools.builtins": ["run_command"]},
        ),
        # [tools.run_command]: the sandbox of the next command (tools/builtins/_bwrap.py)
        *(
            Row(
                f"tools.run_command.{key}",
                value,
                seen(lambda r, key=key: getattr(r.tool("run_command").config, key)),
                expect,
                {"tools.workspace": str(ws), "tools.builtins": ["run_command"]},
            )
            for key, value, expect in (
                ("sandbox", "none", None),
                ("network", True, None),
                ("readable", [str(rig_tmp)], [rig_tmp]),
                ("cpu_s", 7, None),
                ("memory_mb", 99, None),
                ("file_size_mb", 9, None),
                ("processes", 7, None),
            )
        ),
        Row("tools.default_timeout_s", 7.0, seen(lambda r: r.loop.registry.default_timeout_s)),
        Row("tools.strict_schemas", True, seen(lambda r: r.loop.model.strict_tools)),
        Row(
            "tools.delegate_max_iterations",
            3,
            seen(lambda r: r.tool("delegate").settings.max_iterations),
            None,
            {"tools.builtins": ["current_time", "delegate"]},
        ),
        Row(
            "tools.delegate_max_tokens",
            5_000,
            seen(lambda r: r.tool("delegate").settings.max_tokens),
            None,
            {"tools.builtins": ["current_time", "delegate"]},
        ),
        Row(
            "tools.web_search.backend",
            "searxng",
            lambda r: r.turn(),
            lambda b: "web_search" in tools_of(b),
            {"tools.web_search.url": "http://127.0.0.1:9", "tools.builtins": ["web_search"]},
        ),
        Row(
            "tools.web_search.url",
            "http://127.0.0.1:8",
            search("url"),
            None,
            {"tools.web_search.backend": "searxng", "tools.builtins": ["web_search"]},
        ),
        Row(
            "tools.web_search.api_key",
            "BSA-search-key-000001",
            seen(lambda r: r.tool("web_search").api_key),
            None,
            {"tools.web_search.backend": "brave", "tools.builtins": ["web_search"]},
        ),
        Row(
            "tools.web_search.api_key_env",
            "RB_SEARCH_KEY",
            seen(lambda r: r.tool("web_search").api_key),
            "BSA-env-search-key-0001",
            {"tools.web_search.backend": "brave", "tools.builtins": ["web_search"]},
        ),
        Row(
            "tools.web_search.max_results",
            3,
            search("max_results"),
            None,
            {**SEARXNG, "tools.builtins": ["web_search"]},
        ),
        Row(
            "tools.web_search.safe_search",
            "strict",
            search("safe_search"),
            None,
            {**SEARXNG, "tools.builtins": ["web_search"]},
        ),
        Row(
            "tools.web_search.timeout_s",
            4.0,
            search("timeout_s"),
            None,
            {**SEARXNG, "tools.builtins": ["web_search"]},
        ),
        Row(
            "mcp.servers",
            [
                {
                    "name": "fake",
                    "command": sys.executable,
                    "args": [str(ROOT / "tests" / "fakes" / "mcp_server.py")],
                }
            ],
            lambda r: r.turn(),
            lambda b: any(n.startswith("fake") for n in tools_of(b)),
        ),
        Row("log.level", "DEBUG", seen(lambda r: logging.getLogger().level), logging.DEBUG),
        Row("metrics.listen", "127.0.0.1:9"),
        # [web]: the console starts, moves and stops with the reload
        Row("web.listen", "PORT", lambda r: r.get("/signin"), lambda got: got[0] == 200),
        Row(
            "web.public_url",
            "https://bot.example",
            _console_link,
            lambda words: "https://bot.example/signin?t=" in words,
            {"web.listen": "PORT"},
        ),
        Row("web.link_minutes", 5.0, seen(lambda r: r.settings.console_link_s), 300.0),
        Row(
            "web.session_hours",
            2.0,
            _signed_in_cookie,
            lambda c: "Max-Age=7200" in c,
            {"web.listen": "PORT"},
        ),
    ]


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def other() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def base_config(tmp: Path, llm: FakeOpenAI, tg: FakeTelegram) -> dict[str, Any]:
    return {
        "llm": {
            "base_url": llm.base_url,
            "api_key": "sk-first-key-0001",
            "model": "fake-model",
            "max_retries": 0,
            "request_timeout_s": 10,
        },
        "storage": {"path": str(tmp / "relaybot.db")},
        "telegram": {
            "enabled": True,
            "token_env": "RB_TEST_TG_TOKEN",
            "api_base_url": tg.base_url,
            "poll_timeout_s": 5,
            "allowed_users": [str(USER), str(OWNER)],
        },
        "access": {"admins": [f"telegram:{OWNER}"]},
        "limits": {"messages_per_minute": 1_000},  # the table sends many
        "media": {"speech_model": "tts-1", "image_model": "dall-e-3"},
        "tools": {
            "builtins": ["current_time", "fetch_url", "schedule_task"],
            "dm_only": [],
            "allow_private_urls": True,
        },
        "skills": {"dirs": [str(tmp / "skills1")]},
    }


def test_the_table_names_every_key_of_the_schema_and_the_readme_says_what_waits() -> None:
    keys = [row.key for row in rows(Path("/tmp"))]
    assert len(keys) == len(set(keys)), "a key twice"
    assert sorted(keys) == sorted(schema_keys())
    for row in rows(Path("/tmp")):
        assert (row.probe is None) == (row.key in restart_keys()), row.key
    readme = (ROOT / "README.md").read_text()
    shown = re.search(r"<!-- restart-keys -->\n(.*?)\n<!-- /restart-keys -->", readme, re.S)
    assert shown is not None and shown.group(1) == readme_list()


async def test_a_reload_of_each_key_reaches_the_next_turn_or_is_named_as_waiting_for_a_restart(
    tmp_path: Path,
    llm: FakeOpenAI,
    other: FakeOpenAI,
    tg: FakeTelegram,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name, value in {
        "RB_TEST_TG_TOKEN": tg.token,
        "RB_RELOAD_KEY": "sk-env-key-0003",
        "RB_RELOAD_PG_URL": "postgresql://relaybot@127.0.0.1:9/relaybot",
        "RB_SEARCH_KEY": "BSA-env-search-key-0001",
        "RB_OTHER_TG_TOKEN": "123456:" + "B" * 35,
        "RB_OTHER_DC_TOKEN": DISCORD_TOKEN,
        "RB_HOOK": "a-webhook-secret-0001",
    }.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "skills1").mkdir()
    (tmp_path / "skills2" / "greeting").mkdir(parents=True)
    (tmp_path / "skills2" / "greeting" / "SKILL.md").write_text(SKILL)
    (tmp_path / "ws").mkdir()
    (tmp_path / "reload_plugin.py").write_text(PLUGIN)
    llm.default = echo
    other.default = echo
    base = base_config(tmp_path, llm, tg)
    path = tmp_path / "config.toml"
    path.write_text(toml(base))
    first = tmp_path / "first.toml"  # the daemon's store, for `relaybot status`
    first.write_text(toml(base))
    lock_store(tmp_path / "relaybot.db")  # as `relaybot run` does: status then names the daemon
    caplog.set_level(logging.INFO)
    async with App(read_checked(path)) as app:
        reloader = Reloader(app, path)
        rig = Rig(app, tg, llm, other, reloader, path, base, [], tmp_path)
        await app.store.memory.add(user_owner("telegram", str(USER)), "Likes green tea")
        for words in ("one", "two"):  # a history longer than any limit below
            await rig.turn(words)
        for row in rows(tmp_path):
            value = (
                {"OTHER": other.base_url, "PORT": f"127.0.0.1:{rig.port}"}.get(row.value, row.value)
                if isinstance(row.value, str)
                else row.value
            )
            extra = {k: f"127.0.0.1:{rig.port}" if v == "PORT" else v for k, v in row.also.items()}
            caplog.clear()
            assert await rig.reload({row.key: value, **extra}), (row.key, caplog.text)
            said = [r.getMessage() for r in caplog.records if "until a restart" in r.getMessage()]
            if row.probe is None:
                assert len(said) == 1, (row.key, said)
                [line] = said
                assert row.key in line, (row.key, line)
                out = io.StringIO()
                await _operate.status(load_config(first), False, out)
                [line] = [s for s in out.getvalue().splitlines() if "waiting for a restart" in s]
                assert row.key in line, (row.key, line)
                continue
            assert not said, (row.key, said)
            observed = await row.probe(rig)
            expect = value if row.expect is None else row.expect
            if callable(expect):
                assert expect(observed), (row.key, shown(observed))
            else:
                assert observed == expect, (row.key, observed)
        assert await rig.reload({})  # back to the first file: nothing waits
        assert rig.reloader.waiting == []


async def test_a_key_a_reload_brings_is_kept_out_of_the_stored_errors(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_TEST_TG_TOKEN", tg.token)
    (tmp_path / "skills1").mkdir()
    base = base_config(tmp_path, llm, tg)
    path = tmp_path / "config.toml"
    path.write_text(toml(base))
    new = "sk-reloaded-key-246810"
    async with App(read_checked(path)) as app:
        path.write_text(toml(changed(base, {"llm.api_key": new})))
        assert await Reloader(app, path).reload()
        llm.script(error(401, f"Incorrect API key provided: {new}."))
        tg.inject_message(USER, USER, "hello")
        await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == USER)
        await app.dispatcher.housekeeping.flush()
        errors = [e.text for e in (await app.store.ops.status()).errors]
    assert any("Incorrect API key provided: ***" in e for e in errors), errors
    assert not any(new in e for e in errors)

"""A scripted conversation against a real OpenAI-compatible server, step by step.

    python -m benchmarks.real_server --base-url http://127.0.0.1:8080/v1 [--model NAME]

It runs the real daemon (bot.app.App, a SQLite store in a temporary folder, relaybot's own
providers, context budget and tool loop) behind an in-process chat channel, and talks to the
server through a TCP relay of its own, so an outage is real (connections refused) without
touching the server. The steps, each printed with what it got and how long it took:

1. the tool definitions' cost, as the server counts it (all default built-ins, the small set
   `relaybot init` writes for a local URL, none);
2. doctor's model check (a test request capped at a few tokens);
3. plain turns, then a tool round trip (current_time);
4. an outage in the middle: two messages while the relay refuses connections (each answered
   with relaybot's own words), doctor's check while down, then a message once it is back, which
   carries the three user messages in one and must be answered by the model;
5. a long chat past the window: messages of a few hundred words until old turns are folded into
   the summary, then /compact;
6. streaming on: a plain turn and a tool round trip, then an answer cut by a small max_tokens.

A step is FAILED when relaybot did something wrong (an apology where the server was up, an
error); MODEL when the outcome is the model's own (it answered instead of calling the tool).
Exit status: 1 if any step FAILED.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from bot._doctor_llm import check_llm
from bot.app import App
from bot.config import Config, parse_config
from engine import Command, Message, ModelRequest, Role, ToolSpec
from engine.models import OpenAIModel
from tests.fakes.recording_channel import RecordingChannel
from tools.builtins import builtin_tools
from tools.config import DEFAULT_BUILTINS, ToolsConfig

CHAT = "bench"
MAX_TOKENS: int | None = None  # --max-tokens: a cap for every answer (a slow CPU server)
SMALL_TOOLS = ["current_time", "remind_me"]
APOLOGY = "⚠️"
LONG_TOPICS = ["lighthouses", "bread baking", "river deltas", "chess openings"]


@dataclass
class Step:
    name: str
    status: str  # OK, MODEL, FAILED
    got: str
    seconds: float


class Relay:
    """A TCP relay to the server; `down()` refuses connections (and drops open ones)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._open):
                writer.transport.abort()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                self._open.discard(dst)
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def _config(base_url: str, model: str, folder: Path, **llm: Any) -> Config:
    if MAX_TOKENS and "max_tokens" not in llm:
        llm["max_tokens"] = MAX_TOKENS
    return parse_config(
        {
            "llm": {
                "base_url": base_url,
                "model": model,
                "request_timeout_s": 180,
                "max_retries": 1,
                **llm,
            },
            "storage": {"path": str(folder / "relaybot.db")},
            "tools": {"builtins": SMALL_TOOLS},
            "log": {"level": "WARNING"},
        }
    )


@contextlib.asynccontextmanager
async def daemon(config: Config) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel]) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        yield app, channel


class Run:
    def __init__(self) -> None:
        self.steps: list[Step] = []

    def add(self, name: str, status: str, got: str, seconds: float) -> None:
        step = Step(name, status, " ".join(got.split())[:300], seconds)
        self.steps.append(step)
        print(f"[{len(self.steps):2}] {name}: {status} ({seconds:.1f} s) - {step.got}", flush=True)

    async def say(
        self, app: App, ch: RecordingChannel, text: str, name: str, *, expect_apology: bool = False
    ) -> str:
        """Send `text` as the user, wait for the turn to end, record what the chat showed."""
        before = len(ch.log)
        started = time.monotonic()
        await app.dispatcher.handle_inbound(ch.message(text, chat_id=CHAT))
        await app.dispatcher.wait_idle("test", CHAT)
        shown = [s for s in ch.log[before:] if s.kind in ("send", "edit")]
        answer = shown[-1].text if shown else "(nothing shown)"
        seconds = time.monotonic() - started
        apology = answer.startswith(APOLOGY)
        ok = apology if expect_apology else (not apology and bool(shown))
        self.add(name, "OK" if ok else "FAILED", answer, seconds)
        return answer

    async def tools_called(self, app: App, name: str, wanted: str) -> None:
        conv = await app.store.conversations.active("test", CHAT)
        history = await app.store.conversations.history(conv.id, 200)
        last_user = max(i for i, m in enumerate(history) if m.role is Role.USER)
        calls = [c.name for m in history[last_user:] for c in m.tool_calls]
        status = "OK" if wanted in calls else "MODEL"
        got = f"tools called: {', '.join(calls) or 'none'}"
        self.add(name, status, got, 0.0)


async def tool_costs(run: Run, base_url: str, model: str) -> None:
    """What the tool definitions cost in the server's own tokens."""

    def specs(names: list[str]) -> list[ToolSpec]:
        made = builtin_tools(ToolsConfig(builtins=names), notes=None)
        return [ToolSpec(t.name, t.description, t.parameters) for t in made]

    llm = OpenAIModel(base_url=base_url, api_key="", model=model, timeout_s=300, max_retries=0)
    counts = {}
    try:
        for label, names in (
            ("default built-ins", [n for n in DEFAULT_BUILTINS if n != "web_search"]),
            ("small set", SMALL_TOOLS),
            ("none", []),
        ):
            started = time.monotonic()
            request = ModelRequest("", [Message.user("hi")], specs(names), max_output_tokens=1)
            reply = await llm.complete(request)
            counts[label] = (len(names), reply.usage.prompt_tokens, time.monotonic() - started)
    finally:
        await llm.aclose()
    bare = counts["none"][1]
    for label, (n, tokens, seconds) in counts.items():
        if label != "none":
            got = f"{n} tools: {tokens - bare:,} tokens of definitions (prompt {tokens:,})"
            run.add(f"tool definitions, {label}", "OK", got, seconds)


async def window_of(base_url: str) -> int | None:
    parts = urlsplit(base_url)
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    with contextlib.suppress(Exception):
        async with aiohttp.ClientSession() as http, http.get(f"{root}/props") as resp:
            props = await resp.json()
            return int(props["default_generation_settings"]["n_ctx"])
    return None


async def doctor_step(run: Run, config: Config, name: str, *, want: tuple[str, ...]) -> None:
    started = time.monotonic()
    check = await check_llm("llm", config.llm)
    status = "OK" if check.status.value in want else "FAILED"
    run.add(name, status, f"{check.status.value} - {check.detail}", time.monotonic() - started)


async def main(base_url: str, model: str | None) -> int:
    logging.basicConfig(level=logging.WARNING, format="    log: %(levelname)s %(message)s")
    run = Run()
    if model is None:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base_url.rstrip('/')}/models") as resp:
                model = (await resp.json())["data"][0]["id"]
    assert model is not None
    print(f"server {base_url}, model {model}, window {await window_of(base_url)}", flush=True)
    await tool_costs(run, base_url, model)
    parts = urlsplit(base_url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 80)
    await relay.up()
    relayed = urlunsplit((parts.scheme, f"127.0.0.1:{relay.port}", parts.path, "", ""))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = _config(relayed, model, folder)
        await doctor_step(run, config, "doctor, server up", want=("OK", "WARNING"))
        async with daemon(config) as (app, ch):
            await run.say(app, ch, "Hello! In one sentence: what can you do?", "plain turn 1")
            await run.say(app, ch, "What is the capital of France?", "plain turn 2")
            await run.say(
                app, ch, "What time is it now? Use the current_time tool.", "tool round trip"
            )
            await run.tools_called(app, "tool round trip: calls", "current_time")
            await relay.down()
            await run.say(app, ch, "Are you there?", "outage: message 1", expect_apology=True)
            await run.say(app, ch, "Hello??", "outage: message 2", expect_apology=True)
            await doctor_step(run, config, "doctor, server down", want=("FAILED",))
            await relay.up()
            await run.say(app, ch, "Now you are back. Say hi.", "after the outage")
            budget = app.dispatcher.loop.context
            for i, topic in enumerate(LONG_TOPICS * 2):  # until old turns are folded
                if budget is not None and budget.summary_requests:
                    break
                text = f"Tell me about {topic}. Some notes of mine first: " + " ".join(
                    f"Note {n}: {topic} matter to me for reason number {n}." for n in range(40)
                )
                await run.say(app, ch, text, f"long chat {i + 1} ({len(text):,} chars)")
            folded = budget.summary_requests if budget is not None else 0
            status = "OK" if folded else "FAILED"
            run.add("long chat: summaries written", status, f"{folded} summary requests", 0.0)
            started = time.monotonic()
            reply = await app.dispatcher.handle_command(
                ch.message("/compact", chat_id=CHAT), Command.COMPACT
            )
            ok = not reply.text.startswith(APOLOGY)
            run.add("/compact", "OK" if ok else "FAILED", reply.text, time.monotonic() - started)
        config = _config(relayed, model, folder, stream=True)
        async with daemon(config) as (app, ch):
            await run.say(app, ch, "Name three colours.", "streamed plain turn")
            await run.say(app, ch, "What time is it? Use the current_time tool.", "streamed tool")
            await run.tools_called(app, "streamed tool: calls", "current_time")
        config = _config(relayed, model, folder, stream=True, max_tokens=24)
        async with daemon(config) as (app, ch):
            answer = await run.say(
                app, ch, "Write a long story about a dragon.", "answer capped at 24 tokens"
            )
            cut = "cut off by the length limit" in answer
            run.add("cut answer says so", "OK" if cut else "MODEL", answer[-80:], 0.0)
    await relay.down()
    failed = [s.name for s in run.steps if s.status == "FAILED"]
    models = [s.name for s in run.steps if s.status == "MODEL"]
    print(
        f"\n{len(run.steps)} steps: {len(run.steps) - len(failed) - len(models)} OK, "
        f"{len(models)} up to the model ({', '.join(models) or 'none'}), "
        f"{len(failed)} FAILED ({', '.join(failed) or 'none'})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", help="default: the first the server lists")
    parser.add_argument(
        "--max-tokens", type=int, help="cap every answer (default: relaybot's own default cap)"
    )
    args = parser.parse_args()
    MAX_TOKENS = args.max_tokens
    sys.exit(asyncio.run(main(args.base_url, args.model)))

"""The context budget over a long chat: is the cost of a turn flat once the budget is reached?

A scripted conversation through the real engine (dispatcher, SQLite store, the openai SDK)
against the fake OpenAI server, which counts tokens its own way and refuses prompts longer
than its window. Every turn calls a tool that returns a large page, then answers. Prints the
prompt tokens of the turn's largest request as the provider reports them at turns 1, 10, 100
and 1,000, the largest over the turns after the budget was first reached, the summary requests
per 100 turns, and the extra time a turn that folds the history takes (zero-latency model: with
a real one, add one request's latency).

    .venv/bin/python benchmarks/bench_context.py [--turns 1000] [--window 32000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot._engine import build_engine
from engine import SqliteStore
from engine.chat import Dispatcher, LimitSettings, Settings
from engine.context import ContextSettings
from engine.models import OpenAIModel
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tools import ToolRegistry, tool

WORDS = "a quiet harbour town sells fish bread lamps rope and maps to sailors every day".split()


def page(n: int, chars: int) -> str:
    words = [WORDS[(i * 5 + n) % len(WORDS)] for i in range(chars // 5)]
    return f"Page {n}: " + " ".join(words)


async def run(args: argparse.Namespace) -> None:
    @tool
    async def fetch_page(n: int) -> str:
        """Fetch page n of the harbour log."""
        return page(n, args.result_chars)

    def model_reply(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "user":
            return tool_call("fetch_page", {"n": len(body["messages"])})
        return text("Read it; nothing unusual in the harbour today.")

    registry = ToolRegistry()
    registry.register(fetch_page)
    async with FakeOpenAI(default=model_reply, context_window=args.window) as llm:
        model = OpenAIModel(base_url=llm.base_url, api_key="k", model="fake-model", max_retries=0)
        with tempfile.TemporaryDirectory() as tmp:
            async with SqliteStore(Path(tmp) / "bench.db") as store:
                settings = Settings(
                    system_prompt="You are a helpful harbour assistant. Answer briefly.",
                    allowed_users={"test": {"u1"}},
                    context=ContextSettings(
                        window=args.window, tool_result_chars=args.tool_result_chars
                    ),
                    limits=LimitSettings(messages_per_minute=1_000_000),  # one fast user
                )
                d = build_engine(store, model, registry, settings)
                channel = RecordingChannel()
                d.add_channel(channel)
                await d.prepare()
                await d.start()
                assert d.loop.context is not None
                budget = await d.loop.context.budget()
                per_turn = await converse(d, channel, llm, args.turns)
                await d.aclose()
        await model.aclose()
    report(args, budget, per_turn, llm)


class Turn:
    def __init__(self, prompt: int, summaries: int, seconds: float) -> None:
        self.prompt, self.summaries, self.seconds = prompt, summaries, seconds


async def converse(d: Dispatcher, ch: RecordingChannel, llm: FakeOpenAI, turns: int) -> list[Turn]:
    out: list[Turn] = []
    for n in range(1, turns + 1):
        first, summaries = len(llm.prompt_counts), len(llm.summary_requests)
        started = time.perf_counter()
        await d.handle_inbound(ch.message(f"Read the next page of the log, please ({n})."))
        await ch.wait_for("send", n, timeout=60)
        seconds = time.perf_counter() - started
        mine = [
            c
            for body, c in zip(llm.requests[first:], llm.prompt_counts[first:], strict=True)
            if body.get("tools")
        ]
        out.append(Turn(max(mine), len(llm.summary_requests) - summaries, seconds))
    return out


def report(args: argparse.Namespace, budget: int, turns: list[Turn], llm: FakeOpenAI) -> None:
    print(
        f"window {args.window:,} tokens, budget {budget:,} prompt tokens per request; "
        f"tool results of {args.result_chars:,} characters, older ones cut to "
        f"{args.tool_result_chars:,}; {len(turns)} turns"
    )
    for n in (1, 10, 100, 1_000):
        if n <= len(turns):
            print(f"  prompt tokens at turn {n:>5,}: {turns[n - 1].prompt:>7,}")
    reached = next((i for i, t in enumerate(turns) if t.prompt > budget * 0.9), None)
    if reached is not None:
        later = max(t.prompt for t in turns[reached:])
        print(f"  budget nearly reached at turn {reached + 1}; largest request after: {later:,}")
    total = sum(t.summaries for t in turns)
    print(
        f"  summary requests: {total} in {len(turns)} turns "
        f"({total / len(turns) * 100:.1f} per 100 turns; target <= 10)"
    )
    plain = [t.seconds for t in turns if t.summaries == 0]
    folding = [t.seconds for t in turns if t.summaries > 0]
    if plain and folding:
        extra = statistics.median(folding) - statistics.median(plain)
        print(
            f"  turn time, median: {statistics.median(plain) * 1000:.1f} ms; a turn that folds "
            f"the history: +{extra * 1000:.1f} ms (zero-latency model; add one model request)"
        )
    print(f"  requests refused as too long: {llm.refused} (must be 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--result-chars", type=int, default=6_000, help="each tool result")
    parser.add_argument(
        "--tool-result-chars", type=int, default=2_000, help="[context] tool_result_chars"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

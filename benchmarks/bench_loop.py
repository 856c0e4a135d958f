"""Engine overhead: the tool loop versus the bare SDK calls it makes.

Against the fake OpenAI server with zero latency, N sequential turns of one tool call each
(two model requests per turn) through ToolLoop with its context budget (as the daemon runs it),
and the same 2N requests made directly with openai.AsyncOpenAI. Prints both rates and the ratio
loop/bare (target: at most 0.8).

    .venv/bin/python benchmarks/bench_loop.py [N]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import SqliteStore
from engine.context import ContextBudget, ContextSettings
from engine.loop import ConversationKey, ToolLoop, TurnContext
from engine.models import Message, OpenAIModel
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tools import ToolRegistry, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def reply(body: dict) -> object:
    last = body["messages"][-1]
    return tool_call("add", {"a": 2, "b": 3}) if last["role"] == "user" else text("5")


async def bare(client: OpenAIModel, n: int) -> float:
    sdk = client.sdk
    tools = [{"type": "function", "function": {"name": "add", "parameters": add.parameters}}]
    start = time.perf_counter()
    for _ in range(n):
        msgs: list[dict] = [{"role": "user", "content": "add 2 and 3"}]
        first = await sdk.chat.completions.create(model="fake-model", messages=msgs, tools=tools)
        call = first.choices[0].message.tool_calls[0]
        msgs.append(first.choices[0].message.model_dump(exclude_none=True))
        msgs.append({"role": "tool", "tool_call_id": call.id, "content": "5"})
        await sdk.chat.completions.create(model="fake-model", messages=msgs, tools=tools)
    return time.perf_counter() - start


async def looped(loop: ToolLoop, n: int) -> float:
    ctx = TurnContext(ConversationKey("bench", "1"), "u1")
    start = time.perf_counter()
    for _ in range(n):
        result = await loop.run([Message.user("add 2 and 3")], ctx)
        assert result.text == "5", result
    return time.perf_counter() - start


async def main(n: int) -> None:
    async with FakeOpenAI(default=reply) as llm:
        client = OpenAIModel(base_url=llm.base_url, api_key="k", model="fake-model", max_retries=0)
        registry = ToolRegistry()
        registry.register(add)
        with tempfile.TemporaryDirectory() as tmp:
            async with SqliteStore(Path(tmp) / "bench.db") as store:
                budget = ContextBudget(client, store.context, ContextSettings(window=32_000))
                loop = ToolLoop(client, registry, context=budget)
                await bare(client, 20)  # warm up connections and code paths
                await looped(loop, 20)
                bare_s, loop_s = [], []
                for _ in range(3):  # interleave to even out noise; keep the best of each
                    bare_s.append(await bare(client, n))
                    loop_s.append(await looped(loop, n))
        await client.aclose()
    b, lp = min(bare_s), min(loop_s)
    print(f"turns: {n} (2 model requests each), zero-latency fake server")
    print(f"bare SDK: {n / b:8.1f} turns/s  ({b / n * 1000:.2f} ms/turn)")
    print(f"loop:     {n / lp:8.1f} turns/s  ({lp / n * 1000:.2f} ms/turn)")
    print(f"ratio loop/bare: {lp / b:.3f}  (target <= 0.8)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))

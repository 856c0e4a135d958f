"""A real MCP server for tests, written with the mcp SDK.

Run it as ``python tests/fakes/mcp_server.py`` (stdio) or
``python tests/fakes/mcp_server.py --http PORT`` (streamable HTTP on 127.0.0.1, at /mcp), or
``--sse PORT`` (the older HTTP+SSE transport, at /sse).

Its instructions: ``INSTRUCTIONS``. Tools:

* ``lookup(word)``: annotated read-only; answers ``definition of <word>``.
* ``write_note(text)``: no annotations, so a client must treat it as destructive.
* ``explode()``: raises, so the call comes back as an error result.
* ``crash()``: the server process exits in the middle of the call.
* ``hang()``: never answers (for timeouts).
* ``pid()``: the server's process id (to see a restart).
* ``log_env(name)``: writes ``NAME=value`` of its environment to stderr, as a careless server does.
* ``read_path(path)``: a file's text, or the error reading it.
* ``detach(seconds)``: starts ``sleep <seconds>`` in its own session, to outlive the call.
* ``pick_tea()``: asks the user (elicitation) which tea, one of a list; says what came back.
* ``add_tool(name)``: adds a tool ``name`` (answers ``<name> is new``) and says the list changed.
* ``chatty(level, text)``: sends ``text`` as a log message at ``level``.
* ``steps(count, until)``: reports progress ``i`` of ``count`` ("step i"), waits for a line in
  the FIFO ``until`` (if given), answers ``done``; its title is "Step Counter".
* ``slow_report()``: listed as running only as an MCP task (`execution.taskSupport: required`),
  which this server does not announce (no `tasks` capability): a client must leave it out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import Tool, ToolAnnotations, ToolExecution
from pydantic import BaseModel

INSTRUCTIONS = "Look a word up with lookup before guessing what it means."
TASKS_ONLY = {"slow_report"}


class FakeServer(MCPServer):
    async def list_tools(self) -> list[Tool]:
        tasks_only = ToolExecution(task_support="required")
        return [
            t.model_copy(update={"execution": tasks_only}) if t.name in TASKS_ONLY else t
            for t in await super().list_tools()
        ]


server = FakeServer("relaybot-test", instructions=INSTRUCTIONS)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(word: str) -> str:
    """Look a word up in the test dictionary."""
    return f"definition of {word}"


@server.tool()
def write_note(text: str) -> str:
    """Store a note on the server."""
    return f"stored {text!r}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def explode() -> str:
    """Always fails."""
    raise ValueError("the test tool exploded")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Kill the server process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def hang() -> str:
    """Never answer."""
    await anyio.Event().wait()
    return "unreachable"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def log_env(name: str) -> str:
    """Write one environment variable to stderr."""
    print(f"{name}={os.environ.get(name, '')}", file=sys.stderr, flush=True)
    return "logged"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_path(path: str) -> str:
    """A file's text, or why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def detach(seconds: int) -> str:
    """Start a `sleep` in its own session (setsid) and return its pid."""
    child = subprocess.Popen(
        ["sleep", str(seconds)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Popen returns once the exec began; the new program's arguments are in place a moment later.
    cmdline = Path(f"/proc/{child.pid}/cmdline")
    while not cmdline.read_bytes():
        os.sched_yield()
    return str(child.pid)


class Tea(BaseModel):
    tea: Literal["green", "black", "oolong"]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def pick_tea(ctx: Context) -> str:
    """Ask the user which tea to brew."""
    answer = await ctx.elicit("Which tea shall I brew?", Tea)
    if answer.action == "accept":
        return f"brewing {answer.data.tea}"
    return f"no tea: {answer.action}"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool to this server, and tell the client its tool list changed."""
    server.add_tool(lambda: f"{name} is new", name=name, description="Added while running.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def chatty(level: str, text: str, ctx: Context) -> str:
    """Send a log message to the client."""
    await ctx.session.send_log_message(level=level, data=text, logger="chatter")
    return "said"


@server.tool(annotations=ToolAnnotations(read_only_hint=True), title="Step Counter")
async def steps(count: int, ctx: Context, until: str = "") -> str:
    """Count steps, reporting progress after each; then wait for a line in the FIFO `until`."""
    for i in range(1, count + 1):
        await ctx.report_progress(i, count, f"step {i}")
    if until:  # the test writes it once it has seen the progress
        await anyio.to_thread.run_sync(_read, until)
    return "done"


@server.tool()
def slow_report() -> str:
    """A report that takes long (listed as a task-only tool)."""
    return "the report"


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fifo:
        return fifo.readline()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    parser.add_argument("--sse", type=int, metavar="PORT", help="serve HTTP+SSE")
    opts = parser.parse_args()
    if opts.http:
        server.run("streamable-http", host="127.0.0.1", port=opts.http)
    elif opts.sse:
        server.run("sse", host="127.0.0.1", port=opts.sse)
    else:
        server.run()


if __name__ == "__main__":
    main()

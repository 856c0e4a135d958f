"""A real MCP server for tests, written with the mcp SDK.

Run it as ``python tests/fakes/mcp_server.py`` (stdio) or
``python tests/fakes/mcp_server.py --http PORT`` (streamable HTTP on 127.0.0.1).

Tools:

* ``lookup(word)``: annotated read-only; answers ``definition of <word>``.
* ``write_note(text)``: no annotations, so a client must treat it as destructive.
* ``explode()``: raises, so the call comes back as an error result.
* ``crash()``: the server process exits in the middle of the call.
* ``hang()``: never answers (for timeouts).
* ``pid()``: the server's process id (to see a restart).
"""

from __future__ import annotations

import argparse
import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("relaybot-test")


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    opts = parser.parse_args()
    if opts.http:
        server.run("streamable-http", host="127.0.0.1", port=opts.http)
    else:
        server.run()


if __name__ == "__main__":
    main()

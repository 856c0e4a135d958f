"""MCP servers' tools as relaybot tools: what the daemon uses to connect the `[[mcp.servers]]`.

    async with McpManager(config.mcp.servers, registry, client=McpClient(...)) as mcp:
        ...  # the registry now holds "<server>__<tool>" for each server that started
        mcp.tools()  # [McpToolInfo(server, name, tier), ...] for `relaybot tools`

Each server's session lives in one long-lived supervisor task, because the SDK's anyio cancel
scopes must be entered and exited by the same task; calls from other tasks use the session
directly. When a connection drops (the process exits, a keep-alive ping fails) the supervisor
reconnects with backoff, and calls meanwhile get an error result. A server that cannot start is
logged and tried again the same way; its tools are offered once it starts, and `down()` names
it meanwhile (for `relaybot tools` and `doctor`). A tool the server's `tools`/`exclude` lists
leave out, or one that runs only as an MCP task on a server that announces no tasks, is not
registered; `left_out()` says why. A task-only tool of a server that runs tasks is a background
job that polls its task, and after a restart polls it again (tools/mcp/_tasks.py). Over
HTTP, a server that answers 404 for the session gets a new one at once, and a call it refused
so is sent again; the servers' `instructions` reach the system prompt through the manager (a
PromptPart), their log messages the daemon's log, their progress the turn's status line.

What a server returns (tools/mcp/_content.py): text for the model; pictures the model is shown
when it can see; content meant for the user, and binary resources, sent to the chat as files;
resources it lists or links readable through its `<server>__read_resource` (nothing else).
What relaybot offers as a client (tools/mcp/_client.py, hooks the daemon gives): the workspace
as the roots, sampling with relaybot's model (per server, off by default), elicitation (a
question to the user whose call it is).

Tiers: a tool is safe only if it declares `readOnlyHint: true` and the server's
`trust_annotations` is on, or if it is in the server's `trusted_tools`; every other tool asks.
What a tool returns reaches the model only as a tool result.

A stdio server runs under the same keeper as run_command (`tools/builtins/_sandbox.py`): its
descendants die with it, and it cannot read the daemon's /proc entries or the credentials
directory. Its stderr is read line by line into the `tools.mcp` logger, so the daemon's log
handler redacts secrets from it like from any other record.

The parts, one idea each:
    _manager.py     McpManager (the servers' tools in a registry), McpTool, names and tiers
    _server.py      one server's supervisor task: connect, keep alive, reconnect; its calls
    _content.py     what a call or a resource read returns, as a ToolResult
    _client.py      the server's requests to relaybot: roots, sampling, elicitation
    _transport.py   the connection itself: a stdio process under the keeper, or (streamable) HTTP
    _notices.py     what a server says unasked: log messages, a changed tool list, progress
    _session.py     a session's plumbing: the stream relay, the handshake, the paged tool list
    _oauth.py       an HTTP server's OAuth 2.1 sign-in (the SDK's provider; the daemon's hooks)
    _tasks.py       a tool run as an MCP task: started, polled, its result; kept with its job

Importing this package imports the mcp SDK (slow): the daemon does it only when servers are
configured. The `[mcp]` config models are in :mod:`tools.config`, which is cheap.
"""

from tools.mcp._client import McpClient, Question, Sampling
from tools.mcp._manager import (
    LeftOut,
    McpManager,
    McpTool,
    McpToolInfo,
    ServerDown,
    tool_name,
    tool_tier,
)
from tools.mcp._oauth import OAuth
from tools.mcp._transport import launch_problem

__all__ = [
    "LeftOut",
    "McpClient",
    "McpManager",
    "McpTool",
    "McpToolInfo",
    "OAuth",
    "Question",
    "Sampling",
    "ServerDown",
    "launch_problem",
    "tool_name",
    "tool_tier",
]

"""`relaybot doctor`'s MCP check: does each `[[mcp.servers]]` entry start and list its tools?

Like the model check, it does the real thing: the servers are started as the daemon starts
them (tools/mcp, the same keeper, sandbox and transport), once, without retries, and stopped
again. A server that fails is named with the error of its attempt.
"""

from __future__ import annotations

from bot._doctor_base import Check, Status
from bot.config import Config
from tools.registry import ToolRegistry

_FIX = (
    "check the server's command, args and cwd (or url and headers); `relaybot tools` "
    "starts it the same way, and the daemon log has its stderr"
)


async def check_mcp(config: Config, *, connect_timeout_s: float = 30.0) -> list[Check]:
    """One check per configured server; nothing when there are none."""
    if not config.mcp.servers:
        return []
    from tools.mcp import McpManager  # imports the mcp SDK: only when there are servers

    manager = McpManager(
        config.mcp.servers,
        ToolRegistry(),
        backoff_s=(3600.0,),  # one attempt: the manager is left long before a retry
        connect_timeout_s=connect_timeout_s,
    )
    async with manager:
        down = {d.server: d.reason for d in manager.down()}
        offered = [info.server for info in manager.tools()]
        left = [each.server for each in manager.left_out()]
    checks = []
    for server in config.mcp.servers:
        name = f"mcp:{server.name}"
        if server.name in down:
            reason = down[server.name]
            checks.append(Check(name, Status.FAILED, f"did not start: {reason}", _FIX))
            continue
        detail = f"started, {offered.count(server.name)} tools offered"
        if n := left.count(server.name):
            detail += f", {n} left out"
        checks.append(Check(name, Status.OK, detail))
    return checks

"""The connection to one MCP server: a local process over stdio, run under the same keeper as
run_command (its descendants die with it; it cannot read the daemon's /proc entries or the
credentials directory) and, with `sandbox = "bwrap"`, in run_command's bubblewrap sandbox
(tools/builtins/_bwrap.py: the system read-only, its `sandbox_*` folders, no network unless
`sandbox_network`), with its stderr logged line by line; or a streamable HTTP endpoint (or,
with `transport = "sse"`, an older HTTP+SSE one)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp import StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client

from tools.builtins._bwrap import (
    SYSTEM_DIRS,
    Jail,
    bwrap_argv,
    bwrap_path,
    nproc_argv,
    secret_paths,
)
from tools.builtins._sandbox import keeper_argv
from tools.config import McpServerConfig

log = logging.getLogger("tools.mcp")

MAX_STDERR_LINE = 2_000
SANDBOX_PROCESSES = 256  # what a sandboxed server may run at once


@contextlib.asynccontextmanager
async def transport(
    cfg: McpServerConfig,
    session_gone: Callable[[str | None], None],
    auth: httpx2.Auth | None = None,
    *,
    session: Session | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's (read, write) streams to the server `cfg` names, open while entered.
    `session_gone` is called when a streamable HTTP server answers 404 to a request that
    carries the session's id (or 400 naming the session): it restarted and forgot the session,
    and the spec says to start a new one. It is given the :func:`call_key` of the request when
    that was a tools/call: that call did not run, so it can be sent again. An HTTP server's
    requests go through `auth` (its OAuth sign-in: tools/mcp/_oauth.py) if given. `session`
    learns a streamable HTTP session's id, may name one to join (an MCP task's, after a restart)
    and keeps the session open at the end while it says so (a task still runs in it)."""
    if cfg.command is not None:
        program = [resolve(cfg), *cfg.args]
        procs = None
        if cfg.sandbox == "bwrap":
            jail = Jail(
                tuple(cfg.sandbox_writable), tuple(cfg.sandbox_readable), cfg.sandbox_network
            )
            program = bwrap_argv(
                bwrap_path() or "bwrap", jail, nproc_argv(program, SANDBOX_PROCESSES)
            )
            procs = SANDBOX_PROCESSES
        keeper, *args = keeper_argv(program, secret_paths(), procs=procs, every_ms=100)
        params = StdioServerParameters(command=keeper, args=args, env=cfg.env or None, cwd=cfg.cwd)
        read_end, write_end = os.pipe()
        threading.Thread(
            target=_log_stderr,
            args=(cfg.name, read_end),
            name=f"mcp-stderr:{cfg.name}",
            daemon=True,
        ).start()
        with os.fdopen(write_end, "w") as errlog:  # closed once the server has its own copy
            async with stdio_client(params, errlog=errlog) as streams:
                errlog.close()
                yield streams
        return
    assert cfg.url is not None
    if cfg.transport == "sse":
        async with sse_client(cfg.url, headers=cfg.headers, timeout=30.0) as streams:
            yield streams
        return

    session = session or Session()

    async def on_response(response: httpx2.Response) -> None:
        if given := response.headers.get(MCP_SESSION_ID):
            session.id = given
        if MCP_SESSION_ID not in response.request.headers or response.status_code not in (400, 404):
            return
        # 404 is the spec's answer; server-everything and servers built like it say 400 "No
        # valid session ID provided" (the body is read once here; the SDK reads it cached)
        if response.status_code == 404 or b"session" in (await response.aread()).lower():
            session_gone(_refused_call(response.request.content))

    timeout = httpx2.Timeout(30.0, read=300.0)
    hooks = {"response": [on_response]}
    headers = {**cfg.headers, **({MCP_SESSION_ID: session.id} if session.id else {})}
    async with httpx2.AsyncClient(
        headers=headers, timeout=timeout, event_hooks=hooks, auth=auth
    ) as http:
        try:
            async with streamable_http_client(
                cfg.url, http_client=http, terminate_on_close=False
            ) as streams:
                yield streams
        finally:
            if session.id and not session.keep():  # the SDK's DELETE, unless a task runs in it
                with contextlib.suppress(httpx2.HTTPError):
                    await http.delete(cfg.url, headers={MCP_SESSION_ID: session.id})


def _never() -> bool:
    return False


@dataclass(slots=True)
class Session:
    """A streamable HTTP session's id, as the server gave it (or as given, to join it), and
    whether to leave it open when the connection ends (`keep`)."""

    id: str | None = None
    keep: Callable[[], bool] = _never


def resolve(cfg: McpServerConfig) -> str:
    """The path of the program a `command` server runs; a FileNotFoundError that says what to
    change when it cannot start (checked again at each start: the system may change)."""
    assert cfg.command is not None
    path = (cfg.env or {}).get("PATH", os.environ.get("PATH"))
    command = shutil.which(cfg.command, path=path)
    if command is None:
        raise FileNotFoundError(f"no command {cfg.command!r} found")
    if cfg.cwd is not None and not cfg.cwd.is_dir():
        raise FileNotFoundError(f"cwd {cfg.cwd} is not a folder")
    if cfg.sandbox == "bwrap":
        if bwrap_path() is None:
            raise FileNotFoundError(
                'sandbox = "bwrap" needs bubblewrap: apt-get install bubblewrap'
            )
        real = os.path.realpath(command)
        shown = [*SYSTEM_DIRS, *map(str, (*cfg.sandbox_writable, *cfg.sandbox_readable))]
        if not any(real == d or real.startswith(d.rstrip("/") + "/") for d in shown):
            raise FileNotFoundError(
                f"{real} is outside the sandbox: add its folder to sandbox_readable"
            )
    return command


def launch_problem(cfg: McpServerConfig) -> str | None:
    """Why the `command` server `cfg` cannot even start (`relaybot check-config`), or None."""
    if cfg.command is None:
        return None
    try:
        resolve(cfg)
    except FileNotFoundError as exc:
        return str(exc)
    return None


def call_key(tool: str, args: dict[str, Any] | None) -> str:
    """A tools/call request's tool and arguments as one string, to know it again."""
    return json.dumps([tool, args or {}], sort_keys=True, default=str)


def _refused_call(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params") or {}
    return call_key(str(params.get("name")), params.get("arguments"))


def _log_stderr(server: str, fd: int) -> None:
    """Log each line the server writes to stderr, until every copy of the pipe is closed."""
    with os.fdopen(fd, "rb") as pipe:
        while raw := pipe.readline(MAX_STDERR_LINE):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                log.info("MCP server %s: %s", server, line)


def describe(exc: BaseException) -> str:
    """An exception in one line for the log (each one of a group), e.g. "ConnectionError: ..."."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

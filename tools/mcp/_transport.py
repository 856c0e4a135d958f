"""The connection to one MCP server: a local process over stdio, run under the same keeper as
run_command (its descendants die with it; it cannot read the daemon's /proc entries or the
credentials directory) and, with `sandbox = "bwrap"`, in run_command's bubblewrap sandbox
(tools/builtins/_bwrap.py: the system read-only, its `sandbox_*` folders, no network unless
`sandbox_network`), with its stderr logged line by line; or a streamable HTTP endpoint."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

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
    cfg: McpServerConfig, auth: httpx2.Auth | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's (read, write) streams to the server `cfg` names, open while entered; an HTTP
    server's requests go through `auth` (its OAuth sign-in: tools/mcp/_oauth.py) if given."""
    if cfg.command is not None:
        path = (cfg.env or {}).get("PATH", os.environ.get("PATH"))
        command = shutil.which(cfg.command, path=path)
        if command is None:
            raise FileNotFoundError(f"no command {cfg.command!r} found")
        program = [command, *cfg.args]
        procs = None
        if cfg.sandbox == "bwrap":
            program, procs = _sandboxed(cfg, program), SANDBOX_PROCESSES
        keeper, *args = keeper_argv(program, secret_paths(), procs=procs, every_ms=100)
        params = StdioServerParameters(command=keeper, args=args, env=cfg.env or None)
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
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=cfg.headers, timeout=timeout, auth=auth) as http,
        streamable_http_client(cfg.url, http_client=http) as streams,
    ):
        yield streams


def _sandboxed(cfg: McpServerConfig, program: list[str]) -> list[str]:
    """`program` (its path resolved) run in the bubblewrap sandbox `cfg` describes; an
    OSError that says what to change when it cannot be."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise FileNotFoundError('sandbox = "bwrap" needs bubblewrap: apt-get install bubblewrap')
    jail = Jail(tuple(cfg.sandbox_writable), tuple(cfg.sandbox_readable), cfg.sandbox_network)
    real = os.path.realpath(program[0])
    shown = [*SYSTEM_DIRS, *map(str, (*jail.writable, *jail.readable))]
    if not any(real == d or real.startswith(d.rstrip("/") + "/") for d in shown):
        raise FileNotFoundError(
            f"{real} is outside the sandbox: add its folder to sandbox_readable"
        )
    return bwrap_argv(bwrap, jail, nproc_argv(program, SANDBOX_PROCESSES))


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

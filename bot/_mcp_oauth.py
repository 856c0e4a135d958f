"""The daemon's part of an MCP server's OAuth sign-in (tools/mcp/_oauth.py does the rest with the
SDK): the link goes to the owners (`[access] admins`) in private, never to a group; the callback
is served by the `[web]` console at CALLBACK_PATH (bot/web/_server.py), which hands the code to
the sign-in waiting for that `state`; the tokens and the client registration are kept in the
store encrypted at rest.

The key: Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`), in KEY_FILE (mode 0600),
made at the first sign-in beside the SQLite store, or in the state directory for PostgreSQL
(every instance sharing that store needs a copy). The store alone, or a backup of it, does not
reveal a token; losing the key only means signing in again. The daemon makes the key before any
tool runs and hides it, like relaybot.env, from the commands and MCP servers it starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bot._store_place import default_state_dir
from bot.config import Config
from engine import Reply

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

    from engine import Channel
    from engine.store import Store
    from tools.mcp import OAuth

log = logging.getLogger("tools.mcp")

CALLBACK_PATH = "/mcp/oauth/callback"
KEY_FILE = "mcp-oauth.key"
KEY_ENV = "RELAYBOT_MCP_OAUTH_KEY"  # its path, for tools/builtins/_bwrap.secret_paths
NO_WEB = (
    'auth = "oauth" needs [web] listen (and public_url when the console is reached through '
    "another address): the sign-in returns to its " + CALLBACK_PATH
)


class OAuthHost(Protocol):
    """What the sign-in hooks read of the daemon (bot.app.App is one)."""

    @property
    def config(self) -> Config: ...

    @property
    def store(self) -> Store: ...

    @property
    def channels(self) -> Sequence[Channel]: ...

    @property
    def signins(self) -> SignIns: ...


class SignIns:
    """The sign-ins waiting for their callback, by the `state` of the link sent; and whether the
    channels run yet (a link waits for them)."""

    def __init__(self) -> None:
        self.channels_up = asyncio.Event()
        self._waiting: dict[str, asyncio.Future[tuple[str, str | None]]] = {}

    async def wait(self, state: str, timeout_s: float) -> tuple[str, str | None]:
        """The (code, issuer) the callback brings for `state`; TimeoutError after `timeout_s`."""
        future = self._waiting[state] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        finally:
            self._waiting.pop(state, None)

    def arrive(self, state: str, code: str | None, iss: str | None, error: str = "") -> bool:
        """The callback for `state`: False when no sign-in waits for it."""
        future = self._waiting.get(state)
        if future is None or future.done():
            return False
        if code:
            future.set_result((code, iss))
        else:
            future.set_exception(PermissionError(f"the sign-in was refused: {error or 'no code'}"))
        return True


class Vault:
    """Seals and opens text with the key in `path` (made, 0600, when there is none)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fernet: Fernet | None = None

    async def seal(self, text: str) -> str:
        return (await self._key()).encrypt(text.encode()).decode()

    async def open(self, sealed: str) -> str | None:
        from cryptography.fernet import InvalidToken

        try:
            return (await self._key()).decrypt(sealed.encode()).decode()
        except InvalidToken:
            log.warning("a sealed MCP sign-in does not open with %s: signing in again", self.path)
            return None

    async def ready(self) -> None:
        """The key read, or made."""
        await self._key()

    async def _key(self) -> Fernet:
        if self._fernet is None:
            self._fernet = await asyncio.to_thread(self._read)
        return self._fernet

    def _read(self) -> Fernet:
        from cryptography.fernet import Fernet

        try:
            return Fernet(self.path.read_bytes().strip())
        except FileNotFoundError:
            pass
        key = Fernet.generate_key()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key + b"\n")
        return Fernet(key)


def oauth_problems(config: Config) -> list[str]:
    """What keeps the `auth = "oauth"` servers from signing in, for `doctor` and `check-config`."""
    names = [s.name for s in config.mcp.servers if s.auth == "oauth"]
    problems = []
    if names and config.web.base_url() is None:
        problems.append(f"MCP server {', '.join(names)}: {NO_WEB}")
    if names and not config.access.admins:
        problems.append(
            f"MCP server {', '.join(names)}: the sign-in link goes to an owner in private: "
            "set [access] admins"
        )
    return problems


async def prepare_key(config: Config) -> None:
    """With a server to sign in to: the key made now, before any command or server starts, and
    named in KEY_ENV so that none of them can read it (tools/builtins/_bwrap.secret_paths)."""
    if config.web.base_url() is None or not any(s.auth == "oauth" for s in config.mcp.servers):
        return
    path = key_file(config)
    await Vault(path).ready()
    os.environ[KEY_ENV] = str(path)


def key_file(config: Config) -> Path:
    """Where the key is: beside the SQLite store, or in the state directory for PostgreSQL."""
    if config.storage.resolved_url() is not None:
        return default_state_dir() / KEY_FILE
    return config.storage.resolved_path().parent / KEY_FILE


def oauth_hooks(config: Config, app: OAuthHost) -> OAuth:
    """The sign-in's hooks for the daemon `app`; without `[web]`, why there can be none."""
    from tools.mcp import OAuth

    base = config.web.base_url()
    if base is None:
        if any(s.auth == "oauth" for s in config.mcp.servers):
            log.error("MCP: %s", NO_WEB)
        return OAuth(missing=NO_WEB)
    vault = Vault(key_file(config))
    os.environ[KEY_ENV] = str(vault.path)  # hidden from then on (a reload may add the server)

    async def load(server: str, kind: str) -> str | None:
        sealed = await app.store.sealed.get(server, kind)
        return await vault.open(sealed) if sealed is not None else None

    async def save(server: str, kind: str, text: str) -> None:
        await app.store.sealed.put(server, kind, await vault.seal(text))

    async def send_link(server: str, link: str) -> None:
        await app.signins.channels_up.wait()
        text = (
            f"MCP server {server} needs you to sign in before its tools can be used. Open "
            f"this link (it returns to this bot's console):\n{link}"
        )
        channels = {c.name: c for c in app.channels}
        sent = 0
        for owner in sorted(app.config.access.admins):
            name, _sep, user_id = owner.partition(":")
            channel = channels.get(name)
            if channel is None:
                continue
            try:
                sent += await channel.send_private(user_id, Reply(text)) is not None
            except Exception as exc:
                log.warning("MCP server %s: could not write to owner %s: %s", server, owner, exc)
        if not sent:
            log.error(
                "MCP server %s needs an owner to sign in, and no owner could be written to "
                "in private: set [access] admins",
                server,
            )

    return OAuth(
        redirect_uri=base.rstrip("/") + CALLBACK_PATH,
        load=load,
        save=save,
        send_link=send_link,
        wait=app.signins.wait,
    )

"""OAuth 2.1 for a remote MCP server (`auth = "oauth"`), with the mcp SDK's own client
(`OAuthClientProvider`, an httpx Auth): discovery, dynamic client registration, PKCE, the token
request and its refresh are the SDK's. What relaybot adds comes from the daemon's hooks
(:class:`OAuth`, built in bot/_mcp_oauth.py: this package cannot import the engine):

- where the tokens and the client registration are kept (sealed in the store),
- the redirect URI (the `[web]` console's /mcp/oauth/callback),
- how the sign-in link reaches a person (an owner, in private) and the wait for the callback.

Before each connection :meth:`SignIn.ready` makes sure of a token, outside the connection's
timeouts: a `ping` posted to the server through the provider. A stored token (or its refresh)
answers at once; a 401 starts the sign-in: the link to the owner, then the wait for them (at
most WAIT_S; then a new link at the next attempt). A refresh token the server no longer takes
ends the same way: the SDK drops the tokens and asks again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl, BaseModel

from tools.config import McpServerConfig

log = logging.getLogger("tools.mcp")

WAIT_S = 3_600.0  # for the owner to open a link; then the next attempt sends a new one
_PING = {"jsonrpc": "2.0", "id": "relaybot-auth", "method": "ping"}


class OAuthUnavailable(RuntimeError):
    """A server needs OAuth and the daemon cannot offer it (no `[web]` for the callback)."""


@dataclass(frozen=True, slots=True)
class OAuth:
    """The daemon's part of the sign-in; `missing` says why there is none (then every server
    with `auth = "oauth"` fails to start with it)."""

    redirect_uri: str = ""
    load: Callable[[str, str], Awaitable[str | None]] | None = None  # (server, kind) -> JSON
    save: Callable[[str, str, str], Awaitable[None]] | None = None  # (server, kind, JSON)
    send_link: Callable[[str, str], Awaitable[None]] | None = None  # (server, link)
    wait: Callable[[str, float], Awaitable[tuple[str, str | None]]] | None = None  # (code, iss)
    missing: str = ""


class _Storage(TokenStorage):
    """The SDK's storage protocol over the daemon's sealed store, per server. The tokens are
    kept with the moment the access token expires, which the SDK's provider does not keep
    (`expiry` gives it back on loading): after a restart an expired one is refreshed rather
    than sent, refused, and a new sign-in asked of the owner."""

    def __init__(self, server: str, oauth: OAuth, expiry: Callable[[float | None], None]) -> None:
        self.server = server
        self.oauth = oauth
        self.expiry = expiry

    async def _load(self, kind: str) -> str | None:
        assert self.oauth.load is not None
        return await self.oauth.load(self.server, kind)

    async def _save(self, kind: str, text: str) -> None:
        assert self.oauth.save is not None
        await self.oauth.save(self.server, kind, text)

    async def get_tokens(self) -> OAuthToken | None:
        text = await self._load("tokens")
        if not text:
            return None
        kept = _Kept.model_validate_json(text)
        self.expiry(kept.expires_at)
        return kept.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await self._save("tokens", _Kept(tokens=tokens, expires_at=expires_at).model_dump_json())

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        text = await self._load("client")
        return OAuthClientInformationFull.model_validate_json(text) if text else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._save("client", client_info.model_dump_json())


class _Kept(BaseModel):
    tokens: OAuthToken
    expires_at: float | None  # time.time() when the access token expires; None: not said


class SignIn:
    """One server's OAuth client, kept for the server's life (its tokens in memory too);
    `waiting` is called when a person must open a link (the server's start does not wait)."""

    def __init__(self, cfg: McpServerConfig, oauth: OAuth, waiting: Callable[[], None]) -> None:
        assert cfg.url is not None
        self.cfg = cfg
        self.oauth = oauth
        self.waiting = waiting
        self._state = ""
        self.provider: OAuthClientProvider | None = None
        if oauth.missing:
            return
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(oauth.redirect_uri)],
            client_name=cfg.client_name,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=" ".join(cfg.scopes) or None,
        )
        self.provider = OAuthClientProvider(
            cfg.url,
            metadata,
            _Storage(cfg.name, oauth, self._expiry),
            redirect_handler=self._link,
            callback_handler=self._callback,
        )

    async def ready(self, headers: dict[str, str]) -> OAuthClientProvider:
        """The provider, holding a token the server takes (a person signs in first if need be)."""
        if self.provider is None:
            raise OAuthUnavailable(self.oauth.missing)
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(30.0), auth=self.provider
        ) as http:
            response = await http.post(self.cfg.url or "", json=_PING, headers=accept)
        if response.status_code in (401, 403):
            raise PermissionError(f"the server refused the sign-in (HTTP {response.status_code})")
        return self.provider

    def _expiry(self, expires_at: float | None) -> None:
        if self.provider is not None:
            self.provider.context.token_expiry_time = expires_at

    async def _link(self, url: str) -> None:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self._state = query.get("state", "")
        if self.cfg.scopes:  # the SDK asks for what the server says; the config decides
            query["scope"] = " ".join(self.cfg.scopes)
            url = urlunsplit(parts._replace(query=urlencode(query)))
        log.warning("MCP server %s needs an owner to sign in: link sent", self.cfg.name)
        self.waiting()
        assert self.oauth.send_link is not None
        await self.oauth.send_link(self.cfg.name, url)

    async def _callback(self) -> AuthorizationCodeResult:
        assert self.oauth.wait is not None
        code, iss = await self.oauth.wait(self._state, WAIT_S)
        log.info("MCP server %s: signed in", self.cfg.name)
        return AuthorizationCodeResult(code=code, state=self._state, iss=iss)

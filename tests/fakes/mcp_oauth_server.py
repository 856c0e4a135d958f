"""An OAuth-protected MCP server for tests, written with the mcp SDK's server-side auth:
``python tests/fakes/mcp_oauth_server.py PORT [LIFETIME]`` serves streamable HTTP at
http://127.0.0.1:PORT/mcp and is its own authorization server (the SDK's routes:
/.well-known/oauth-protected-resource, /.well-known/oauth-authorization-server, /register,
/authorize, /token), keeping clients, codes and tokens in memory.

/authorize approves at once (opening the link is the owner's consent) and redirects to the
client's redirect URI with the code. ``POST /test/revoke`` drops every token, as a server that
revoked the client's grant. LIFETIME (default 3600) is the `expires_in` of an access token issued
for a code (a refreshed one's is an hour; the server takes both for an hour); ``GET /test/counts``
says how many tokens were issued by a code and by a refresh.
Tool: ``secret_word()`` answers ``swordfish`` (read-only and closed-world: it reads freely
after untrusted content).
"""

from __future__ import annotations

import secrets
import sys
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse


class Provider:
    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.lifetime = 3600
        self.counts = {"code": 0, "refresh": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.counts["code"] += 1
        return self._issue(client.client_id or "", authorization_code.scopes, self.lifetime)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.counts["refresh"] += 1
        return self._issue(client.client_id or "", scopes or refresh_token.scopes, 3600)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], lifetime: int) -> OAuthToken:
        access, refresh = secrets.token_hex(20), secrets.token_hex(20)
        expires = int(time.time()) + 3600
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=lifetime,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )


def main() -> None:
    port = int(sys.argv[1])
    base = f"http://127.0.0.1:{port}"
    provider = Provider()
    if len(sys.argv) > 2:
        provider.lifetime = int(sys.argv[2])
    server = MCPServer(
        "relaybot-oauth-test",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
            ),
            required_scopes=["mcp"],
        ),
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def secret_word() -> str:
        """The word only a signed-in client may read."""
        return "swordfish"

    @server.custom_route("/test/revoke", methods=["POST"])
    async def revoke(request: Request) -> JSONResponse:
        dropped = len(provider.access) + len(provider.refresh)
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({"dropped": dropped})

    @server.custom_route("/test/counts", methods=["GET"])
    async def counts(request: Request) -> JSONResponse:
        return JSONResponse(provider.counts)

    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()

"""Secrets relaybot keeps for itself, for every backend: an MCP server's OAuth tokens and its
client registration (tools/mcp/_oauth.py), by server and kind. The store holds them only as
the caller sealed them (encrypted: bot/_mcp_oauth.py); they are the owner's, not a user's, so
`forget` leaves them."""

from __future__ import annotations

from engine._clock import wall
from engine.store._db import Db


class Sealed:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def get(self, server: str, kind: str) -> str | None:
        value = await self.db.fetchval(
            "SELECT sealed FROM mcp_oauth WHERE server = ? AND kind = ?", server, kind
        )
        return str(value) if value is not None else None

    async def put(self, server: str, kind: str, sealed: str) -> None:
        await self.db.execute(
            "INSERT INTO mcp_oauth(server, kind, sealed, updated_at) VALUES (?,?,?,?) "
            "ON CONFLICT (server, kind) DO UPDATE SET sealed=excluded.sealed, "
            "updated_at=excluded.updated_at",
            server,
            kind,
            sealed,
            wall(),
        )

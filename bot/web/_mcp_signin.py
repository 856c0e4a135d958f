"""The address an MCP server's OAuth sign-in returns to (bot/_mcp_oauth.py): the authorization
server redirects the owner's browser here with `code` and `state`. No console session is asked
for (the owner may open the link on a phone): the `state`, random and known only to the
sign-in waiting for it, is what is checked (and the SDK checks it again, with PKCE); callbacks
nobody waits for count as failed sign-ins in the console's limit."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot._mcp_oauth import OAuthHost

log = logging.getLogger("bot.web")


def returned(daemon: OAuthHost, query: Mapping[str, str], address: str) -> tuple[str, int]:
    """What the page says, and its status (400: nobody waits for this callback, or refused)."""
    state = query.get("state", "")
    error = query.get("error_description") or query.get("error", "")
    code = query.get("code")
    if not state or not daemon.signins.arrive(state, code, query.get("iss"), error):
        log.warning("MCP sign-in: a callback nobody waits for was refused (%s)", address)
        return "This sign-in link is used, expired or wrong.", 400
    if not code:
        log.warning("MCP sign-in: the authorization server refused: %s", error or "no code")
        return "The sign-in was refused; a new link will be sent.", 400
    log.info("MCP sign-in: the authorization came back")
    return "Signed in: the MCP server's tools can be used now. You can close this page.", 200

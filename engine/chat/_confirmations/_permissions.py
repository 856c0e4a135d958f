"""Standing permissions: "always allow this tool in this chat", granted on a confirmation.

A grant is stored per (platform, chat, tool) with who gave it, survives restarts, and is read
at the start of each turn: a granted tool runs without asking. Tools the owner lists in
`[tools] always_ask` never offer "Always". In groups only `[access] admins` may grant it (the
requester still answers alone, as for any confirmation). /permissions lists a chat's grants with
a button to revoke each, or all; any allowed user may revoke (it only makes the bot ask again).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from engine._channel import Action, Button, Choice, Reply
from engine.chat._settings._live import Policy
from engine.i18n import translator
from engine.loop import ConversationKey
from engine.store import Store

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_REVOKE = "perm:rv:"
_REVOKE_ALL = "perm:all"


class Permissions:
    def __init__(self, store: Store, policy: Policy) -> None:
        self.grants = store.grants
        self.policy = policy

    def choices(
        self, tool: str, channel: str, user_id: str, is_private: bool
    ) -> tuple[Choice, ...]:
        """The answers a confirmation of `tool` offers its requester."""
        always = tool not in self.policy.always_ask and (
            is_private or self.policy.is_admin(channel, user_id)
        )
        return (
            (Choice.ONCE, Choice.ALWAYS, Choice.CANCEL) if always else (Choice.ONCE, Choice.CANCEL)
        )

    async def granted(self, key: ConversationKey) -> frozenset[str]:
        """The tools that run without asking in the chat now."""
        grants = await self.grants.in_chat(key.channel, key.chat_id)
        return frozenset(g.tool for g in grants if g.tool not in self.policy.always_ask)

    async def grant(self, key: ConversationKey, tool: str, user_id: str, user_name: str) -> None:
        await self.grants.grant(key.channel, key.chat_id, tool, user_id, user_name)
        log.info("grant: %s always allowed in %s by user %s", tool, key, user_id)

    async def menu(
        self, key: ConversationKey, note: str = "", language: str | None = None
    ) -> Reply:
        _ = translator(language).gettext
        grants = await self.grants.in_chat(key.channel, key.chat_id)
        if not grants:
            text = _(
                "Nothing is always allowed here: I ask before every action that changes things."
            )
            return Reply(f"{note}\n{text}".strip())
        lines = [
            _("• {tool}: always allowed by {name}, {day}").format(
                tool=g.tool,
                name=g.granted_by_name,
                day=time.strftime("%Y-%m-%d", time.gmtime(g.granted_at)),
            )
            for g in grants
        ]
        buttons = [
            Button(_("Revoke {tool}").format(tool=g.tool), f"{_REVOKE}{g.tool}")
            for g in grants
            if len(_REVOKE) + len(g.tool) <= 61
        ]
        buttons.append(Button(_("Revoke all"), _REVOKE_ALL))
        text = _("These run here without asking:") + "\n" + "\n".join(lines)
        return Reply(f"{note}\n{text}".strip(), tuple(buttons))

    async def act(self, action: Action) -> Reply | None:
        """A press on /permissions' buttons; None when the action is not one of ours."""
        key = ConversationKey(action.channel, action.chat_id)
        if action.action == _REVOKE_ALL:
            tool = None
        elif action.action.startswith(_REVOKE):
            tool = action.action.removeprefix(_REVOKE)
        else:
            return None
        n = await self.grants.revoke(key.channel, key.chat_id, tool)
        log.info("revoke: %s in %s by user %s (%d removed)", tool or "all", key, action.user_id, n)
        _ = translator(action.language).gettext
        note = (
            _("Revoked: I will ask before {tool} again.").format(tool=tool)
            if tool
            else _("Revoked them all.")
        )
        return await self.menu(key, note if n else _("Already revoked."), action.language)

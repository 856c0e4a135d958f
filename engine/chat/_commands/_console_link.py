"""/console: an owner asks for a one-time link to the web console (bot/web/).

Only `[access] admins` get one, and only in their private chat with the bot: asked in a group,
the link goes to them in private (the group is told so), never into the group. The link works
once, for `[web] link_minutes`; its token is stored hashed (engine/store/_operate/_console.py), so
the console of any instance sharing the store accepts it.
"""

from __future__ import annotations

import logging

from engine._channel import InboundMessage, Reply
from engine.chat._access._pairing import Pairing
from engine.i18n import translator

log = logging.getLogger(__name__)


async def console_link(pairing: Pairing, msg: InboundMessage) -> str:
    """What /console answers in the chat it was sent in (the link itself, or where it went)."""
    _ = translator(msg.language).gettext
    if not pairing.policy.is_admin(msg.channel, msg.user_id):
        return _("Only the bot's owners ([access] admins) can open the web console.")
    settings = pairing.live.settings
    if settings.console_url is None:
        return _("The web console is off: the owner sets [web] listen in the config to turn it on.")
    token = await pairing.store.console.new_link(
        f"{msg.channel}:{msg.user_id}", settings.console_link_s
    )
    minutes = max(1, round(settings.console_link_s / 60))
    text = (
        _(
            "Your link to the web console (works once, for {minutes} minutes; do not share it):"
        ).format(minutes=minutes)
        + f"\n{settings.console_url}/signin?t={token}"
    )
    log.info("console: a sign-in link for %s:%s", msg.channel, msg.user_id)
    if msg.is_private:
        return text
    channel = pairing.channels.get(msg.channel)
    sent = None
    if channel is not None:
        try:
            sent = await channel.send_private(msg.user_id, Reply(text))
        except Exception as exc:
            log.warning("console: could not write to %s:%s: %s", msg.channel, msg.user_id, exc)
    if sent is None:
        return _("I could not write to you in private: send me /console there.")
    return _("I sent you the link in private.")

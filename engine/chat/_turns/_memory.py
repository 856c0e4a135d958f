"""What the bot remembers, as a chat sees it: the memory put into the system prompt of a turn,
and /memory's list with a delete button per item and "Forget all" (asked twice).

A private turn carries the user's own memory; a group's turn carries the group's memory only,
never a member's (a message injected into the group cannot make the model read out what someone
keeps in private). Items go in most recently used first while they fit in `max_tokens`; none
leaves a request byte for byte what it was. Reading the memory writes nothing: an item counts as
used when it is saved again or found by recall (tools/builtins/_memory.py).

/memory in a private chat lists the user's memory, and any press there acts on it alone: the
owner is named by the platform's event (who pressed, in which chat), never by the payload. In a
group it lists the group's memory, which only admins change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine._channel import Action, Button, InboundMessage, Reply
from engine.chat._settings._live import Policy
from engine.chat._settings._sections import MemorySettings
from engine.context import text_tokens
from engine.i18n import translator
from engine.store import MemoryItem, MemoryStore
from tools.builtins import group_owner, user_owner

log = logging.getLogger(__name__)

_DELETE = "mem:rm:"
_ALL = "mem:all"
_ALL_SURE = "mem:all:yes"
_KEEP = "mem:keep"
MENU_ITEMS = 20  # items with a button in /memory (Discord shows 25 buttons a message)
PROMPT_ITEMS = 200  # items read for a prompt before the token budget chooses
_LABEL = 40  # characters of an item on its button


class Remembered:
    """The memory part of a turn's system prompt, and /memory."""

    def __init__(
        self, memory: MemoryStore, policy: Policy, settings: Callable[[], MemorySettings]
    ) -> None:
        self.memory = memory
        self.policy = policy
        self.settings = settings  # those in force, read per turn (a reload changes them)

    async def prompt(self, channel: str, chat_id: str, user_id: str, is_private: bool) -> str:
        """The system prompt's lines about what is remembered here ("" when nothing is)."""
        budget = self.settings().max_tokens
        if budget <= 0 or (is_private and not user_id):
            return ""
        owner = user_owner(channel, user_id) if is_private else group_owner(channel, chat_id)
        items = await self.memory.items(owner, None, PROMPT_ITEMS)
        if not items:
            return ""
        head = (
            "What you remember about this user from earlier conversations (they see and "
            "delete these with /memory; remember adds, forget removes by number):"
            if is_private
            else "What you remember for this group (its admins manage it with /memory):"
        )
        lines, spent = [], text_tokens(head)
        for item in items:
            line = f"- #{item.id}: {item.text}"
            cost = text_tokens(line) + 1
            if spent + cost <= budget:
                lines.append(line)
                spent += cost
        return "\n".join([head, *lines]) if lines else ""

    async def menu(self, msg: InboundMessage, note: str = "") -> Reply:
        return await self._menu(
            msg.channel, msg.chat_id, msg.user_id, msg.is_private, note, msg.language
        )

    async def _menu(
        self,
        channel: str,
        chat_id: str,
        user_id: str,
        is_private: bool,
        note: str = "",
        language: str | None = None,
    ) -> Reply:
        _ = translator(language).gettext
        owner = user_owner(channel, user_id) if is_private else group_owner(channel, chat_id)
        items = await self.memory.items(owner, None, MENU_ITEMS + 1)
        if not items:
            empty = (
                _(
                    'I remember nothing about you. Tell me something to keep ("remember that I '
                    'prefer metric units") and it shows up here.'
                )
                if is_private
                else _("I remember nothing for this group.")
            )
            return Reply(f"{note}\n{empty}".strip())
        shown = items[:MENU_ITEMS]
        head = _("What I remember about you") if is_private else _("What I remember for this group")
        more = "\n" + _("(and more: only the {n} most recently used are listed)").format(
            n=MENU_ITEMS
        )
        text = f"{head}:\n" + "\n".join(f"#{i.id}: {i.text}" for i in shown)
        text += more if len(items) > MENU_ITEMS else ""
        if not is_private and not self.policy.is_admin(channel, user_id):
            return Reply(f"{note}\n{text}".strip())  # only admins get the buttons
        delete = _("Delete: {item}")
        buttons = [Button(delete.format(item=_label(i)), f"{_DELETE}{i.id}") for i in shown]
        buttons.append(Button(_("Forget all"), _ALL))
        return Reply(f"{note}\n{text}".strip(), tuple(buttons))

    async def act(self, action: Action) -> Reply | None:
        """A press on /memory's buttons; None when the action is not one of ours."""
        what = action.action
        if not what.startswith("mem:"):
            return None
        channel, chat_id, user_id = action.channel, action.chat_id, action.user_id
        private, language = action.is_private, action.language
        _ = translator(language).gettext
        if not private and not self.policy.is_admin(channel, user_id):
            return Reply(_("Only the bot's admins change what it remembers for this group."))
        owner = user_owner(channel, user_id) if private else group_owner(channel, chat_id)
        if what == _ALL:
            sure = (Button(_("Yes, forget all"), _ALL_SURE), Button(_("Keep it"), _KEEP))
            return Reply(_("Forget everything listed here? This cannot be undone."), sure)
        if what == _KEEP:
            return await self._menu(channel, chat_id, user_id, private, _("Kept."), language)
        if what == _ALL_SURE:
            n = await self.memory.clear(owner)
            log.info("memory of %s cleared by user %s (%d items)", owner, user_id, n)
            forgot = translator(language).ngettext("Forgot {n} item.", "Forgot {n} items.", n)
            note = forgot.format(n=n)
            return await self._menu(channel, chat_id, user_id, private, note, language)
        if what.startswith(_DELETE) and what.removeprefix(_DELETE).isdigit():
            item_id = int(what.removeprefix(_DELETE))
            done = await self.memory.delete(owner, item_id)
            note = (_("Forgot #{id}.") if done else _("#{id} was already gone.")).format(id=item_id)
            return await self._menu(channel, chat_id, user_id, private, note, language)
        return None


def _label(item: MemoryItem) -> str:
    text = " ".join(item.text.split())
    return text if len(text) <= _LABEL else text[: _LABEL - 1] + "…"

"""The adapter contract: :class:`Channel` (what an adapter implements), :class:`Engine` (what it
calls), and the parts of a channel's receiving side that instances share (:class:`Receiver`).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from engine._channel._messages import (
    Attachment,
    Capabilities,
    InboundMessage,
    MessageRef,
    OutgoingFile,
    Reaction,
    Untrusted,
)
from engine._channel._prompts import (
    Action,
    Command,
    ConfirmationPrompt,
    Decision,
    Press,
    Reply,
)
from tools.errors import DownloadError


class Claim(enum.Enum):
    """This instance's claim on a receiving part (see engine/work/_receivers.py)."""

    EQUAL = "equal"  # every instance's alike: taken by whoever finds it free
    OWN = "own"  # this instance's (Discord's shard_ids): taken when free, asked back if not
    FALLBACK = "fallback"  # another instance's: taken while that one is down, given back


@dataclass(frozen=True, slots=True)
class Receiver:
    """A part of a channel's receiving side, held by one instance at a time when several share
    a store: Telegram's long polling, the Discord gateway, or one Discord shard."""

    lease: str  # the store's name for it: "telegram", "discord", "discord/shard-3"
    claim: Claim = Claim.EQUAL


class Engine(Protocol):
    """What an adapter may call. Every method returns quickly: turns run in the background."""

    async def handle_inbound(self, msg: InboundMessage) -> None:
        """Persist `msg` (idempotent on channel + chat + message_id) and queue its turn."""

    async def handle_press(self, press: Press) -> Decision:
        """Record a press on a confirmation; the engine edits the prompt message itself."""

    async def handle_answer(self, msg: InboundMessage) -> bool:
        """Take `msg` as its sender's answer to a question a running tool call asked in that
        chat (an MCP server's form); False when no question waits for it. :meth:`handle_inbound`
        does this first: an adapter that holds lines back while a turn runs (the terminal) asks
        here at once instead."""

    async def handle_command(self, msg: InboundMessage, command: Command) -> Reply:
        """Run a command for `msg`'s chat; returns what to reply."""

    async def handle_action(self, action: Action) -> Reply:
        """Run a press on a command reply's button; returns what that message shows now."""

    def listens(self, channel: str, chat_id: str) -> bool:
        """True when the group chat asked for every message, not only those addressed to the
        bot: the adapter then hands those to :meth:`handle_inbound` too. Synchronous and
        cheap (a set lookup), for an adapter's message filter."""


class Channel(abc.ABC):
    """A chat platform adapter. The engine sees only these methods."""

    name: str
    capabilities: Capabilities

    @abc.abstractmethod
    async def start(self, engine: Engine) -> None:
        """Begin delivering messages to `engine`. Returns once connected, or at once when the
        platform is unreachable (the adapter keeps retrying in the background)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop taking messages and disconnect."""

    # Several instances sharing one store (work/_cluster.py): every one can send; each part of
    # a channel's receiving side is held by one of them at a time. A channel with such parts
    # names them, and switches each on and off, before or after start.

    def receivers(self) -> Sequence[Receiver]:
        """The parts of the receiving side one instance at a time holds; none (the default):
        every instance receives all of its own (a webhook behind a load balancer, a console)."""
        return ()

    async def set_receiving(self, lease: str, on: bool, resume: str | None = None) -> str | None:
        """Take messages for the part `lease` names (True, as after start) or not (False),
        staying able to send. Turning on, `resume` is what the part's previous holder left (see
        :meth:`receiving_state`); turning off returns what the next holder resumes from."""
        return None

    def receiving_state(self, lease: str) -> str | None:
        """What another instance (or this one's restart) would resume the part from if this one
        died now (a Discord shard's gateway session, so the events it missed are sent again),
        counting only events already stored or dropped on purpose; kept in the store while the
        part is held here (engine/work/_receivers.py, _resuming.py). None: nothing to resume."""
        return None

    @abc.abstractmethod
    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        formatted: bool = True,
        once: str | None = None,
        untrusted: Untrusted | None = None,
    ) -> MessageRef:
        """Send `text` (Markdown when `formatted`), split to the platform's limit.

        With `untrusted` (an answer written after the model read untrusted content) the
        platform shows no link preview, and a link or picture whose host trusted text did not
        name is shown as text that is neither fetched nor linked (:class:`Untrusted`).

        `once` names this delivery and stays the same when a restart sends it again (the stored
        answer's id): a platform that can make a create idempotent (Discord's message nonce)
        derives its key from it, so the platform keeps one copy; others ignore it.
        Returns the reference of the last part sent.
        """

    async def send_personal(
        self, chat_id: str, user_id: str, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """Send relaybot's own words meant for one member of `chat_id` (a refusal, a limit
        notice, an error, a pairing code): in a group, shown to `user_id` alone where the
        platform can (Telegram's ephemeral messages) and its owner lets it; elsewhere, and
        where the chat refuses that, to the chat as :meth:`send` does (this default)."""
        return await self.send(chat_id, text, reply_to=reply_to)

    @abc.abstractmethod
    async def edit(
        self,
        ref: MessageRef,
        text: str,
        *,
        formatted: bool = True,
        untrusted: Untrusted | None = None,
    ) -> None:
        """Replace the text of a message the bot sent (used for streaming); `untrusted` as for
        :meth:`send`."""

    @abc.abstractmethod
    async def typing(self, chat_id: str) -> None:
        """Show the typing indicator once (the engine refreshes it)."""

    @abc.abstractmethod
    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        """Show `prompt` with a button per choice (or a typed-answer fallback)."""

    @abc.abstractmethod
    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        """Edit a confirmation message to its final `text` and remove its buttons."""

    @abc.abstractmethod
    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        """Send `files` in order, natively (pictures as pictures); returns the last one's ref."""

    async def send_thoughts(
        self, chat_id: str, thoughts: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """Show a short view of the model's reasoning before its answer (``/settings thinking
        on``), folded away where the platform can (Telegram: an expandable quotation; Discord:
        a spoiler; a terminal: dimmed). The default: a plain message that says what it is."""
        return await self.send(chat_id, f"💭 {thoughts}", reply_to=reply_to, formatted=False)

    async def delete(self, ref: MessageRef) -> None:
        """Delete a message the bot sent that is done with (a turn's progress line). A platform
        that cannot keeps this default, which leaves it."""
        return None

    async def react(self, chat_id: str, message_id: str, reaction: Reaction) -> None:
        """Show a turn's status on the user's message `message_id` in `chat_id`: working on it,
        done (the status taken off), or failed. The engine calls this off the turn's path (an
        answer never waits for it), in order per message, and logs what it raises. A platform
        without reactions, or with them off (``status_reactions``), keeps this default."""
        return None

    async def draft(self, chat_id: str, draft_id: int, text: str) -> bool:
        """Show `text`, the answer being written so far, as an ephemeral preview (Telegram's
        message drafts) rather than a message: the final answer is then sent once with
        :meth:`send`, and a crash leaves nothing half-written. `draft_id` is the same for one
        answer's previews. False (this default) or an error: no previews here; the engine
        streams with :meth:`send` and :meth:`edit` instead."""
        return False

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The content of an attachment of an inbound message, through the platform's file API.

        Raises :class:`DownloadError` when it cannot be fetched, or when the platform says it is
        larger than `max_bytes` (checked before the body is read). The caller sets the timeout.
        """
        raise DownloadError(f"the {self.name} channel receives no files")

    async def send_private(self, user_id: str, reply: Reply) -> MessageRef | None:
        """Write to `user_id` in private: `reply`'s text with its buttons, whose presses come
        back as :class:`Action` like those of a command's reply (an owner asked to let someone
        in). None: this platform cannot (the default)."""
        return None

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """True when the platform says `user_id` administers the group `chat_id` (then they
        may change its /settings). A platform without groups keeps this default."""
        return False

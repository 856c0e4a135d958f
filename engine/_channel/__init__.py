"""The contract between a chat platform adapter and the engine, defined by the engine.

An adapter turns platform events into :class:`InboundMessage`, :class:`Press` and
:class:`Command` and hands them to an :class:`Engine`; the engine talks back only through the
:class:`Channel` methods (send, edit, typing, show and resolve a confirmation, send files,
download an attachment; and, where the platform has them, a turn's status on the user's message
and a draft of the answer while it streams). Adapters hold no conversation state.

A picture, file or voice note arrives as an :class:`Attachment`: what the platform says about it
and its platform reference, never its bytes. The engine decides what it accepts, and fetches the
bytes through :meth:`Channel.download` when it needs them, which also works after a restart: the
inbox keeps the reference. Arrows point inward: ``channels`` imports this module, the engine never
imports ``channels``.
"""

from engine._channel._adapter import Channel, Claim, Engine, Receiver
from engine._channel._messages import (
    Attachment,
    Capabilities,
    InboundMessage,
    MediaKind,
    MessageRef,
    OutgoingFile,
    Quote,
    Reaction,
    Untrusted,
    chat_of,
)
from engine._channel._prompts import (
    ACTION_PATTERN,
    DECISION_PATTERN,
    Action,
    Button,
    Choice,
    Command,
    ConfirmationPrompt,
    Decision,
    DecisionStatus,
    Press,
    Reply,
    encode_action,
    encode_decision,
    parse_action,
    parse_decision,
)

__all__ = [
    "ACTION_PATTERN",
    "DECISION_PATTERN",
    "Action",
    "Attachment",
    "Button",
    "Capabilities",
    "Channel",
    "Choice",
    "Claim",
    "Command",
    "ConfirmationPrompt",
    "Decision",
    "DecisionStatus",
    "Engine",
    "InboundMessage",
    "MediaKind",
    "MessageRef",
    "OutgoingFile",
    "Press",
    "Quote",
    "Reaction",
    "Receiver",
    "Reply",
    "Untrusted",
    "chat_of",
    "encode_action",
    "encode_decision",
    "parse_action",
    "parse_decision",
]

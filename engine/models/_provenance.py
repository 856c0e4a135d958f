"""Where a message the model reads came from, and whether its words may steer what relaybot does.

Every message carries a :class:`Provenance`: trusted (the requester's own words, the owner's
configuration and relaybot's own), a group member's (trusted only in a turn that member asked
for), or untrusted (a web page, search results, an MCP tool's output, a quoted message, a
summary of any of these). The store keeps it with the message (``messages.trust``,
``messages.source``; the author of a member's message is the row's ``user_id``) and with a
summary (every source of what it folded), so it survives restarts and compaction. What a turn
does with it is decided in one place: engine/loop/_containment.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Trust(enum.StrEnum):
    TRUSTED = "trusted"  # the requester's words, the owner's configuration, relaybot's own
    MEMBER = "member"  # a group member's words: trusted only in that member's own turns
    UNTRUSTED = "untrusted"  # written by someone else: a page, results, a tool's output, a quote


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a message came from: its trust and a short label a person reads in a prompt
    ("example.org/page", "MCP server fetch", "Bob in the group")."""

    trust: Trust = Trust.TRUSTED
    source: str = ""
    author: str | None = None  # a member's message: the user id of who wrote it

    def trusted_for(self, requester: str) -> bool:
        """Whether a turn asked for by `requester` may act on what this says."""
        if self.trust is Trust.MEMBER:
            return self.author == requester
        return self.trust is Trust.TRUSTED


TRUSTED = Provenance()


def untrusted(source: str) -> Provenance:
    return Provenance(Trust.UNTRUSTED, source)


def member(name: str, user_id: str) -> Provenance:
    """A group member's message: untrusted in another member's turn ("Bob in the group")."""
    return Provenance(Trust.MEMBER, f"{name or user_id} in the group", user_id)

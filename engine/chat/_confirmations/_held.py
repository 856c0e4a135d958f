"""What this process knows of an approved action whose turn the store cut off.

A refusal by the store (a full disk, a read-only or locked file, PostgreSQL away) can cut an
approved action's turn at any step, and the chat's work is tried again (chat/_stalled.py). What
is recorded then says too little: a confirmation left in EXECUTING without its result in the
history may have run, and a restart can only report it so. The process that ran the turn knows
more, and keeps it here until the turn is finished (chat/_decided.py): the action surely did not
start (the write that records its start was refused: on PostgreSQL that write may have been
committed all the same), or it ran and this is its result. So an action that did not start is
run, once; one that ran has its result recorded and the turn goes on from there; none runs twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from engine.loop import ConversationKey
from engine.store import ConfirmationRow, ConfirmationStore
from engine.store import ConfirmationState as S
from tools import ToolResult
from tools.errors import StoreUnavailable


@dataclass(slots=True)
class _Known:
    key: ConversationKey
    unstarted: bool = False  # its start was refused here: it never ran
    result: ToolResult | None = None  # it ran here: its outcome, recorded or not
    cut: bool = False  # the store refused a write of its turn: finish it before anything else


@dataclass(slots=True)
class Guard:
    """How a resumed turn runs its approved call (engine.ToolLoop.resume's hooks)."""

    starting: Callable[[], Awaitable[bool]]
    ran: Callable[[ToolResult], None]
    known: ToolResult | None  # it ran already: recorded, not run again


class Held:
    def __init__(self, rows: ConfirmationStore) -> None:
        self.rows = rows
        self._known: dict[str, _Known] = {}  # by confirmation id, while its turn runs or waits

    def guard(
        self, conf: ConfirmationRow, started: Callable[[ConfirmationRow], Awaitable[bool]]
    ) -> Guard:
        known = self._known.setdefault(conf.id, _Known(ConversationKey(conf.channel, conf.chat_id)))

        async def starting() -> bool:
            try:
                moved = await started(conf)  # APPROVED → EXECUTING
            except StoreUnavailable:
                known.unstarted = True
                raise
            if not moved and known.unstarted:  # the refused write was committed after all
                row = await self.rows.get(conf.id)
                moved = row is not None and row.state is S.EXECUTING
            known.unstarted = known.unstarted and not moved
            return moved

        def ran(result: ToolResult) -> None:
            known.result = result

        return Guard(starting, ran, known.result)

    def cut(self, key: ConversationKey, confirmation_id: str) -> None:
        """The store refused a write of its turn: the chat finishes it before anything else."""
        self._known.setdefault(confirmation_id, _Known(key)).cut = True

    def carries_on(self, conf: ConfirmationRow) -> bool:
        """The confirmation is EXECUTING because its turn was cut off here (not by a crash):
        this process knows whether it ran."""
        known = self._known.get(conf.id)
        if conf.state is not S.EXECUTING or known is None:
            return False
        return known.unstarted or known.result is not None

    def result(self, confirmation_id: str) -> ToolResult | None:
        known = self._known.get(confirmation_id)
        return known.result if known is not None else None

    def in_chat(self, key: ConversationKey) -> list[str]:
        """The chat's confirmations whose turn the store cut off, oldest first."""
        return [cid for cid, known in self._known.items() if known.key == key and known.cut]

    def forget(self, confirmation_id: str) -> None:
        self._known.pop(confirmation_id, None)

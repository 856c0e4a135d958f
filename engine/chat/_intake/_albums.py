"""Albums: pictures sent together arrive as separate messages; their turn waits for the last."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from engine.loop import ConversationKey

ALBUM_WINDOW_S = 0.5  # how long after an album's last part its turn starts


class Albums:
    """The parts of an album (pictures sent together) arrive as separate messages sharing a group
    id. Each is stored as it comes; the turn starts once no part has come for `window_s`, so it
    takes them all. A refusal is said once per album."""

    def __init__(self, window_s: float = ALBUM_WINDOW_S) -> None:
        self.window_s = window_s
        self._timers: dict[tuple[ConversationKey, str], asyncio.TimerHandle] = {}
        self._refused: collections.OrderedDict[tuple[ConversationKey, str], None] = (
            collections.OrderedDict()
        )

    def hold(self, key: ConversationKey, group_id: str, then: Callable[[], None]) -> None:
        """Call `then` once the album has had no new part for `window_s`."""
        timer = self._timers.pop((key, group_id), None)
        if timer is not None:
            timer.cancel()

        def fire() -> None:
            self._timers.pop((key, group_id), None)
            then()

        loop = asyncio.get_running_loop()
        self._timers[(key, group_id)] = loop.call_later(self.window_s, fire)

    def first_refusal(self, key: ConversationKey, group_id: str) -> bool:
        """True the first time a part of this album is refused."""
        if (key, group_id) in self._refused:
            return False
        self._refused[(key, group_id)] = None
        if len(self._refused) > 256:
            self._refused.popitem(last=False)
        return True

    def close(self) -> None:
        """Forget the timers: the parts are in the inbox, and the next start-up takes them."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

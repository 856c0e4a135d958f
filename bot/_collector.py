"""The cyclic garbage collector while relaybot starts.

Loading relaybot and its libraries makes some 85,000 objects that live as long as the process
(modules, classes, functions) and almost no garbage. Each full collection traverses all of them:
one lands in start-up (~15 ms of it), and every later one goes over them again. So the modules
load without full collections (the young generations are still collected, and with them what
little garbage there is), and once loaded they are frozen (:func:`gc.freeze`): later full
collections traverse only what was made after. :func:`loading` is the first thing the
`relaybot` command does, :func:`loaded` the first once its modules are in (bot/cli.py).

After that the youngest generation is collected every :data:`YOUNG` allocations instead of
Python's 700: a busy daemon allocates in bursts (a thousand chats at once made ~550 young
collections, 160 ms of the burst); at 20,000 it is ~15 collections, 65 ms, and what a cycle
keeps alive waits a little longer to be freed (measured: the same peak RSS).
"""

from __future__ import annotations

import gc

YOUNG = 20_000  # allocations between collections of the youngest generation, once loaded
_usual: tuple[int, ...] | None = None  # the thresholds before loading()


def loading() -> None:
    """No full collections until :func:`loaded`."""
    global _usual
    if _usual is None:
        _usual = gc.get_threshold()
        young, middle, _ = _usual
        gc.set_threshold(young, middle, 1_000_000)


def loaded() -> None:
    """What is loaded so far stays out of later collections; the usual thresholds again."""
    global _usual
    gc.freeze()
    if _usual is not None:
        _, middle, old = _usual
        gc.set_threshold(YOUNG, middle, old)
        _usual = None

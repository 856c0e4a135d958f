"""Free TCP ports on 127.0.0.1 for a server whose port must be written down before it starts (a
daemon's config, PostgreSQL's `-p`). A fake server that can listen on port 0 and say which port
it got should do that instead: nothing can take its port.

Why not "bind port 0, read the port, close": that port is one of the kernel's ephemeral ports,
which it hands to any outgoing connection; with the suite's workers making thousands of
connections at once, one can take the port before the server binds it ("address already in
use"). These ports come from below the ephemeral range, which the kernel never hands out, from a
random place per process and in sequence, so parallel workers (and other test runs on the
machine) seldom meet, and a port already bound is passed over.
"""

from __future__ import annotations

import itertools
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

_LOWEST = 10_000  # below: well-known services (and ports some people use by hand)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _candidates() -> Iterator[int]:
    high = _ephemeral_low()
    if high - _LOWEST < 1_000:  # an unusual range: the kernel's choice it is
        while True:
            yield 0
    span = range(_LOWEST, high)
    start = random.randrange(len(span))
    yield from itertools.cycle([*span[start:], *span[:start]])


_next = _candidates()
_lock = threading.Lock()  # a generator is not to be entered by two threads at once


def free_port() -> int:
    """A port on 127.0.0.1 that nothing is bound to now, not handed out before by this process."""
    with _lock:
        for candidate in _next:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", candidate))
                except OSError:
                    continue
                return int(s.getsockname()[1])
    raise AssertionError("unreachable: the candidates never end")

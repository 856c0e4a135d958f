"""The systemd notification protocol (sd_notify(3)) without a dependency.

systemd hands a ``Type=notify`` service the address of a datagram socket in ``NOTIFY_SOCKET``
(a path, or an abstract-namespace name written with a leading ``@``). The service sends
newline-separated ``KEY=value`` assignments there: ``READY=1`` once it is up, ``STATUS=...`` for
``systemctl status``, ``WATCHDOG=1`` at least every ``WATCHDOG_USEC`` microseconds, and
``STOPPING=1`` when it begins to shut down. Everything here is a no-op when the variable is unset
(run by hand, in tests, under another supervisor), and sending never raises: losing a status line
must not take the bot down.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

__all__ = ["Notifier", "watchdog_interval", "watchdog_loop"]

log = logging.getLogger(__name__)


class Notifier:
    """Sends sd_notify messages to ``address``, by default ``$NOTIFY_SOCKET``.

    With no address (``""``, or the variable unset) every call is a no-op returning False.
    """

    def __init__(self, address: str | None = None) -> None:
        if address is None:
            address = os.environ.get("NOTIFY_SOCKET")
        self._address: str | None = None
        if address and address[0] == "@":
            self._address = "\0" + address[1:]  # abstract namespace socket
        elif address and address[0] == "/":
            self._address = address
        elif address:
            log.debug("ignoring unsupported NOTIFY_SOCKET address %r", address)
        self._sock: socket.socket | None = None
        self._failed_once = False

    @classmethod
    def from_env(cls, *, unset_environment: bool = False) -> Notifier:
        """A notifier for ``$NOTIFY_SOCKET``.

        With ``unset_environment`` the variable is removed from ``os.environ`` afterwards, so
        subprocesses (tools, MCP servers) cannot talk to systemd on the service's behalf.
        ``WATCHDOG_USEC``/``WATCHDOG_PID`` stay: ``WATCHDOG_PID`` already keeps children out.
        """
        notifier = cls(os.environ.get("NOTIFY_SOCKET", ""))
        if unset_environment:
            os.environ.pop("NOTIFY_SOCKET", None)
        return notifier

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, **fields: object) -> bool:
        """Send ``KEY=value`` lines (keys upper-cased); True if the datagram was sent."""
        if self._address is None or not fields:
            return False
        payload = "".join(
            f"{key.upper()}={_one_line(value)}\n" for key, value in fields.items()
        ).encode("utf-8", "replace")
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto(payload, self._address)
        except OSError as exc:  # includes BlockingIOError: a full queue drops the message
            if not self._failed_once:
                self._failed_once = True
                log.debug("sd_notify to %r failed: %s", self._address, exc)
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        if status is None:
            return self.notify(READY=1)
        return self.notify(READY=1, STATUS=status)

    def status(self, text: str) -> bool:
        return self.notify(STATUS=text)

    def reloading(self) -> bool:
        """A reload began (SIGHUP): systemd waits for the next READY=1 to call it done."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.notify(RELOADING=1, MONOTONIC_USEC=usec)

    def watchdog(self) -> bool:
        return self.notify(WATCHDOG=1)

    def stopping(self, status: str | None = None) -> bool:
        if status is None:
            return self.notify(STOPPING=1)
        return self.notify(STOPPING=1, STATUS=status)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _one_line(value: object) -> str:
    if value is True:
        return "1"
    if value is False:
        return "0"
    return str(value).replace("\n", " ")


def watchdog_interval() -> float | None:
    """Seconds between watchdog pings (half of ``WATCHDOG_USEC``), or None if not requested.

    None as well when ``WATCHDOG_PID`` names another process (the variables were inherited).
    """
    pid = os.environ.get("WATCHDOG_PID")
    if pid is not None and pid != str(os.getpid()):
        return None
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    return usec / 2 / 1_000_000


async def watchdog_loop(notifier: Notifier, interval: float | None) -> None:
    """Ping the watchdog every ``interval`` seconds until cancelled.

    The pings come from the event loop itself, so a loop blocked by synchronous code stops
    them and systemd restarts the service. Returns at once if there is nothing to do.
    """
    if interval is None or interval <= 0 or not notifier.enabled:
        return
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval)  # periodic timer

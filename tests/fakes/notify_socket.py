"""A stand-in for systemd's notification socket, for tests of sd_notify senders.

    with NotifySocket(tmp_path) as sock:
        env = {**os.environ, "NOTIFY_SOCKET": sock.address}
        proc = subprocess.Popen([...], env=env)
        msg = sock.wait_for("READY", timeout=30)   # skips STATUS=..., WATCHDOG=1 before it
        assert msg.pid == proc.pid                 # what NotifyAccess=main checks

Receives block with a socket timeout; nothing sleeps.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_UCRED = struct.Struct("3i")  # pid, uid, gid


@dataclass(frozen=True)
class NotifyMessage:
    raw: str
    fields: dict[str, str] = field(default_factory=dict)
    pid: int | None = None  # the sender, from SCM_CREDENTIALS

    def __getitem__(self, key: str) -> str:
        return self.fields[key]

    def __contains__(self, key: object) -> bool:
        return key in self.fields


class NotifySocket:
    """A bound AF_UNIX datagram socket; ``address`` is the value for ``NOTIFY_SOCKET``.

    Binds ``directory/notify.sock``; with no directory, or one whose path is too long for a
    socket address, an abstract socket (``@...``) instead.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.received: list[NotifyMessage] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        path = Path(directory, "notify.sock") if directory is not None else None
        if path is not None and len(os.fsencode(path)) < 100:
            self._sock.bind(os.fspath(path))
            self.address = os.fspath(path)
        else:
            name = f"relaybot-test-{uuid.uuid4().hex}"
            self._sock.bind("\0" + name)
            self.address = "@" + name

    def recv(self, timeout: float = 5.0) -> NotifyMessage:
        """The next datagram; raises TimeoutError if none arrives within ``timeout`` seconds."""
        self._sock.settimeout(timeout)
        try:
            data, ancdata, _flags, _addr = self._sock.recvmsg(65536, socket.CMSG_SPACE(_UCRED.size))
        except (TimeoutError, BlockingIOError):  # timeout 0 makes the socket non-blocking
            raise TimeoutError(f"no sd_notify message within {timeout}s") from None
        pid = None
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = _UCRED.unpack(payload[: _UCRED.size])[0]
        raw = data.decode("utf-8", "replace")
        fields = dict(line.split("=", 1) for line in raw.splitlines() if "=" in line)
        message = NotifyMessage(raw=raw, fields=fields, pid=pid)
        self.received.append(message)
        return message

    def messages(self, timeout: float = 5.0) -> Iterator[NotifyMessage]:
        """Yield messages as they arrive; stops once none arrives within ``timeout`` seconds."""
        while True:
            try:
                yield self.recv(timeout)
            except TimeoutError:
                return

    def wait_for(self, key: str, value: str | None = None, timeout: float = 10.0) -> NotifyMessage:
        """Receive until a message carries ``key`` (equal to ``value`` if given) and return it.

        Raises TimeoutError if no such message arrives within ``timeout`` seconds in all.
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no sd_notify message with {key} within {timeout}s")
            message = self.recv(remaining)
            if key in message and (value is None or message[key] == value):
                return message

    def close(self) -> None:
        self._sock.close()
        if not self.address.startswith("@"):
            Path(self.address).unlink(missing_ok=True)

    def __enter__(self) -> NotifySocket:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

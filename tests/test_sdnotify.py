import asyncio
import logging
import os

import pytest

from bot._sdnotify import Notifier, watchdog_interval, watchdog_loop
from tests.fakes.notify_socket import NotifySocket


@pytest.fixture
def notify_socket(tmp_path, monkeypatch):
    with NotifySocket(tmp_path) as sock:
        monkeypatch.setenv("NOTIFY_SOCKET", sock.address)
        yield sock


def test_messages_reach_the_socket(notify_socket):
    notifier = Notifier.from_env()
    assert notifier.enabled
    assert notifier.ready()
    assert notify_socket.recv().raw == "READY=1\n"
    notifier.status("connecting to Telegram")
    assert notify_socket.recv()["STATUS"] == "connecting to Telegram"
    notifier.watchdog()
    assert notify_socket.recv().raw == "WATCHDOG=1\n"
    notifier.stopping()
    assert notify_socket.recv().raw == "STOPPING=1\n"
    notifier.close()


def test_default_constructor_reads_the_environment(notify_socket, monkeypatch):
    notifier = Notifier()
    monkeypatch.delenv("NOTIFY_SOCKET")  # read at construction, not per call
    notifier.watchdog()
    assert notify_socket.recv().raw == "WATCHDOG=1\n"
    assert not Notifier().enabled
    assert not Notifier("").enabled


def test_sender_pid_is_ours(notify_socket):
    Notifier.from_env().ready("up")
    message = notify_socket.recv()
    assert message.fields == {"READY": "1", "STATUS": "up"}
    assert message.pid == os.getpid()


def test_generic_notify_and_one_line_values(notify_socket):
    notifier = Notifier.from_env()
    assert notifier.notify(status="two\nlines", extend_timeout_usec=5_000_000)
    assert notify_socket.recv().raw == "STATUS=two lines\nEXTEND_TIMEOUT_USEC=5000000\n"
    assert notifier.notify() is False


def test_abstract_socket(monkeypatch):
    with NotifySocket() as sock:  # no directory: abstract namespace
        assert sock.address.startswith("@")
        monkeypatch.setenv("NOTIFY_SOCKET", sock.address)
        Notifier.from_env().ready()
        assert sock.recv()["READY"] == "1"


def test_socket_is_opened_once(notify_socket):
    notifier = Notifier.from_env()
    notifier.status("a")
    first = notifier._sock
    notifier.status("b")
    assert notifier._sock is first
    assert not first.getblocking()
    assert [notify_socket.recv()["STATUS"] for _ in range(2)] == ["a", "b"]


def test_no_op_without_notify_socket(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier.from_env()
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.status("x") is False
    assert notifier.watchdog() is False
    assert notifier.stopping() is False
    assert notifier._sock is None


def test_unset_environment(notify_socket):
    notifier = Notifier.from_env(unset_environment=True)
    assert "NOTIFY_SOCKET" not in os.environ
    notifier.ready()
    assert notify_socket.recv()["READY"] == "1"


def test_send_errors_never_raise_and_log_once(tmp_path, caplog):
    notifier = Notifier(str(tmp_path / "nobody-listens.sock"))
    with caplog.at_level(logging.DEBUG, logger="bot._sdnotify"):
        assert notifier.ready() is False
        assert notifier.watchdog() is False
    assert len([r for r in caplog.records if r.name == "bot._sdnotify"]) == 1


def test_unsupported_address_is_ignored():
    assert not Notifier("vsock:2:1234").enabled
    assert not Notifier("relative/path").enabled


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        ("60000000", None, 30.0),
        ("60000000", "self", 30.0),
        ("60000000", "1", None),  # inherited from a parent: not ours
        ("0", None, None),
        ("garbage", None, None),
        (None, None, None),
    ],
)
def test_watchdog_interval(monkeypatch, usec, pid, expected):
    for name, value in (("WATCHDOG_USEC", usec), ("WATCHDOG_PID", pid)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, str(os.getpid()) if value == "self" else value)
    assert watchdog_interval() == expected


async def test_watchdog_loop_pings_from_the_event_loop(notify_socket):
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(watchdog_loop(Notifier.from_env(), 0.01))
    try:
        # receive in a thread so the event loop keeps running the watchdog task
        pings = await loop.run_in_executor(None, lambda: [notify_socket.recv() for _ in range(3)])
        assert [p.raw for p in pings] == ["WATCHDOG=1\n"] * 3
        # now block the loop (no await): nothing can ping, so systemd would restart us
        list(notify_socket.messages(timeout=0))  # drain what was already sent
        with pytest.raises(TimeoutError):
            notify_socket.recv(timeout=0.1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watchdog_loop_returns_when_disabled(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    await asyncio.wait_for(watchdog_loop(Notifier.from_env(), 30.0), timeout=1)
    await asyncio.wait_for(watchdog_loop(Notifier("/nonexistent"), None), timeout=1)

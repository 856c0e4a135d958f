"""Logging for a daemon: journald priorities, a readable TTY format or JSON lines; secret redaction.

The format follows stderr: connected to the journal (``$JOURNAL_STREAM`` names stderr's device and
inode) each line is ``<N>logger: message`` with a syslog priority and no timestamp, which journald
adds; on a terminal a human line; anywhere else one JSON object per line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["RedactingFilter", "setup_logging"]

# Libraries that log every request at INFO: WARNING and up unless relaybot logs at DEBUG.
_CHATTY_AT_INFO = ("httpx", "httpx2", "telegram.ext", "discord.gateway", "discord.client")
# Libraries whose DEBUG drowns relaybot's own (aiosqlite: ~100 lines per message): INFO and up
# even at DEBUG, so --log-level DEBUG shows relaybot's and your plugins' debug lines.
_CHATTY_AT_DEBUG = (
    "asyncio",
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "hpack",
    "openai",
    "telegram",
    "discord",
    "websockets",
    "aiohttp",
    "mcp",
    "sse_starlette",
    "multipart",
    "charset_normalizer",
    "urllib3",
)
_NOISY = tuple(dict.fromkeys(("aiosqlite", *_CHATTY_AT_INFO, *_CHATTY_AT_DEBUG)))
_MIN_SECRET = 6
# A Telegram bot token in an API URL, even one nobody told us about: /bot123456:AAE.../getMe
_TELEGRAM_URL_TOKEN = r"(?<=/bot)\d+(?::|%3[Aa])[A-Za-z0-9_-]{30,}"
MASK = "***"


class RedactingFilter(logging.Filter):
    """Replaces every secret in a record's message, args, exception and stack text with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        variants = {v for s in secrets if s and len(s) >= _MIN_SECRET for v in (s, quote(s, ""))}
        alternatives = [re.escape(v) for v in sorted(variants, key=len, reverse=True)]
        self._pattern = re.compile("|".join([*alternatives, _TELEGRAM_URL_TOKEN]))

    def redact(self, text: str) -> str:
        return self._pattern.sub(MASK, text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: let the handler report it
            return True
        record.msg, record.args = self.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


_FORMATTER = logging.Formatter()


def _priority(levelno: int) -> int:
    """The syslog priority journald reads from a ``<N>`` line prefix."""
    for threshold, priority in ((50, 2), (40, 3), (30, 4), (20, 6)):
        if levelno >= threshold:
            return priority
    return 7


class _JournalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{_priority(record.levelno)}>"
        text = f"{record.name}: {super().format(record)}"
        # journald splits on newlines; prefix every line so a traceback keeps its priority
        return "\n".join(prefix + line for line in text.split("\n"))


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        exc = "\n".join(filter(None, (record.exc_text, record.stack_info)))
        if exc:
            entry["exc"] = exc
        return json.dumps(entry, ensure_ascii=False, default=str)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (it may be replaced after setup)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _journal_stream() -> bool:
    expected = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(2)
    except OSError:
        return False
    return expected == f"{st.st_dev}:{st.st_ino}"


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def setup_logging(level: str = "INFO", *, secrets: Iterable[str] = ()) -> None:
    """Configure the root logger; calling again replaces the previous setup (and secrets)."""
    numeric = logging.getLevelNamesMapping().get(str(level).upper())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}")

    handler = _StderrHandler()
    if _journal_stream():
        handler.setFormatter(_JournalFormatter())
    elif _stderr_is_tty():
        handler.setFormatter(
            logging.Formatter(
                "%(asctime)s.%(msecs)03d %(levelname)-8s %(name)s: %(message)s",
                "%Y-%m-%d %H:%M:%S",
            )
        )
    else:
        handler.setFormatter(_JsonFormatter())
    handler.addFilter(RedactingFilter(secrets))
    handler._relaybot = True  # type: ignore[attr-defined]

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_relaybot", False)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)
    quiet = _CHATTY_AT_INFO if numeric >= logging.INFO else _CHATTY_AT_DEBUG
    floor = logging.WARNING if numeric >= logging.INFO else logging.INFO
    for name in _NOISY:
        chatty = logging.WARNING if name == "aiosqlite" else floor if name in quiet else 0
        logging.getLogger(name).setLevel(chatty)
    logging.captureWarnings(True)

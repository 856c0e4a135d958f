"""The newest error of each channel (and of the model, as "llm"), kept until housekeeping stores
it for `relaybot status`: platform requests that failed (from the adapters' HTTP layers), what
the adapters log at WARNING and above (the ``channels.<name>`` loggers), and failed model
requests (engine/metrics.py's hooks). Its text is redacted like the log (secrets never reach the
store).

A leaf: the metrics note errors here and the store keeps what is taken (:class:`ChannelError`
is one of its reports), so neither imports the other for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from engine._clock import wall


@dataclass(frozen=True, slots=True)
class ChannelError:
    """The newest error of a channel (or of the model, as "llm"), as the operator reads it."""

    channel: str
    at: float  # unix time
    text: str  # redacted like the log
    count: int = 1  # errors of the channel it stands for (noted since the last hand-over)


MAX_ERROR_CHARS = 500


class ErrorLog(logging.Handler):
    """The newest error of each channel (and how many), kept until :meth:`take` hands it over.

    As a logging handler on the ``channels`` logger it also keeps what an adapter logs at
    WARNING and above (``channels.telegram`` → "telegram"). :func:`use_error_log` makes it the
    one the hooks report to, and attaches it.
    """

    def __init__(self, redact: Callable[[str], str] = lambda text: text) -> None:
        super().__init__(logging.WARNING)
        self.redact = redact
        self._new: dict[str, ChannelError] = {}

    def note(self, channel: str, text: str) -> None:
        text = self.redact(" ".join(text.split()))
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS - 1] + "…"
        count = self._new[channel].count + 1 if channel in self._new else 1
        self._new[channel] = ChannelError(channel, wall(), text, count)

    def take(self) -> list[ChannelError]:
        """The errors noted since the last call (per channel: the newest, and how many)."""
        taken, self._new = self._new, {}
        return list(taken.values())

    def emit(self, record: logging.LogRecord) -> None:
        _, _, rest = record.name.partition(".")
        try:
            self.note(rest.split(".")[0] or record.name, record.getMessage())
        except Exception:
            self.handleError(record)


_error_log: ErrorLog | None = None
_CHANNEL_LOGGER = logging.getLogger("channels")


def use_error_log(errors: ErrorLog) -> Callable[[], None]:
    """Report errors to `errors` from now on; returns what ends that (unless another log took
    over meanwhile)."""
    global _error_log
    if _error_log is not None:
        _CHANNEL_LOGGER.removeHandler(_error_log)
    _error_log = errors
    _CHANNEL_LOGGER.addHandler(errors)

    def stop() -> None:
        global _error_log
        if _error_log is errors:
            _CHANNEL_LOGGER.removeHandler(errors)
            _error_log = None

    return stop


def note_error(channel: str, text: str) -> None:
    if _error_log is not None:
        _error_log.note(channel, text)


def take_errors() -> list[ChannelError]:
    """The errors noted since the last call, for the store."""
    return _error_log.take() if _error_log is not None else []

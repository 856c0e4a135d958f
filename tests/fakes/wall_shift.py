"""A daemon whose wall clock a test moves: an NTP correction or a suspended laptop, without
touching the machine's clock.

    shift = WallShift(files.directory)   # before the daemon starts, in its PYTHONPATH folder
    ...
    shift.set(3600)                       # its wall clock jumps an hour forward
    shift.set(0)                          # and back

It writes a `sitecustomize.py` into the folder: Python imports it at start-up in the daemon
(and only there: the folder is on the daemon's PYTHONPATH alone). From then on `time.time()`
in that process is the real time plus the offset written in a file, which a thread reads every
20 ms; `time.monotonic()` and the event loop's clock are left alone, as a real jump leaves them.
"""

from __future__ import annotations

from pathlib import Path

_SOURCE = """\
import threading
import time

_OFFSET = {offset!r}
_real_time = time.time
_real_sleep = time.sleep
_shift = [0.0]


def _time():
    return _real_time() + _shift[0]


def _follow():
    while True:
        try:
            with open(_OFFSET) as f:
                _shift[0] = float(f.read() or 0)
        except (OSError, ValueError):
            pass
        _real_sleep(0.02)


try:
    with open(_OFFSET) as f:
        _shift[0] = float(f.read() or 0)
except (OSError, ValueError):
    pass
time.time = _time
threading.Thread(target=_follow, name="wall-shift", daemon=True).start()
"""


class WallShift:
    def __init__(self, directory: Path) -> None:
        self.offset = directory / "wall_offset"
        self.offset.write_text("0")
        (directory / "sitecustomize.py").write_text(_SOURCE.format(offset=str(self.offset)))

    def set(self, seconds: float) -> None:
        """The daemon's wall clock is the real one plus `seconds` from now on (within 20 ms)."""
        tmp = self.offset.with_suffix(".tmp")
        tmp.write_text(repr(float(seconds)))
        tmp.replace(self.offset)

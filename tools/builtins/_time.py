"""current_time: the date and time, optionally in a named time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools._function import tool
from tools.errors import ToolRetry


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`; ToolRetry (for the model) if there is no such zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolRetry(
            f"Unknown time zone {name!r}. Use an IANA name such as 'Europe/Berlin', "
            "'America/New_York' or 'UTC'."
        ) from None


@tool
async def current_time(timezone: str | None = None) -> str:
    """Get the current date, time and weekday. Use it whenever the answer depends on today's
    date or the time (dates, ages, "how long until", scheduling), instead of guessing.

    Args:
        timezone: An IANA time zone such as 'Europe/Paris'; UTC when omitted.
    """
    now = datetime.now(zone(timezone) if timezone else UTC)
    return f"{now:%A %Y-%m-%d %H:%M:%S} {now.tzname()} (UTC{now:%z}, ISO {now.isoformat()})"

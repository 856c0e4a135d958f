"""The `relaybot` command (also `python -m bot`): the collector set for start-up
(bot/_collector.py) before anything else is imported, then bot/cli.py."""

import sys

from bot._collector import loading


def main() -> int:
    loading()
    from bot.cli import main as command

    return command()


if __name__ == "__main__":
    sys.exit(main())

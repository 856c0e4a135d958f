"""How `relaybot init` asks: a question on stdout, the answer a line of stdin; a secret typed
without echo at a terminal.

The end of input means two things. Piped answers (``relaybot init </dev/null``, a script) end
when they run out: every later question takes its default. At a terminal, Ctrl-D is the user
leaving, like Ctrl-C: :class:`Stopped` is raised, and nothing is written.
"""

from __future__ import annotations

import re
import sys
import termios

from bot._config_secrets import shape_of, shown

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Stopped(Exception):
    """The user left the questions (Ctrl-D at a terminal)."""


class Input:
    """Questions on stdout, answers from stdin."""

    def __init__(self) -> None:
        self.tty = sys.stdin.isatty()
        self.ended = False  # piped answers ran out: the defaults from here on

    def ask(self, question: str, default: str = "") -> str:
        if self.ended:
            return default
        shown_default = f" [{default}]" if default else ""
        return self._line(f"{question}{shown_default}: ").strip() or default

    def _line(self, prompt: str) -> str:
        try:
            return input(prompt)
        except EOFError:
            print()
            if self.tty:
                raise Stopped from None
            self.ended = True
            return ""

    def secret(self, question: str) -> str:
        """A value typed without echo at a terminal (read as a line when piped)."""
        if self.ended:
            return ""
        if not self.tty:
            return self._line(f"{question}: ").strip()
        fd = sys.stdin.fileno()
        before = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
        try:
            answer = self._line(f"{question} (not shown as you type): ").strip()
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, before)
        print()
        return answer

    def env_name(self, question: str, default: str, *, optional: bool = False) -> str:
        """A variable's name; the secret itself, or anything else, is refused and asked again."""
        while True:
            name = self.ask(question, default)
            if optional and not name:
                return name
            if (shape := shape_of(name)) is not None:
                print(
                    f"  That is {shape} itself ({shown(name)}), not the name of a variable: "
                    f"give a name such as {default or 'MY_API_KEY'}; its value is asked next "
                    "and kept out of the config."
                )
            elif _ENV_NAME.match(name):
                return name
            else:
                print("  That is not a variable name (letters, digits and _).")
            if self.ended:
                return default

    def yes(self, question: str, *, default: bool = False) -> bool:
        answer = self.ask(f"{question} [{'Y/n' if default else 'y/N'}]").lower()
        return answer in ("y", "yes") if answer else default

    def user_id(self, question: str) -> str:
        while True:
            answer = self.ask(question).removeprefix("@")
            if not answer or answer.isdigit():
                return answer
            print("  A user id is a number; leave it empty to add it later.")

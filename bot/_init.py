"""`relaybot init`: ask for the essentials, write a short config file, say what comes next.

It asks only what relaybot cannot guess: the model endpoint, the model, the name of the
environment variable holding the key, and which channels to use (each with its token
variable and the user id allowed to use it). Every other key keeps its default and is
documented in config.example.toml. A model server on this machine (llama.cpp, Ollama, ...) gets
no key, a longer request timeout and a small tool set. The answers come from standard input,
one per line; an empty line or the end of input takes the default shown, so
`relaybot init </dev/null` writes a config with the defaults. The text is checked by the same
parser `run` uses before it is written, and an existing file is never overwritten.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bot._sections_llm import url_fix
from bot.config import find_config, parse_config
from tools.errors import ConfigError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOCAL = ("localhost", "127.", "[::1]", "0.0.0.0")
# What a local model is offered: each tool definition is sent with every request, and all the
# default built-ins take ~1,900 tokens, most of a 4k window; small models also pick better
# among few tools.
LOCAL_TOOLS = ("current_time", "remind_me")


@dataclass(slots=True)
class _Channel:
    name: str
    token_env: str
    user_id: str = ""


@dataclass(slots=True)
class Answers:
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    api: str = "chat"  # OpenAI's own endpoint: "responses" for its reasoning models' tools
    channels: list[_Channel] = field(default_factory=list)

    @property
    def local(self) -> bool:
        """A model server on this machine (llama.cpp, Ollama, vLLM, LM Studio)."""
        return any(host in self.base_url for host in _LOCAL)


class _Input:
    """Questions on stdout, answers from stdin; after the end of input, every default."""

    def __init__(self) -> None:
        self.ended = False

    def ask(self, question: str, default: str = "") -> str:
        if self.ended:
            return default
        shown = f" [{default}]" if default else ""
        try:
            answer = input(f"{question}{shown}: ").strip()
        except EOFError:
            self.ended = True
            print()
            return default
        return answer or default

    def env_name(self, question: str, default: str, *, optional: bool = False) -> str:
        while True:
            name = self.ask(question, default)
            if (optional and not name) or _ENV_NAME.match(name):
                return name
            print(
                "  That is not a variable name (letters, digits and _). If it is the secret "
                "itself, keep it out of the config: put it in the environment and name the "
                "variable here."
            )
            if self.ended:
                return default

    def yes(self, question: str) -> bool:
        return self.ask(f"{question} [y/N]").lower() in ("y", "yes")

    def user_id(self, question: str) -> str:
        while True:
            answer = self.ask(question).removeprefix("@")
            if not answer or answer.isdigit():
                return answer
            print("  A user id is a number; leave it empty to add it later.")


_FIND_ID = {
    "telegram": "write to the bot: its answer shows your id; or leave empty",
    "discord": "Developer Mode → right-click your name → Copy User ID; or leave empty",
}
_TOKEN_FROM = {"telegram": "@BotFather", "discord": "the developer portal (Bot → Reset Token)"}


def ask(term: _Input) -> Answers:
    a = Answers()
    print("relaybot init: a few questions; Enter keeps the value in brackets.")
    while True:
        url = term.ask("Model endpoint (any OpenAI-compatible URL)", a.base_url)
        if url.lower().startswith(("http://", "https://")) or term.ended:
            a.base_url = url
            break
        print(f"  {url_fix(url)}.")
    a.model = term.ask("Model", a.model)
    if "api.openai.com" in a.base_url and term.yes(
        "Use OpenAI's Responses API (reasoning models such as gpt-5 use tools only there)?"
    ):
        a.api = "responses"
    a.api_key_env = term.env_name(
        "Environment variable holding the API key (empty: none needed)",
        "" if a.local else a.api_key_env,
        optional=True,
    )
    for name, default_env in (("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN")):
        if term.yes(f"Use {name.title()}?"):
            env = term.env_name(
                f"  Environment variable holding the {name.title()} bot token", default_env
            )
            user = term.user_id(f"  Your {name.title()} user id ({_FIND_ID[name]})")
            a.channels.append(_Channel(name, env, user))
    return a


def render(a: Answers) -> str:
    lines = [
        "# Written by `relaybot init`. Every other key, with its default, is documented in",
        "# config.example.toml (`relaybot init --example` prints it). Check this file with:",
        "# relaybot check-config",
        "",
        "[llm]",
        f"base_url = {_quote(a.base_url)}",
        f"model = {_quote(a.model)}",
    ]
    if a.api != "chat":
        lines.append(f"api = {_quote(a.api)}   # README: Reasoning models")
    if a.api_key_env:
        lines.append(f"api_key_env = {_quote(a.api_key_env)}   # the key stays in the environment")
    if a.local:
        tools = ", ".join(_quote(t) for t in LOCAL_TOOLS)
        lines += [
            "request_timeout_s = 120   # a local model on a CPU may take a while",
            "",
            "[tools]",
            "# A small tool set for a local model: every tool definition is sent with each",
            "# request (all the default built-ins take ~1,900 tokens, most of a 4k window).",
            "# More in `relaybot init --example`; README: Local models.",
            f"builtins = [{tools}]",
        ]
    for ch in a.channels:
        users = f"[{_quote(ch.user_id)}]" if ch.user_id else "[]"
        lines += [
            "",
            f"[{ch.name}]",
            "enabled = true",
            f"token_env = {_quote(ch.token_env)}",
            f'allowed_users = {users}   # numeric user ids in quotes; "*" allows everyone',
        ]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def next_steps(a: Answers, path: Path) -> list[str]:
    """The commands to run next, each with what it is for."""
    steps: list[tuple[str, str]] = []
    if a.api_key_env and not os.environ.get(a.api_key_env):
        steps.append((f"export {a.api_key_env}=...", "your API key"))
    for ch in a.channels:
        if not os.environ.get(ch.token_env):
            steps.append(
                (f"export {ch.token_env}=...", f"the bot token from {_TOKEN_FROM[ch.name]}")
            )
    # as it was started: `.venv/bin/relaybot` from `make run`, else the name on PATH
    prog = sys.argv[0] if sys.argv[0].endswith("/relaybot") else "relaybot"
    flag = "" if path == find_config() else f" -c {path}"
    steps.append((f"{prog} doctor{flag}", "checks the key, the model and the tokens"))
    if a.channels:
        steps.append((f"{prog} run{flag}", "the daemon"))
    steps.append((f"{prog} chat{flag}", "talk to the bot in this terminal"))
    width = max(len(command) for command, _ in steps)
    lines = [f"{command.ljust(width)}   # {why}" for command, why in steps]
    if not a.channels:
        lines.append("(no channel yet: enable [telegram] or [discord] for relaybot run)")
    elif not all(ch.user_id for ch in a.channels):
        lines.append("(then put your user id in allowed_users: the bot tells you yours)")
    return lines


def run_init(path: Path) -> int:
    """Ask, write `path`, print the next steps. 0 when written, 1 when `path` exists."""
    if path.exists():
        print(f"relaybot: {path} already exists; edit it, or move it away to start over.")
        return 1
    try:
        answers = ask(_Input())
    except (KeyboardInterrupt, EOFError):  # Ctrl-C, Ctrl-D: leave as asked, no traceback
        print(f"\nrelaybot: init stopped; nothing written to {path}.", file=sys.stderr)
        return 130
    text = render(answers)
    try:
        parse_config(tomllib.loads(text))
    except ConfigError as exc:  # an answer the parser refuses, e.g. a malformed URL
        print(f"relaybot: config error: {exc}; nothing written", file=sys.stderr)
        return 78
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as f:
        f.write(text)
    print(f"\nWrote {path}. Next:")
    for step in next_steps(answers, path):
        print(f"  {step}")
    return 0

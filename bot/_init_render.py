"""What `relaybot init` writes and says at the end: the answers (:class:`Answers`), the short
config file they make, and the commands to run next.

Secrets never enter the config: it names each variable, and the values typed go to the env file
beside it (bot/_envfile.py), which every `relaybot` command reads at start.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bot._envfile import ENV_FILE
from bot.config import find_config

_LOCAL = ("localhost", "127.", "[::1]", "0.0.0.0")
# What a local model is offered: each tool definition is sent with every request, and all the
# default built-ins take ~1,900 tokens, most of a 4k window; small models also pick better
# among few tools.
LOCAL_TOOLS = ("current_time", "remind_me")
TOKEN_FROM = {"telegram": "@BotFather", "discord": "the developer portal (Bot → Reset Token)"}


@dataclass(slots=True)
class Channel:
    name: str
    token_env: str
    user_id: str = ""


@dataclass(slots=True)
class Answers:
    base_url: str = "https://api.openai.com/v1"
    provider: str = "openai"
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    api: str = "chat"  # OpenAI's own endpoint: "responses" for its reasoning models' tools
    channels: list[Channel] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # typed values, for the env file

    @property
    def local(self) -> bool:
        """A model server on this machine (llama.cpp, Ollama, vLLM, LM Studio)."""
        return any(host in self.base_url for host in _LOCAL)

    @property
    def admins(self) -> list[str]:
        return [f"{ch.name}:{ch.user_id}" for ch in self.channels if ch.user_id]


def render(a: Answers) -> str:
    lines = [
        "# Written by `relaybot init`. Every other key, with its default, is documented in",
        "# config.example.toml (`relaybot init --example` prints it). Check this file with:",
        "# relaybot check-config",
        "",
        "[llm]",
    ]
    if a.provider != "openai":
        lines.append(f"provider = {_quote(a.provider)}")
    lines += [f"base_url = {_quote(a.base_url)}", f"model = {_quote(a.model)}"]
    if a.api != "chat":
        lines.append(f"api = {_quote(a.api)}   # README: Reasoning models")
    if a.api_key_env:
        lines.append(
            f"api_key_env = {_quote(a.api_key_env)}   # its value: the environment, or {ENV_FILE}"
        )
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
    if a.admins:
        owners = ", ".join(_quote(u) for u in a.admins)
        lines += [
            "",
            "[access]",
            f"admins = [{owners}]   # the owner: answers pairing requests, may grant Always",
            "pairing = true   # a stranger who writes gets a code; the owner gets Allow / Deny",
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
    env = path.expanduser().absolute().parent / ENV_FILE
    unset = [a.api_key_env] if a.api_key_env else []
    unset += [ch.token_env for ch in a.channels]
    for name in unset:
        if not os.environ.get(name) and name not in a.secrets:
            what = "your API key" if name == a.api_key_env else _token_of(a, name)
            steps.append((f"export {name}=...", f"{what} (or a line {name}=... in {env})"))
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


def _token_of(a: Answers, name: str) -> str:
    channel = next(ch.name for ch in a.channels if ch.token_env == name)
    return f"the bot token from {TOKEN_FROM[channel]}"

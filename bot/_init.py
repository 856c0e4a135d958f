"""`relaybot init`: the one wizard. It asks what relaybot cannot guess and checks each answer
against the server while the user is there, then writes a short config file.

In order: the model endpoint (probed: a server that answers 404 at the address given but serves
``/v1/models`` gets ``/v1`` offered), the variable naming the API key and, when it is not set,
the key itself (kept in ``relaybot.env`` beside the config, mode 600: bot/_envfile.py), the
model (chosen from the server's list), one 1-token request (a rejected key or an unknown model
is said plainly and asked again), then the channels, each with its token and the user's id,
who becomes the owner (``[access] admins``, who answers pairing requests). A bad answer asks
that question again and keeps the others. A model server on this machine gets no key, a longer
request timeout and a small tool set. With ``--install-service`` the systemd user unit follows.

Answers come from standard input, one per line (bot/_init_input.py): piped answers that run
out take the defaults for the rest, unchecked (``relaybot init </dev/null`` writes the defaults
without a network request); Ctrl-C, or Ctrl-D at a terminal, stops and writes nothing. The text
is checked by the parser `run` uses before it is written; an existing config is never replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tomllib
from pathlib import Path

from bot._envfile import ENV_FILE, env_file, write_env
from bot._init_input import Input, Stopped
from bot._init_render import Answers, Channel, next_steps, render
from bot._sections_llm import url_fix
from bot._service import install_service
from bot.config import parse_config
from engine.models import Probe, list_models, ping, with_v1
from tools.errors import ConfigError

_FIND_ID = {
    "telegram": "write to the bot: its answer shows your id; or leave empty",
    "discord": "Developer Mode → right-click your name → Copy User ID; or leave empty",
}
_SHOWN_MODELS = 30


def ask(term: Input, env: Path) -> Answers:
    a = Answers()
    print("relaybot init: a few questions; Enter keeps the value in brackets.")
    _endpoint(term, a)
    default_env = "ANTHROPIC_API_KEY" if a.provider == "anthropic" else a.api_key_env
    a.api_key_env = term.env_name(
        "Environment variable holding the API key (empty: none needed)",
        "" if a.local else default_env,
        optional=True,
    )
    key = _secret(term, a, a.api_key_env, "The API key", env)
    models, key = ((), key) if term.ended else _models(term, a, key, env)
    _model(term, a, models, key, env)
    if "api.openai.com" in a.base_url and term.yes(
        "Use OpenAI's Responses API (reasoning models such as gpt-5 use tools only there)?"
    ):
        a.api = "responses"
    for name, token_env in (("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN")):
        if term.yes(f"Use {name.title()}?"):
            token_env = term.env_name(
                f"  Environment variable holding the {name.title()} bot token", token_env
            )
            _secret(term, a, token_env, f"  The {name.title()} bot token", env)
            user = term.user_id(f"  Your {name.title()} user id ({_FIND_ID[name]})")
            a.channels.append(Channel(name, token_env, user))
    if a.admins:
        print(
            f"  You ({', '.join(a.admins)}) are the bot's owner ([access] admins). When someone "
            "else writes to the bot, they get a pairing code and you get Allow / Deny; "
            "`relaybot users` lists who is let in."
        )
    return a


def _endpoint(term: Input, a: Answers) -> None:
    while True:
        url = term.ask("Model endpoint (an OpenAI-compatible URL, or Anthropic's)", a.base_url)
        if not url.lower().startswith(("http://", "https://")):
            print(f"  {url_fix(url)}.")
            continue
        a.base_url = url.rstrip("/")
        if "anthropic.com" in url.lower():
            _anthropic(a)
        if term.ended:
            return
        listing = asyncio.run(list_models(a.base_url, "", a.provider))
        if listing.answered:
            return
        if listing.status == 404:
            theirs = asyncio.run(list_models(a.base_url, "", "anthropic"))
            if theirs.answered and theirs.anthropic:
                print(f"  {a.base_url} is Anthropic's Messages API.")
                return _anthropic(a)
            fixed = asyncio.run(with_v1(a.base_url, "", a.provider))
            if fixed is not None:
                print(f"  {a.base_url} answers 404, {fixed} answers: the API is under /v1.")
                if term.yes(f"Use {fixed}?", default=True):
                    a.base_url = fixed
                    return
                continue
            print(f"  {a.base_url} lists no models (404): an OpenAI-compatible URL ends in /v1.")
        elif listing.status is None:
            print(f"  Cannot reach {a.base_url}: {listing.error}.")
        else:
            print(f"  {a.base_url} answered {listing.status}: {listing.error}.")
        if term.yes("Keep it anyway (e.g. the server is not running yet)?"):
            return


def _anthropic(a: Answers) -> None:
    a.provider = "anthropic"
    a.base_url = a.base_url.removesuffix("/v1")  # the SDK adds /v1/messages
    a.model = "claude-sonnet-4-5"


def _secret(term: Input, a: Answers, name: str, question: str, env: Path) -> str:
    """The value of variable `name`: the environment's, else typed now (kept for the env file)."""
    if not name:
        return ""
    if value := os.environ.get(name, ""):
        print(f"  {name} is set in the environment: using it.")
        return value
    value = term.secret(f"{question} (kept in {env}; empty: set {name} there later)")
    if value:
        a.secrets[name] = value
    return value


def _models(term: Input, a: Answers, key: str, env: Path) -> tuple[tuple[str, ...], str]:
    """The server's model list and the key it took; a rejected key is said, and asked again
    when it was typed here."""
    while True:
        listing = asyncio.run(list_models(a.base_url, key, a.provider))
        if listing.status not in (401, 403):
            return listing.models, key
        if not (key := _rejected(term, a, listing, env)):
            return (), key


def _rejected(term: Input, a: Answers, probe: Probe, env: Path) -> str:
    """Says the key was rejected; a new key when the user typed it here, else ""."""
    print(f"  {a.base_url} rejected the API key ({probe.status}: {probe.error}).")
    if a.api_key_env not in a.secrets:
        print(f"  Fix {a.api_key_env} (the environment, or {env}), then run relaybot doctor.")
        return ""
    del a.secrets[a.api_key_env]
    return _secret(term, a, a.api_key_env, "The API key again", env)


def _model(term: Input, a: Answers, models: tuple[str, ...], key: str, env: Path) -> None:
    listed = sorted(models)[:_SHOWN_MODELS]
    if listed:
        print(f"  {a.base_url} offers:")
        for n, name in enumerate(listed, 1):
            print(f"  {n:>3}. {name}")
        if len(models) > len(listed):
            print(f"  ... and {len(models) - len(listed)} more (type the name)")
    default = a.model if a.model in models or not models else listed[0]
    while True:
        answer = term.ask("Model (its number or name)" if listed else "Model", default)
        if answer.isdigit() and 1 <= int(answer) <= len(listed):
            answer = listed[int(answer) - 1]
        if models and answer not in models:
            print(f"  {answer!r} is not among the server's models: choose one of the list.")
            continue
        a.model = answer
        if term.ended:
            return
        test = asyncio.run(ping(a.base_url, key, a.model, a.provider))
        if test.status == 200:
            print(f"  {a.model} answered a test request.")
            return
        if test.status in (401, 403):
            if not (key := _rejected(term, a, test, env)):
                return
        elif test.status == 404:
            print(f"  {a.base_url} does not know model {a.model!r} (404): {test.error}.")
        else:
            said = test.status or "no answer"
            print(f"  The test request failed ({said}: {test.error}); relaybot doctor retries.")
            return


def run_init(path: Path, *, service: bool = False) -> int:
    """Ask, write `path` (and its env file), print the next steps. 0 when written, 1 when `path`
    exists, 130 when stopped."""
    if path.exists():
        print(f"relaybot: {path} already exists; edit it, or move it away to start over.")
        return 1
    env = env_file(path)
    try:
        answers = ask(Input(), env)
    except (KeyboardInterrupt, Stopped):  # Ctrl-C, Ctrl-D at a terminal: no traceback
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
    print(f"\nWrote {path}.")
    if answers.secrets:
        write_env(env, answers.secrets)
        names = ", ".join(answers.secrets)
        print(
            f"Wrote {names} to {env} (mode 600): every relaybot command reads the {ENV_FILE} "
            "beside its config; a variable set in the environment wins."
        )
    print("Next:")
    for step in next_steps(answers, path):
        print(f"  {step}")
    if service:
        print()
        unit = argparse.Namespace(user=True, install=True, config=str(path))
        return install_service(unit)
    return 0

"""Key-shaped values in a config file: a secret pasted where its variable's name goes (an error
that names the key and the shape, never the value), and any key-shaped text hidden from every
config message: shown as its first 4 characters and its length, e.g. ``sk-p… (51 characters)``.

A config error is printed by `check-config` and `run` and logged by a reload: a key put in
`base_url` (or any string field) must not reach a terminal, a journal or a bug report through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tools.errors import ConfigError

_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EDGE = r"(?<![A-Za-z0-9_-])"  # a shape starts where a word starts
_SHAPES = (
    ("a Telegram bot token", re.compile(_EDGE + r"\d{5,}:[A-Za-z0-9_-]{20,}")),
    (
        "a Discord bot token",
        re.compile(_EDGE + r"[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}"),
    ),
    ("an API key", re.compile(_EDGE + r"(?:sk|gsk|xai|pk|rk|ghp|gho|hf|tvly|BSA)[-_][\w-]{12,}")),
    ("an API key", re.compile(_EDGE + r"AIza[A-Za-z0-9_-]{20,}")),
    # no known prefix: a long run of letters and digits mixed (hex or base64 keys)
    ("a secret", re.compile(_EDGE + r"(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9_-]{32,}")),
)
_EXAMPLE_NAMES = {
    "token_env": "TELEGRAM_BOT_TOKEN",
    "api_key_env": "OPENAI_API_KEY",
    "url_env": "RELAYBOT_DATABASE_URL",
    "webhook_secret_env": "TELEGRAM_WEBHOOK_SECRET",
}


def shape_of(value: str) -> str | None:
    """What `value` looks like when it is key-shaped as a whole ("an API key"), else None."""
    text = value.strip()
    return next((what for what, rx in _SHAPES if rx.fullmatch(text)), None)


def shown(value: str) -> str:
    """A secret as it may be shown: its first 4 characters and its length."""
    return f"{value[:4]}… ({len(value)} characters)"


def hide_secrets(text: str) -> str:
    """`text` with every key-shaped run in it replaced by :func:`shown`."""
    for _, rx in _SHAPES:
        text = rx.sub(lambda m: shown(m.group(0)), text)
    return text


def pasted_secrets(data: Any, loc: tuple[str, ...] = ()) -> Iterator[ConfigError]:
    """Each `*_env` key whose value is a secret itself (a token pasted where its variable's name
    goes): the error names the key and what it looks like, and shows the value as `shown` does."""
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        where = (*loc, str(key))
        if isinstance(value, dict | list):
            yield from pasted_secrets(value, where)
            continue
        if not (isinstance(key, str) and key.endswith("_env") and isinstance(value, str)):
            continue
        shape = shape_of(value)
        if shape is None and (_VARIABLE.match(value.strip()) or len(value) < 16):
            continue
        name = _EXAMPLE_NAMES.get(key, "MY_SECRET")
        yield ConfigError(
            ".".join(where),
            f"holds what looks like {shape or 'a secret'} itself ({shown(value.strip())}), where "
            f"the name of the environment variable that holds it goes. Put the value in the "
            f"environment (export {name}=…, or a line {name}=… in the service's environment "
            f'file: `relaybot install-service` names it) and write {key} = "{name}"; and since '
            "it was written into a file, consider it seen and make a new one",
        )

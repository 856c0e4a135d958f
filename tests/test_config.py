"""The config file: what config.example.toml documents, and how a mistake is explained."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot._checks import NO_CHANNEL, validate
from bot.config import Config, model_in, parse_config
from tools.errors import ConfigError

EXAMPLE = Path(__file__).parent.parent / "config.example.toml"


def documented_keys() -> set[str]:
    """Every `key =` in the example, commented out or not, as section.key."""
    keys, section = set(), ""
    for line in EXAMPLE.read_text().splitlines():
        line = line.lstrip("# ").rstrip()
        header = re.match(r'^\[\[?([a-z_.]+)(?:\."[^"]+")?\]\]?$', line)  # [pricing."MODEL"]
        if header:
            section = header[1]
        elif m := re.match(r"^([a-z_]+) = ", line):
            keys.add(f"{section}.{m[1]}")
    return keys


def model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        sub = model_in(field.annotation)
        if sub is None:
            keys.add(f"{prefix}{name}")
        elif sub is not model:
            keys |= model_keys(sub, f"{prefix}{name}.")
    return keys


def test_the_example_documents_every_key_and_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example-key")
    assert model_keys(Config) - documented_keys() == set()
    assert documented_keys() - model_keys(Config) == set()  # and nothing that does not exist
    config = parse_config(tomllib.loads(EXAMPLE.read_text()))
    with pytest.raises(ConfigError) as exc:  # as shipped it enables no channel...
        validate(config)
    assert str(exc.value) == NO_CHANNEL
    assert validate(config, need_channel=False) == []  # ...and is fine for `relaybot chat`
    assert "all safe" not in EXAMPLE.read_text()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tols": {}}, "tols: unknown key (did you mean 'tools'?"),
        ({"telegram": {"group_mode": "everyone"}}, "telegram.group_mode: must be 'mentions' or "),
        (
            {"mcp": {"servers": [{"name": "a", "command": "x", "trust_annotations": "no"}]}},
            "mcp.servers.0.trust_annotations: must be true or false, without quotes",
        ),
        ({"telegram": {"enabled": 1}}, "telegram.enabled: must be true or false"),
        ({"llm": {"max_iterations": "ten"}}, "must be a whole number, e.g. max_iterations = 10"),
        ({"llm": {"model": 4}}, 'llm.model: must be text in quotes, e.g. model = "gpt-4o-mini"'),
        ({"llm": "gpt-4o"}, "llm: must be a table: a [llm] section with keys under it"),
        ({"llm": {"options": 1}}, "llm.options: must be a table, e.g. options = { top_p = 0.9 }"),
        ({"discord": {"allowed_users": ["my name"]}}, "Copy User ID"),
        ({"tools": {"builtins": ["curent_time"]}}, None),  # parses; validate() refuses it
        (
            {"tools": {"trusted_sources": ["https://example.org"]}},
            "tools.trusted_sources: 'https://example.org' is not a source: write a domain",
        ),
    ],
)
def test_mistakes_are_explained(data: dict[str, Any], message: str | None) -> None:
    if message is None:
        with pytest.raises(ConfigError, match="did you mean 'current_time'"):
            validate(parse_config(data), need_channel=False)
        return
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert message in str(exc.value)


def test_numeric_ids_as_numbers_or_strings() -> None:
    config = parse_config(
        {"telegram": {"allowed_users": [123, "*"]}, "discord": {"allowed_users": [456, "789"]}}
    )
    assert config.telegram.allowed_users == ["123", "*"]
    assert config.discord.allowed_users == ["456", "789"]

"""The checks of the keys that spread receiving over instances: `[telegram]` webhook mode and
`[discord]` shards. Kept apart from the sections themselves (``_config``) so each check reads as
one function with the rule it enforces; like them, nothing here imports a platform library."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tools.errors import ConfigError

SECRET_KEY = "telegram.webhook_secret_env"
# What Telegram accepts as a webhook's secret_token.
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


def check_webhook(mode: str, url: str | None, secret_env: str | None) -> None:
    """Webhook mode needs the URL and the secret (without one, anyone who learns the URL could
    post updates in any user's name)."""
    if mode != "webhook":
        return
    if not url:
        raise ConfigError(
            "telegram.webhook_url",
            'mode = "webhook" needs the public URL Telegram posts to, e.g. '
            'webhook_url = "https://bot.example.com/telegram"',
        )
    if not secret_env:
        raise ConfigError(
            SECRET_KEY,
            'mode = "webhook" needs the environment variable holding the secret Telegram sends '
            'with each update, e.g. webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET"',
        )


def webhook_url_of(url: str | None) -> str | None:
    """`webhook_url`: an http(s) URL with a host. Telegram itself wants HTTPS on port 443, 80,
    88 or 8443; a local Bot API server also takes plain http, so that is left to it to say."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            'must be the public URL Telegram posts to, e.g. "https://bot.example.com/tg"'
        )
    return url


def listen_address_of(listen: str) -> str:
    """`webhook_listen`: host:port (an IPv6 host in brackets, e.g. "[::1]:8443")."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError('must be host:port, e.g. "127.0.0.1:8443"')
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError('an IPv6 address goes in brackets, e.g. "[::1]:8443"')
    return listen


def webhook_secret_of(secret: str) -> str:
    """The secret as Telegram takes it: 1-256 of A-Z, a-z, 0-9, _ and -."""
    if not _SECRET.fullmatch(secret):
        raise ConfigError(
            SECRET_KEY,
            "the secret must be 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule), "
            "e.g. the output of: openssl rand -hex 32",
        )
    return secret


def check_shards(count: int | None, ids: list[int] | None) -> None:
    """`shard_ids` needs `shard_count`, and names each shard below it at most once."""
    if ids is None:
        return
    key = "discord.shard_ids"
    if count is None:
        raise ConfigError(key, "needs shard_count, the total over all instances, e.g. 2")
    if not ids:
        raise ConfigError(key, "is empty: name at least one shard, e.g. shard_ids = [0]")
    wrong = [i for i in ids if not 0 <= i < count]
    if wrong:
        raise ConfigError(
            key, f"with shard_count = {count} the ids run from 0 to {count - 1}: {wrong}"
        )
    if len(set(ids)) != len(ids):
        raise ConfigError(key, "names a shard twice")

"""The [storage] section: a PostgreSQL URL, or a SQLite file; where that file is when `path` is
not set: one store per config file, so two configs never share a history.

    $STATE_DIRECTORY set (a systemd unit)     $STATE_DIRECTORY/relaybot.db
    $XDG_CONFIG_HOME/relaybot/config.toml     $XDG_STATE_HOME/relaybot/relaybot.db
    $XDG_CONFIG_HOME/relaybot/NAME.toml       $XDG_STATE_HOME/relaybot/NAME.db
    any other DIR/NAME.toml                   DIR/.relaybot/NAME.db  (a checkout's make run)

Before this, every config without `[storage] path` shared $XDG_STATE_HOME/relaybot/relaybot.db.
The installed default config (the second line) keeps it. For any other config the shared store
stays in use while that config has no store of its own, if nobody else has claimed it: the first
such config that runs (`run`, `chat`) claims it (``relaybot.db.owner`` names the config file),
so an upgrade strands no history, and a second config gets its own store from then on.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import Field, PrivateAttr, SecretStr, model_validator

from bot._sections import Section
from channels import resolve_secret
from engine.store import is_postgres, redact
from tools.errors import ConfigError

log = logging.getLogger(__name__)


def xdg_config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def default_state_dir() -> Path:
    if os.environ.get("STATE_DIRECTORY"):  # systemd's StateDirectory=
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "relaybot"


def shared_store() -> Path:
    """The default store of the installed config (and, before stores were per config, of all)."""
    return default_state_dir() / "relaybot.db"


def own_store(config_file: Path) -> Path:
    """The store `config_file` has by the table above."""
    file = config_file.expanduser().absolute()
    if os.environ.get("STATE_DIRECTORY"):
        return shared_store()
    if file.parent == xdg_config_home().absolute() / "relaybot":
        return (
            shared_store()
            if file.name == "config.toml"
            else default_state_dir() / f"{file.stem}.db"
        )
    return file.parent / ".relaybot" / f"{file.stem}.db"


def default_store(config_file: Path | None) -> Path:
    """The store of a config loaded from `config_file` (None: not from a file)."""
    if config_file is None:
        return shared_store()
    own, shared = own_store(config_file), shared_store()
    if own == shared or own.exists() or not shared.exists():
        return own
    return shared if _may_keep(shared, config_file) else own


def _owner_file(shared: Path) -> Path:
    return shared.with_name(shared.name + ".owner")


def _may_keep(shared: Path, config_file: Path) -> bool:
    """Whether the shared store, made by an older relaybot, may stay `config_file`'s: the
    installed config does not exist (it would be its), and no other config claimed it."""
    if (xdg_config_home() / "relaybot" / "config.toml").exists():
        return False
    try:
        owner = _owner_file(shared).read_text(encoding="utf-8").strip()
    except OSError:
        return True
    return owner == str(config_file.expanduser().absolute())


def claim(store: Path, config_file: Path | None) -> None:
    """`run` and `chat`: if `store` is the shared one kept by a config of its own (an upgrade),
    record that it is this config's, with one log line."""
    shared = shared_store()
    if config_file is None or store != shared or own_store(config_file) == shared:
        return
    owner = _owner_file(shared)
    if owner.exists():
        return
    try:
        fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return
    with open(fd, "w", encoding="utf-8") as out:
        out.write(f"{config_file.expanduser().absolute()}\n")
    log.warning(
        "keeping the store at %s for %s: an older relaybot kept every config's store there. "
        "Each config now has its own; to give this one its own place, stop relaybot and move "
        "the store (with its -wal and -shm files) to %s, or set [storage] path",
        shared,
        config_file,
        own_store(config_file),
    )


class StorageConfig(Section):
    path: Path | None = None  # default: one per config file (bot/_store_place.py)
    keep_days: float | None = Field(
        None, gt=0
    )  # conversation history older is deleted; unset: kept
    retention_days: float = Field(7, gt=0)  # settled rows (answered inbox, finished jobs, ...)
    wal_limit_mb: float = Field(16, ge=1)  # the SQLite WAL is checkpointed to stay under this
    # PostgreSQL, shared by several instances: "postgresql://user:password@host/db", or the
    # name of the environment variable (or credential) holding it (it may hold a password)
    url: SecretStr | None = None
    url_env: str | None = None
    _config_file: Path | None = PrivateAttr(None)  # where the config was read (load_config)

    @model_validator(mode="after")
    def _one_database(self) -> StorageConfig:
        if self.url is not None and self.url_env:
            raise ValueError("set url or url_env, not both")
        if self.url is not None and not is_postgres(self.url.get_secret_value()):
            raise ConfigError(
                "storage.url",
                'must be a PostgreSQL URL, e.g. url = "postgresql://relaybot@db.example/relaybot"'
                " (for SQLite, set path instead)",
            )
        return self

    def resolved_path(self) -> Path:
        return (self.path or default_store(self._config_file)).expanduser()

    def resolved_url(self) -> str | None:
        """The PostgreSQL URL, or None for the SQLite file at `path`."""
        url = resolve_secret("storage.url_env", self.url, self.url_env) or None
        if url is not None and not is_postgres(url):
            raise ConfigError("storage.url_env", f"{self.url_env} must hold a postgresql:// URL")
        return url

    def describe(self) -> str:
        """Where the store is, for people (a URL without its password)."""
        url = self.resolved_url()
        return redact(url) if url else str(self.resolved_path())

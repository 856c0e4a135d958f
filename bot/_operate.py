# Left whole: the three store commands of a shell (status, backup, forget) and the words they print;
# one reader, the operator.
"""`relaybot status`, `relaybot backup` and `relaybot forget`: operating the store from a shell.

- status opens the store read-only, so it works while the daemon runs (WAL lets a reader in
  another process read while the daemon writes) and changes nothing; it says whether the daemon
  holds the store (bot/_lock.py; with PostgreSQL, which instances are alive), what is queued and
  running, what waits for whom, and the last error of each channel. ``--json`` gives the same
  for scripts.
- backup copies a SQLite store with SQLite's online backup API
  (engine/store/_sqlite_backup.py), also while the daemon runs. A PostgreSQL store is the
  server's to back up: the command says to use pg_dump, and how, and fails.
- forget works while the daemon runs: the store tells it (SQLite: through the file's data
  version, read once a second; PostgreSQL: a notification to every instance), and it drops what
  it keeps in memory, stops the user's jobs it runs and reads the chats' settings again, within
  about a second (engine/chat/_commands/_forget.py). It shows what it will delete, and asks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit

from bot._loaded import read_loaded
from bot._lock import holder
from bot.config import Config
from engine.models import dollars
from engine.store import CONSOLE_CLI, Spent, SqliteStore, StatusSnapshot, Store, backup_sqlite
from tools.errors import ConfigError, StoreError

_SHOWN = 20  # lines per section; the rest is counted


async def status(config: Config, as_json: bool, out: TextIO = sys.stdout) -> int:
    url = config.storage.resolved_url()
    where = config.storage.describe()
    found: dict[str, object] = {"store": where}
    if url:
        from engine.store.postgres import PgStore  # asyncpg only for a PostgreSQL store

        async with PgStore(url, readonly=True, max_connections=2) as pg:
            snapshot = await pg.ops.status()
            spent = await pg.spend.by_model(_today())
            assert pg.cluster is not None
            server = await pg.cluster.server()
        instances = list(server.instances)
        found["instances"] = instances
        found["receiving"] = dict(server.receiving)
        alive = bool(instances)
        daemon = f"{len(instances)} running ({', '.join(instances)})" if instances else "none"
        daemon = f"instances: {daemon}"
        if server.receiving:  # which instance receives for each channel, or each Discord shard
            held = ", ".join(f"{part} ({name})" for part, name in server.receiving)
            daemon = f"{daemon}\nreceiving: {held}"
    else:
        path = config.storage.resolved_path()
        async with SqliteStore(path, readonly=True) as store:
            snapshot = await store.ops.status()
            spent = await store.spend.by_model(_today())
        pid = holder(path)
        found["daemon_pid"] = pid
        alive = pid is not None
        daemon = f"daemon: {f'running (pid {pid})' if pid else 'not running'}"
        loaded = read_loaded(config)
        if pid and loaded is not None and loaded.get("pid") == pid:
            what = "relaybot chat" if loaded.get("command") == "chat" else "daemon"
            at = float(loaded.get("loaded_at") or 0)
            found["config_loaded_at"] = at
            found["command"] = loaded.get("command")
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
            daemon = f"{what}: running (pid {pid}); config loaded {when} ({_ago(time.time(), at)})"
            waiting = [str(key) for key in loaded.get("waiting") or ()]
            found["waiting_for_restart"] = waiting
            if waiting:  # changed in the file, put in force by the next restart (bot/_in_force.py)
                daemon += f"\nwaiting for a restart: {', '.join(waiting)}"
    now = time.time()
    if as_json:
        spend = {"spent_today": [dataclasses.asdict(s) for s in spent]}
        json.dump(found | {"now": now} | dataclasses.asdict(snapshot) | spend, out, indent=2)
        out.write("\n")
    else:
        out.write(render(snapshot, where, daemon, alive, now, spent))
    return 0


def render(
    s: StatusSnapshot,
    where: str,
    daemon: str,
    alive: bool,
    now: float,
    spent: Sequence[Spent] = (),
) -> str:
    """The status as a person reads it on a terminal (`daemon`: its line, e.g. "daemon:
    running (pid 812)"; `alive`: whether anything runs the store; `spent`: today's spend per
    model)."""
    lines = [
        f"store: {where} (schema version {s.schema_version})",
        daemon,
        f"conversations: {s.conversations} active, {s.messages} messages stored",
    ]
    if not alive and (s.running or s.queued):
        lines.append("(the daemon is not running: the next start finishes what is shown here)")

    def section(title: str, rows: Sequence[str]) -> None:
        lines.append("")
        lines.append(f"{title}: {len(rows) or 'none'}")
        lines.extend(f"  {row}" for row in rows[:_SHOWN])
        if len(rows) > _SHOWN:
            lines.append(f"  … and {len(rows) - _SHOWN} more")

    section(
        "chats with queued messages",
        [
            f"{q.channel}:{q.chat_id}  {_n(q.messages, 'message')}, "
            f"the oldest {_ago(now, q.oldest)}" + _held(q.held_until, now)
            for q in s.queued
        ],
    )
    section(
        "running",
        [
            f"{r.channel}:{r.chat_id}  {r.what}"
            + (f", for {_for(now - r.since)}" if r.since is not None else "")
            for r in s.running
        ],
    )
    section(
        "confirmations pending",
        [
            f"{c.channel}:{c.chat_id}  user {c.user_id}: {_clip(c.summary)} ({c.tool}), "
            f"{_expiry(c.expires_at - now)} [{c.id}]"
            for c in s.confirmations
        ],
    )
    section(
        "background jobs",
        [
            f"{j.channel}:{j.chat_id}  {j.tool} for user {j.user_id}, "
            + (
                f"due {_when(j.due - now)}"
                if j.due is not None and j.state != "done"
                else f"{'finished, to be told' if j.state == 'done' else 'running'} "
                f"since {_ago(now, j.since)}"
            )
            + f" [{j.id}]"
            for j in s.jobs
        ],
    )
    section(
        "next scheduled runs",
        [
            f"{u.channel}:{u.chat_id}  #{u.schedule_id} {_when(u.next_due - now)}: {_clip(u.task)}"
            for u in s.upcoming
        ],
    )
    section(
        "last error per channel",
        [f"{e.channel}  {_ago(now, e.at)}: {e.text}" for e in s.errors],
    )
    total = sum(m.nano_usd for m in spent)
    section(
        f"spent today (UTC), {dollars(total)} in all; models",
        [f"{m.of}  {dollars(m.nano_usd)}: {_spent(m)}" for m in spent],
    )
    return "\n".join(lines) + "\n"


def _spent(m: Spent) -> str:
    figures = [_n(m.requests, "request")]
    if m.prompt_tokens or m.completion_tokens:
        figures.append(f"{m.prompt_tokens:,} tokens in, {m.completion_tokens:,} out")
    if m.images:
        figures.append(_n(m.images, "picture"))
    if m.chars:
        figures.append(f"{m.chars:,} characters spoken")
    if m.seconds:
        figures.append(f"{m.seconds:.0f} s heard")
    return ", ".join(figures)


PG_DUMP_HINT = """\
relaybot: the store is a PostgreSQL database ({where}); back it up with PostgreSQL's own tools,
which make a consistent copy while the instances run, e.g.:

  pg_dump --format=custom --file=relaybot-$(date +%Y%m%d-%H%M%S).dump {dump_url}

and restore it into an empty database with pg_restore (see README: "Backup and restore").
"""


async def console_link(config: Config, out: TextIO = sys.stdout, role: str = "admin") -> int:
    """`relaybot console-link`: a one-time sign-in link to the web console, made on the server."""
    from engine.store import open_store

    base = config.web.base_url()
    if base is None:
        raise ConfigError("web.listen", 'the console is off: set e.g. listen = "127.0.0.1:8765"')
    async with open_store(config.storage.resolved_url(), config.storage.resolved_path()) as store:
        token = await store.console.new_link(CONSOLE_CLI, config.web.link_minutes * 60, role)
    out.write(f"{base}/signin?t={token}\n")
    print(f"(works once, for {config.web.link_minutes:g} minutes)", file=sys.stderr)
    return 0


async def backup(config: Config, target: str, out: TextIO = sys.stdout) -> int:
    url = config.storage.resolved_url()
    if url:
        env = config.storage.url_env
        dump_url = f'"${env}"' if env else _dump(url)  # the variable holds the password too
        sys.stderr.write(PG_DUMP_HINT.format(where=config.storage.describe(), dump_url=dump_url))
        return 1
    made = await asyncio.to_thread(backup_sqlite, config.storage.resolved_path(), Path(target))
    out.write(
        f"backed up to {made.path}: {made.bytes / 1e6:.1f} MB, schema version "
        f"{made.schema_version}, {made.messages} messages, in {made.seconds:.1f} s\n"
    )
    return 0


async def forget(config: Config, who: str, yes: bool, out: TextIO = sys.stdout) -> int:
    channel, _, user_id = who.rpartition(":")
    if not user_id:
        raise StoreError(f"--user {who!r}: give a user id, e.g. 123456789 or telegram:123456789")
    url = config.storage.resolved_url()
    store: Store
    if url:
        from engine.store.postgres import PgStore

        store = PgStore(url, max_connections=2)
    else:
        store = SqliteStore(config.storage.resolved_path())
    whom = f"user {user_id}" + (f" of {channel}" if channel else " (every channel)")
    async with store:
        found = await store.ops.forget_user(channel or None, user_id, dry_run=True)
        if found.described() == "nothing":
            out.write(f"Nothing is stored about {whom}.\n")
            return 0
        out.write(f"This deletes everything stored about {whom}: {found.described()}.\n")
        if not yes:
            if not sys.stdin.isatty():
                out.write("Nothing deleted: run again with --yes to delete it.\n")
                return 1
            answer = await asyncio.to_thread(input, "Delete it? Type yes: ")
            if answer.strip().lower() != "yes":
                out.write("Nothing deleted.\n")
                return 1
        done = await store.ops.forget_user(channel or None, user_id)
    out.write(f"Deleted {done.described()}. Backups made before now still hold it.\n")
    return 0


def _dump(url: str) -> str:
    """The URL for pg_dump, its passwords left out (pg_dump asks, or reads ~/.pgpass)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return f"'{parts._replace(netloc=f'{user}@{host}' if user else host, query=query).geturl()}'"


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _for(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _held(until: float | None, now: float) -> str:
    return f", held for {_for(until - now)}" if until is not None and until > now else ""


def _ago(now: float, at: float) -> str:
    return f"{_for(now - at)} ago"


def _when(seconds: float) -> str:
    return f"in {_for(seconds)}" if seconds >= 0 else f"{_for(-seconds)} overdue"


def _expiry(seconds: float) -> str:
    return f"expires in {_for(seconds)}" if seconds >= 0 else "expired, not yet closed"


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())

# Left whole: the command's grammar (one parser) and, beside each subcommand's options, what runs
# it.
"""The `relaybot` command: run, chat, check-config, tools, skills, doctor, init, migrate-store,
migrate, status, backup, forget, users, console-link, install-service, upgrade, rollback."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot._collector import loaded
from bot._envfile import load_env
from bot._lock import lock_config_store, take_store
from bot._logging import setup_logging
from bot._running import loop_run, start_unless_stopped
from bot._sdnotify import Notifier, watchdog_interval, watchdog_loop
from bot._secrets import harden_process, seal_secrets
from bot._service import add_parser as add_service_parser
from bot._service import install_service
from bot._switch import add_parsers as add_switch_parsers
from bot.config import Config, find_config, load_config
from tools.errors import ConfigError, RelaybotError

if TYPE_CHECKING:
    from bot.app import App

log = logging.getLogger("relaybot")

EXIT_CONFIG = 78  # EX_CONFIG: systemd's RestartPreventExitStatus= keeps it from looping


def _version() -> str:
    try:
        return version("relaybot")
    except PackageNotFoundError:
        return "0+unknown"


class _ShowVersion(argparse.Action):
    """--version: the installed version, looked up only when asked (it reads package metadata)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(f"relaybot {_version()}")
        parser.exit()


def _options(parser: argparse.ArgumentParser, default: str | None) -> None:
    """-c and --log-level, accepted before the command and after it."""
    parser.add_argument(
        "-c",
        "--config",
        default=default,
        metavar="PATH",
        help="the config file (else $RELAYBOT_CONFIG, ./config.toml, "
        "$XDG_CONFIG_HOME/relaybot/config.toml)",
    )
    parser.add_argument(
        "--log-level", default=default, metavar="LEVEL", help="DEBUG, INFO, WARNING or ERROR"
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="relaybot", description="An LLM with tools in your chats.")
    p.add_argument("--version", action=_ShowVersion)
    _options(p, None)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")  # none: the list, below
    commands = {}
    for name, text in (
        ("run", "run every enabled channel"),
        ("chat", "talk to the bot in this terminal"),
        ("check-config", "validate the config and say what is wrong"),
        ("tools", "list every tool with its tier and schema"),
        ("skills", "list the skills (SKILL.md folders) found, and what is wrong with any"),
        ("doctor", "check config, store, LLM endpoint, plugins and channel tokens"),
        ("init", "ask for the essentials and write a config file"),
        ("status", "what the daemon is doing, read from the store (works while it runs)"),
        ("backup", "a consistent copy of the store, made while the daemon runs"),
        ("forget", "delete everything stored about a user (also while the daemon runs)"),
        ("users", "who may use the bot and from where; let someone in or out"),
        ("migrate", "upgrade the store to this version's schema (the daemon must be stopped)"),
        ("console-link", "print a one-time sign-in link to the web console ([web] listen)"),
    ):
        sp = commands[name] = sub.add_parser(name, help=text, description=text)
        _options(sp, argparse.SUPPRESS)  # absent here: keep what was given before the command
    commands["init"].add_argument(
        "--example",
        action="store_true",
        help="print config.example.toml (every key, with its default) and exit",
    )
    commands["init"].add_argument(
        "--install-service",
        action="store_true",
        help="at the end, install the systemd user unit (as `relaybot install-service --user "
        "--install` does)",
    )
    commands["doctor"].add_argument(
        "--quick",
        action="store_true",
        help="only the checks that need no network (what `relaybot upgrade` asks of a new version)",
    )
    commands["status"].add_argument("--json", action="store_true", help="for scripts")
    commands["backup"].add_argument("path", metavar="PATH", help="a new file, or a directory")
    commands["forget"].add_argument(
        "--user", required=True, metavar="[CHANNEL:]ID", help="e.g. telegram:123456789"
    )
    commands["forget"].add_argument("--yes", action="store_true", help="do not ask")
    commands["users"].add_argument("action", nargs="?", choices=("allow", "revoke"))
    commands["users"].add_argument("user", nargs="?", metavar="[CHANNEL:]ID")
    commands["migrate"].add_argument(
        "--check", action="store_true", help="only say what an upgrade would do; change nothing"
    )
    commands["migrate"].add_argument(
        "--store",
        metavar="PATH.db",
        help="this SQLite file instead of the config's store "
        "(`relaybot upgrade` tries the migrations on a copy)",
    )
    text = "copy a SQLite store into an empty PostgreSQL database"
    sp = sub.add_parser("migrate-store", help=text, description=text)
    sp.add_argument("--from", dest="source", required=True, metavar="PATH.db")
    sp.add_argument("--to", dest="target", required=True, metavar="postgresql://…")
    _options(sp, argparse.SUPPRESS)
    add_service_parser(sub)
    add_switch_parsers(sub)
    for name in ("upgrade", "rollback"):
        _options(sub.choices[name], argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    loaded()  # what the command's modules made stays out of later collections
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `relaybot`: what there is to run
        parser.print_help()
        print("\nStart with `relaybot init`, then `relaybot chat`; `relaybot COMMAND -h` for one.")
        return 2
    if args.command == "init" and args.example:  # needs no config: it is the reference
        from bot._shipped import example_text

        sys.stdout.write(example_text())
        return 0
    load_env(find_config(getattr(args, "config", None)))  # its secrets; the environment wins
    if args.command == "init":
        from bot._init import run_init

        return run_init(find_config(args.config), service=args.install_service)
    if args.command == "install-service":  # needs no valid config: it names the file
        return install_service(args)
    if args.command == "migrate-store":  # needs no config: both stores are named
        from bot._migrate import migrate_store
        from engine.store import passwords

        setup_logging(args.log_level or "INFO", secrets=passwords(args.target))
        try:
            return migrate_store(Path(args.source), args.target)
        except RelaybotError as exc:
            print(f"relaybot: {exc}", file=sys.stderr)
            return 1
    try:
        config = load_config(args.config)
        if args.command not in ("upgrade", "rollback"):  # they start the daemon: it reads them
            seal_secrets(config)  # before anything starts a process
    except ConfigError as exc:
        print(f"relaybot: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    level = args.log_level or config.log.level
    if args.command == "chat" and not args.log_level and "level" not in config.log.model_fields_set:
        level = "WARNING"  # the terminal is the conversation: no INFO lines in between
    try:
        setup_logging(level, secrets=config.secrets())
    except ValueError:
        print(f"relaybot: unknown log level {level!r}", file=sys.stderr)
        return 2
    harden_process()
    command = {
        "run": _run,
        "chat": _chat,
        "check-config": _check_config,
        "tools": _tools,
        "skills": _tools,
        "doctor": _doctor,
        "status": _operate,
        "backup": _operate,
        "forget": _operate,
        "users": _users,
        "migrate": _migrate,
        "console-link": _operate,
        "upgrade": _switch,
        "rollback": _switch,
    }[args.command]
    try:
        return loop_run(command(config, args))
    except ConfigError as exc:
        print(f"relaybot: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except RelaybotError as exc:
        print(f"relaybot: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


async def _check_config(config: Config, args: argparse.Namespace) -> int:
    from bot._checks import check_config  # the tools, skills and plugins: only for this and run

    return await check_config(config, args)


async def _tools(config: Config, args: argparse.Namespace) -> int:
    from bot._listing import list_skills, list_tools

    return await (list_tools(config) if args.command == "tools" else list_skills(config))


async def _chat(config: Config, args: argparse.Namespace) -> int:
    from bot._checks import validate
    from bot._loaded import record_loaded
    from bot.app import App
    from channels.console import ConsoleChannel

    validate(config, need_channel=False, channels_used=False)  # chat runs no channel
    holder: list[App] = []

    async def wait_idle(channel: str, chat_id: str) -> None:
        await holder[0].dispatcher.wait_idle(channel, chat_id)

    console = ConsoleChannel(wait_idle)
    app = App(config, channels=[console])
    holder.append(app)
    loop = asyncio.get_running_loop()
    lock_config_store(config)  # see bot/_lock.py: chat refuses to share a SQLite store
    # Ctrl-C: stop the running turn and leave at once. SIGTERM: stop reading; a running turn
    # finishes (as the daemon does). Caught from here on, even while the App is starting.
    signals: asyncio.Queue[signal.Signals] = asyncio.Queue()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, signals.put_nowait, sig)
    caught = asyncio.ensure_future(signals.get())
    if not await start_unless_stopped(app, caught, config.engine.shutdown_grace_s):
        return 0  # stopped while starting (the store unreachable, say)
    async with contextlib.AsyncExitStack() as started:
        started.push_async_exit(app.__aexit__)
        record_loaded(config, "chat", app.dispatcher.live.loaded_at)
        finished = asyncio.ensure_future(console.finished.wait())
        caught = asyncio.ensure_future(signals.get())
        await asyncio.wait([finished, caught], return_when=asyncio.FIRST_COMPLETED)
        finished.cancel()
        caught.cancel()
        if caught.done() and not caught.cancelled():
            await (console.interrupt() if caught.result() is signal.SIGINT else console.stop())
    return 0


async def _run(config: Config, args: argparse.Namespace) -> int:
    from bot._checks import validate
    from bot._reload import Reloader
    from bot.app import App

    for warning in validate(config):
        log.warning("%s", warning)
    notifier = Notifier.from_env(unset_environment=True)
    stop = asyncio.Event()
    reload = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload.set)  # systemctl reload: bot/_reload.py
    app = App(config)  # its channels' libraries loaded before an upgrade's take-over waits
    await take_store(config, notifier)  # one daemon per SQLite store, until this process exits
    watchdog = asyncio.create_task(watchdog_loop(notifier, watchdog_interval()))
    try:
        waiting = asyncio.ensure_future(stop.wait())
        if not await start_unless_stopped(app, waiting, config.engine.shutdown_grace_s):
            return 0  # stopped while starting (the store unreachable, say)
        async with contextlib.AsyncExitStack() as started:
            started.push_async_exit(app.__aexit__)
            reloader = Reloader(app, args.config)
            reloader.record()
            notifier.ready(app.status())
            log.info("relaybot %s running (%s)", _version(), app.status())
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_either(stop, reload), 15)  # STATUS= refresh period
                if reload.is_set() and not stop.is_set():
                    reload.clear()
                    notifier.reloading()
                    await reloader.reload()
                    notifier.ready(app.status())
                notifier.status(app.status())
            log.info("stopping: finishing running turns")
            notifier.stopping("finishing running turns")
    finally:
        watchdog.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watchdog
        notifier.close()
    log.info("stopped")
    return 0


async def _either(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _operate(config: Config, args: argparse.Namespace) -> int:
    from bot import _operate as operate

    if args.command == "status":
        return await operate.status(config, args.json)
    if args.command == "backup":
        return await operate.backup(config, args.path)
    if args.command == "console-link":
        return await operate.console_link(config)
    return await operate.forget(config, args.user, args.yes)


async def _users(config: Config, args: argparse.Namespace) -> int:
    from bot._users import users

    return await users(config, args.action, args.user)


async def _migrate(config: Config, args: argparse.Namespace) -> int:
    from bot._upgrade import migrate

    return await migrate(config, args.check, Path(args.store) if args.store else None)


async def _switch(config: Config, args: argparse.Namespace) -> int:
    from bot._switch import switch

    return await switch(config, args)


async def _doctor(config: Config, args: argparse.Namespace) -> int:
    from bot.doctor import run_doctor

    return await run_doctor(config, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())

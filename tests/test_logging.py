import json
import logging
import os
import sys

import pytest

from bot import _logging
from bot._logging import setup_logging

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"  # shaped like a Telegram bot token
API_KEY = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    noisy = {name: logging.getLogger(name).level for name in _logging._NOISY}
    yield
    for handler in root.handlers:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    for name, value in noisy.items():
        logging.getLogger(name).setLevel(value)
    logging.captureWarnings(False)


@pytest.fixture
def journald(monkeypatch):
    st = os.fstat(2)  # under capfd: the capture file standing in for stderr
    monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")


@pytest.fixture
def plain(monkeypatch):
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)


def _ours():
    return [h for h in logging.getLogger().handlers if getattr(h, "_relaybot", False)]


def test_journald_format(capfd, journald):
    setup_logging("INFO")
    log = logging.getLogger("relaybot.test")
    log.debug("not shown")
    log.info("hello %s", "world")
    log.warning("careful")
    log.error("broken")
    log.critical("on fire")
    assert capfd.readouterr().err.splitlines() == [
        "<6>relaybot.test: hello world",
        "<4>relaybot.test: careful",
        "<3>relaybot.test: broken",
        "<2>relaybot.test: on fire",
    ]


def test_journald_traceback_lines_keep_priority(capfd, journald):
    setup_logging("DEBUG")
    log = logging.getLogger("relaybot.test")
    log.debug("details")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    lines = capfd.readouterr().err.splitlines()
    assert lines[0] == "<7>relaybot.test: details"
    assert lines[1] == "<3>relaybot.test: failed"
    assert lines[2] == "<3>Traceback (most recent call last):"
    assert lines[-1] == "<3>RuntimeError: boom"
    assert all(line.startswith("<3>") for line in lines[1:])


def test_journal_stream_of_another_file_is_not_journald(capfd, monkeypatch):
    monkeypatch.setenv("JOURNAL_STREAM", "1:2")
    setup_logging()
    logging.getLogger("relaybot.test").info("x")
    assert json.loads(capfd.readouterr().err)["msg"] == "x"


def test_json_format(capfd, plain):
    setup_logging("INFO")
    log = logging.getLogger("relaybot.test")
    log.info("hello %s", "wörld")
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError:
        log.exception("division")
    first, second = (json.loads(line) for line in capfd.readouterr().err.splitlines())
    assert first.keys() == {"ts", "level", "logger", "msg"}
    assert first["level"] == "INFO"
    assert first["logger"] == "relaybot.test"
    assert first["msg"] == "hello wörld"
    assert first["ts"].endswith("Z") and "T" in first["ts"]
    assert second["level"] == "ERROR"
    assert second["exc"].startswith("Traceback")
    assert "ZeroDivisionError" in second["exc"]


def test_tty_format(monkeypatch, plain):
    master, slave = os.openpty()
    with open(slave, "w") as tty, open(master, "rb", buffering=0) as reader:
        monkeypatch.setattr(sys, "stderr", tty)
        setup_logging("INFO")
        logging.getLogger("relaybot.test").warning("look %d", 42)
        tty.flush()
        line = reader.read(4096).decode()
    assert line.rstrip().endswith(" WARNING  relaybot.test: look 42")
    assert line[:4].isdigit() and line[4] == "-"  # starts with the date


def test_secrets_are_redacted(capfd, plain):
    setup_logging("INFO", secrets=[TOKEN, API_KEY, "", "short"])
    log = logging.getLogger("relaybot.test")
    log.info(f"token in message {TOKEN}")
    log.info("key in args %s and %r", API_KEY, {"key": API_KEY})
    log.info("url https://api.telegram.org/bot%s/getUpdates", TOKEN)
    log.info("encoded https://example.invalid/bot123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/x")
    log.info("short secrets are ignored: short")
    try:
        raise ConnectionError(f"GET https://api.telegram.org/bot{TOKEN}/getMe failed")
    except ConnectionError:
        log.exception("request failed")
    out = capfd.readouterr().err
    assert TOKEN not in out
    assert API_KEY not in out
    assert "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0" not in out
    msgs = [json.loads(line) for line in out.splitlines()]
    assert msgs[0]["msg"] == "token in message ***"
    assert msgs[1]["msg"] == "key in args *** and {'key': '***'}"
    assert msgs[2]["msg"] == "url https://api.telegram.org/bot***/getUpdates"
    assert msgs[3]["msg"] == "encoded https://example.invalid/bot***/x"
    assert msgs[4]["msg"] == "short secrets are ignored: short"
    assert "https://api.telegram.org/bot***/getMe failed" in msgs[5]["exc"]


def test_unknown_telegram_token_in_url_is_redacted(capfd, plain):
    setup_logging("INFO")
    other = "987654321:BBHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9"
    logging.getLogger("httpx").warning("HTTP Request: POST https://api.telegram.org/bot%s/x", other)
    assert json.loads(capfd.readouterr().err)["msg"].endswith("/bot***/x")


def test_redaction_in_journald_format(capfd, journald):
    setup_logging("INFO", secrets=[API_KEY])
    logging.getLogger("relaybot.test").warning("auth failed for %s", API_KEY)
    assert capfd.readouterr().err == "<4>relaybot.test: auth failed for ***\n"


def test_idempotent_and_latest_call_wins(capfd, plain):
    setup_logging("INFO", secrets=[API_KEY])
    setup_logging("WARNING", secrets=[API_KEY])
    assert len(_ours()) == 1
    log = logging.getLogger("relaybot.test")
    log.info("hidden")
    log.warning("key %s", API_KEY)
    assert [json.loads(line)["msg"] for line in capfd.readouterr().err.splitlines()] == ["key ***"]


def test_noisy_loggers_quieted_at_info_only(plain):
    setup_logging("INFO")
    for name in ("httpx", "telegram.ext", "discord.gateway", "discord.client", "aiosqlite"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING
    setup_logging("DEBUG")
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.INFO


async def test_debug_shows_relaybot_not_the_libraries(tmp_path, capfd, plain):
    from engine.store import SqliteStore

    setup_logging("DEBUG")
    async with SqliteStore(tmp_path / "state.db") as store:
        await store.schema_version()
    logging.getLogger("engine.test").debug("our own detail")
    logging.getLogger("my_tools").debug("a plugin's detail")
    logging.getLogger("openai._base_client").debug("Request options: {...}")
    loggers = [json.loads(line)["logger"] for line in capfd.readouterr().err.splitlines()]
    assert "engine.test" in loggers and "my_tools" in loggers
    assert "aiosqlite" not in loggers and "openai._base_client" not in loggers


def test_unknown_level():
    with pytest.raises(ValueError, match="unknown log level"):
        setup_logging("LOUD")


def test_level_is_case_insensitive(plain):
    setup_logging("debug")
    assert logging.getLogger().level == logging.DEBUG

"""Pictures, files and voice through the real App and engine, on a recording channel (which
serves the files users send by reference), with the fake OpenAI server behind the engine."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from bot.doctor import run_doctor
from engine import Attachment, InboundMessage, MediaKind
from engine.store import MIGRATIONS, InboxState, SqliteStore
from tests.fakes.media import png, voice
from tests.fakes.openai_server import FakeOpenAI, error, images_in, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.test_cli import finish, relaybot, write_config
from tools import File


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel]) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        yield app, channel


@pytest.fixture
def vision(make_config: Callable[..., Config]) -> Callable[..., Config]:
    return lambda **sections: make_config(llm={"vision": True}, **sections)


def user_contents(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_after_ten_turns_the_old_picture_is_sent_as_a_marker(
    vision: Callable[..., Config], llm: FakeOpenAI
) -> None:
    picture = png("old", padding=1500)
    async with running(vision()) as (app, ch):
        photo = ch.upload(MediaKind.IMAGE, "photo.png", "image/png", picture)
        await app.dispatcher.handle_inbound(ch.message("look", attachments=[photo]))
        await ch.wait_for("send")
        for n in range(1, 11):
            await app.dispatcher.handle_inbound(ch.message(f"turn {n}"))
            await ch.wait_for("send", n + 1)
    with_picture = [n for n, body in enumerate(llm.requests) if images_in(body)]
    assert with_picture == [0, 1, 2]  # its own turn and the two after it
    assert user_contents(llm.requests[-1])[0] == "look\n[image: photo.png, 2 kB]"
    assert ch.downloads[photo.ref] == 1  # the recent turns were served from memory


async def test_after_a_restart_a_recent_picture_is_fetched_again(
    vision: Callable[..., Config], llm: FakeOpenAI
) -> None:
    picture = png("again")
    config = vision()
    async with running(config) as (app, ch):
        photo = ch.upload(MediaKind.IMAGE, "photo.png", "image/png", picture)
        await app.dispatcher.handle_inbound(ch.message("look", attachments=[photo]))
        await ch.wait_for("send")
    channel = RecordingChannel()
    channel.uploads[photo.ref] = picture  # the platform still has it
    async with App(config, channels=[channel]) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(channel.message("and now?"))
        await channel.wait_for("send")
    assert images_in(llm.requests[-1]) == [("image/png", picture)]
    assert channel.downloads[photo.ref] == 1


async def test_a_picture_that_cannot_be_fetched_gets_a_reply_and_no_model_call(
    vision: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with running(vision()) as (app, ch):
        photo = ch.upload(MediaKind.IMAGE, "photo.png", "image/png", png())
        del ch.uploads[photo.ref]  # deleted on the platform before the turn fetched it
        await app.dispatcher.handle_inbound(ch.message("see?", attachments=[photo]))
        (reply,) = await ch.wait_for("send")
    assert reply.text.startswith("⚠️ I couldn't fetch photo.png")
    assert llm.requests == []


async def test_a_file_named_as_text_that_is_binary_is_refused(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with running(make_config()) as (app, ch):
        notes = ch.upload(MediaKind.FILE, "notes.txt", "text/plain", b"\x00\x01\x02binary")
        await app.dispatcher.handle_inbound(ch.message("", attachments=[notes]))
        (reply,) = await ch.wait_for("send")
    assert reply.text == "⚠️ notes.txt does not look like a text file, so I can't read it."
    assert llm.requests == []


async def test_too_many_pictures_in_an_album_are_refused_together(
    vision: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with running(vision(media={"max_images_per_turn": 2})) as (app, ch):
        for n in range(3):
            photo = ch.upload(MediaKind.IMAGE, f"p{n}.png", "image/png", png(str(n)))
            await app.dispatcher.handle_inbound(
                ch.message("compare" if n == 0 else "", attachments=[photo], group_id="al")
            )
        (reply,) = await ch.wait_for("send")
        await app.dispatcher.handle_inbound(ch.message("fine, just hi"))
        await ch.wait_for("send", 2)
    assert reply.text == "⚠️ That's 3 pictures at once; I can look at 2 per message."
    assert [user_contents(r) for r in llm.requests] == [["fine, just hi"]]


async def test_a_failed_transcription_gets_a_reply_and_the_model_is_not_asked(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.script_transcription(error(500, "decoder crashed"))
    async with running(make_config(media={"transcription_model": "whisper-1"})) as (app, ch):
        note = ch.upload(MediaKind.AUDIO, "voice.ogg", "audio/ogg", voice(), duration_s=2)
        await app.dispatcher.handle_inbound(ch.message("", attachments=[note]))
        (reply,) = await ch.wait_for("send")
    assert "couldn't transcribe your voice message" in reply.text
    assert "decoder" not in reply.text and llm.requests == []


async def test_send_file_sends_a_workspace_file_and_nothing_outside_it(
    make_config: Callable[..., Config], llm: FakeOpenAI, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "report.csv").write_text("a,b\n1,2\n")
    (tmp_path / "secret.txt").write_text("keys")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    config = make_config(tools={"builtins": ["send_file"], "workspace": str(workspace)})
    llm.script(
        tool_call("send_file", {"path": "../secret.txt"}),
        tool_call("send_file", {"path": "link.txt"}),
        tool_call("send_file", {"path": "report.csv"}),
        text("Sent the report."),
    )
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("send me the report"))
        await ch.wait_for("send")
    (sent,) = [s.file for s in ch.log if s.kind == "file"]
    assert sent is not None
    assert (sent.name, sent.mime_type, sent.data) == ("report.csv", "text/csv", b"a,b\n1,2\n")
    results = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "'..' would leave the workspace" in results[0]
    assert "a symbolic link leads outside the workspace" in results[1]
    assert results[2].startswith("report.csv goes to the user.\n[Sent to the user as files:")
    assert [s.kind for s in ch.log if s.kind in ("file", "send")] == ["file", "send"]


async def test_chat_saves_a_sent_file_and_prints_its_path(
    tmp_path: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "chart.png").write_bytes(png("console"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the chat saves files
    cfg = write_config(tmp_path, llm, f'builtins = ["send_file"]\nworkspace = "{workspace}"')
    llm.script(tool_call("send_file", {"path": "chart.png"}), text("There you go."))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"the chart please\n")
    code, out, err = await finish(proc, io)
    assert code == 0, err
    saved, answer = out.splitlines()
    assert saved.startswith("📎 chart.png saved to ") and answer == "There you go."
    path = Path(saved.removeprefix("📎 chart.png saved to "))
    assert path.parent.parent == tmp_path
    assert await asyncio.to_thread(path.read_bytes) == png("console")


def test_a_file_needs_content_or_a_path() -> None:
    assert File(path=Path("/srv/out/chart.png")).name == "chart.png"
    assert File(path=Path("x.csv")).mime_type == "text/csv"
    with pytest.raises(ValueError, match="exactly one of data or path"):
        File(name="x.png")
    with pytest.raises(ValueError, match="needs a name"):
        File(data=b"x")


async def test_the_inbox_keeps_what_came_with_a_message_by_reference(tmp_path: Path) -> None:
    old = tmp_path / "v3.db"
    with sqlite3.connect(old) as db:  # a store of the schema before media: its rows still read
        for script in MIGRATIONS[:3]:
            db.executescript(script)
        db.execute(
            "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, "
            "is_private, received_at) VALUES ('t', 'c1', 'm1', 'u1', 'Ann', 'hi', 1, 0)"
        )
        db.execute("PRAGMA user_version = 3")
    attachments = (
        Attachment(MediaKind.IMAGE, "p.png", "image/png", 1234, "file-id-1"),
        Attachment(MediaKind.AUDIO, "v.ogg", "audio/ogg", None, "https://cdn/v.ogg", 3.5),
    )
    msg = InboundMessage("t", "c1", "u1", "Ann", "look", "m2", attachments=attachments)
    async with SqliteStore(old) as store:
        await store.inbox.accept(msg)
        rows = await store.inbox.rows(InboxState.QUEUED, "t", "c1")
    assert [(r.text, r.attachments) for r in rows] == [("hi", ()), ("look", attachments)]


async def test_doctor_says_whether_the_model_is_shown_pictures_and_voice_is_on(
    make_config: Callable[..., Config], capsys: pytest.CaptureFixture[str]
) -> None:
    await run_doctor(make_config())
    off = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("media"))
    assert "pictures off ([llm] vision = false" in off and "voice off" in off
    await run_doctor(make_config(llm={"vision": True}, media={"transcription_model": "whisper-1"}))
    on = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("media"))
    assert on == (
        "media: OK - pictures on, up to 10 MB, 4 a turn; text files up to 200 KB; "
        "voice transcribed by whisper-1 (up to 300 s)"
    )

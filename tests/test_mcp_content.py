"""MCP content and client capabilities through the daemon (App, store, dispatcher, the fake
LLM scripted with tool calls) against the reference servers from npm: server-everything's
picture reaches the model as a picture, its resource links are read with read_resource, content
for the user reaches the chat, its sampling request is answered by relaybot's model and charged
to the requester (and refused when the server's `sampling` is off), and the filesystem server
started without a folder works in the workspace relaybot announces as its root."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot._reload import Reloader
from bot.app import App
from bot.config import Config
from engine import Action, MessageRef, Reply
from engine.chat._access._limits import today
from tests.fakes.openai_server import FakeOpenAI, images_in, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.prerequisites import mcp_server
from tests.test_cli import write_config
from tests.test_console import CTRL_D, Terminal
from tests.test_media import running
from tools import ToolContext
from tools.config import McpServerConfig
from tools.mcp import McpClient, McpManager, Question, Sampling, tool_name
from tools.registry import ToolRegistry

pytestmark = pytest.mark.needs("mcp-servers")

PNG = b"\x89PNG\r\n\x1a\n"
FAKE = str(Path(__file__).parent / "fakes" / "mcp_server.py")


def everything(**options: Any) -> dict[str, Any]:
    command = mcp_server("mcp-server-everything")
    return {"name": "everything", "command": command[0], "args": ["stdio"], **options}


async def turn(app: App, ch: RecordingChannel, said: str) -> str:
    before = len(ch.texts(chat_id="c"))
    await app.dispatcher.handle_inbound(ch.message(said, chat_id="c", user_id="u1"))
    await ch.wait_for("send", before + 1, chat_id="c", timeout=30)
    await app.dispatcher.wait_idle("test", "c")
    return ch.texts(chat_id="c")[-1]


def tool_text(body: dict[str, Any]) -> str:
    """The newest tool message's text in a chat request."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")


async def test_a_tools_picture_reaches_a_vision_model_as_a_picture(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(llm={"vision": True}, mcp={"servers": [everything()]})
    llm.script(tool_call("everything__get-tiny-image", {}), text("It is the MCP logo."))
    async with running(config) as (app, ch):
        assert await turn(app, ch, "show me the logo") == "It is the MCP logo."
    pictures = images_in(llm.requests[1])
    assert [mime for mime, _ in pictures] == ["image/png"]
    assert pictures[0][1].startswith(PNG)  # the server's bytes, as a picture
    assert "picture-2.png (image/png" in tool_text(llm.requests[1])
    assert not images_in(llm.requests[0])


async def test_without_vision_the_model_gets_a_note_not_the_picture(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.vision = False  # the fake refuses any picture, as a model that cannot see
    config = make_config(mcp={"servers": [everything()]})
    llm.script(tool_call("everything__get-tiny-image", {}), text("A picture I cannot see."))
    async with running(config) as (app, ch):
        assert await turn(app, ch, "show me the logo") == "A picture I cannot see."
    assert not images_in(llm.requests[1])
    assert "[picture picture-2.png (image/png" in tool_text(llm.requests[1])


async def test_content_for_the_user_reaches_the_chat(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(mcp={"servers": [everything()]})
    args = {"messageType": "success", "includeImage": True}
    llm.script(tool_call("everything__get-annotated-message", args), text("Done."))
    async with running(config) as (app, ch):
        assert await turn(app, ch, "annotated, please") == "Done."
        sent = [s for s in ch.log if s.kind == "file"]
        shown = ch.texts(chat_id="c")
    assert len(sent) == 1 and sent[0].file is not None
    assert sent[0].file.mime_type == "image/png" and sent[0].file.data.startswith(PNG)
    assert "Operation completed successfully" in shown  # text meant for the user alone
    said = tool_text(llm.requests[1])
    assert "[Shown to the user: Operation completed successfully]" in said
    assert "Sent to the user as files: picture-2.png" in said


async def test_a_resource_link_is_read_with_read_resource(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(mcp={"servers": [everything()]})
    uri = "demo://resource/dynamic/text/2"
    llm.script(
        tool_call("everything__get-resource-links", {"count": 2}),
        tool_call("everything__read_resource", {"uri": "file:///etc/passwd"}),
        tool_call("everything__read_resource", {"uri": uri}),
        text("Read it."),
    )
    async with running(config) as (app, ch):
        assert await turn(app, ch, "read the first resource") == "Read it."
    linked = tool_text(llm.requests[1])
    assert f"[resource {uri} (Text Resource 2, text/plain): read it with " in linked
    refused = tool_text(llm.requests[2])
    assert "'file:///etc/passwd' is not a resource server everything listed or linked" in refused
    read = tool_text(llm.requests[3])
    assert read.startswith(f"[resource {uri}]\nResource 2: This is a plaintext resource")


async def test_a_binary_resource_is_sent_to_the_chat_as_a_file(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(mcp={"servers": [everything()]})
    uri = "demo://resource/dynamic/blob/1"
    llm.script(
        tool_call("everything__get-resource-links", {"count": 1}),
        tool_call("everything__read_resource", {"uri": uri}),
        text("Sent."),
    )
    async with running(config) as (app, ch):
        assert await turn(app, ch, "the blob, please") == "Sent."
        sent = [s for s in ch.log if s.kind == "file"]
    assert [s.text for s in sent] == ["1.txt"]
    assert sent[0].file is not None and b"Resource 1" in sent[0].file.data
    assert "sent as 1.txt" in tool_text(llm.requests[2])


async def test_sampling_uses_relaybots_model_and_charges_the_requester(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    server = everything(sampling=True, trusted_tools=["trigger-sampling-request"])
    config = make_config(mcp={"servers": [server]})
    llm.script(
        tool_call("everything__trigger-sampling-request", {"prompt": "a haiku", "maxTokens": 50}),
        text("Autumn wind, relay"),  # the sample the server asked for
        text("The server got its haiku."),
    )
    async with running(config) as (app, ch):
        assert await turn(app, ch, "ask the server to sample") == "The server got its haiku."
        spent = await app.store.spend.of_user("test", "u1", today())
    asked = llm.requests[1]
    assert asked["messages"][-1]["content"] == "Resource trigger-sampling-request context: a haiku"
    assert asked["max_tokens"] == 50 or asked.get("max_completion_tokens") == 50
    assert '"text": "Autumn wind, relay"' in tool_text(llm.requests[2])
    assert spent.requests == 3  # the turn's two requests and the sample, all the user's


async def test_sampling_is_refused_when_the_server_may_not(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    server = everything(trusted_tools=["trigger-sampling-request"])  # sampling off: the default
    config = make_config(mcp={"servers": [server]})
    llm.script(
        tool_call("everything__trigger-sampling-request", {"prompt": "a haiku", "maxTokens": 50}),
        text("The server may not sample."),
    )
    async with running(config) as (app, ch):
        assert await turn(app, ch, "ask the server to sample") == "The server may not sample."
        spent = await app.store.spend.of_user("test", "u1", today())
    assert "relaybot does not sample for server everything: sampling is off." in tool_text(
        llm.requests[1]
    )
    assert spent.requests == 2


async def test_the_filesystem_server_works_in_the_workspace_announced_as_root(
    make_config: Callable[..., Config], llm: FakeOpenAI, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("tea at five")
    command = mcp_server("mcp-server-filesystem")
    files = {"name": "files", "command": command[0]}  # no folder given: it asks for roots
    config = make_config(tools={"workspace": str(workspace)}, mcp={"servers": [files]})
    llm.script(
        tool_call("files__read_text_file", {"path": str(workspace / "notes.txt")}),
        text("Tea at five."),
    )
    async with running(config) as (app, ch):
        assert await turn(app, ch, "what do my notes say?") == "Tea at five."
    assert tool_text(llm.requests[1]) == "tea at five"


async def test_a_servers_question_reaches_the_user_as_buttons_and_the_answer_returns(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    fake = {"name": "fake", "command": sys.executable, "args": [FAKE]}
    config = make_config(mcp={"servers": [fake]})
    llm.script(tool_call("fake__pick_tea", {}), text("Oolong it is."))
    async with running(config) as (app, ch):
        app.dispatcher.settings.allowed_users["test"].add("u2")
        await app.dispatcher.handle_inbound(ch.message("make tea", chat_id="c", user_id="u1"))
        [asked] = await ch.wait_for("private", timeout=30)
        assert asked.chat_id == "u1" and asked.text == "fake: Which tea shall I brew?"
        labels = [b.label for b in asked.buttons]
        assert labels == ["green", "black", "oolong", "Decline"]
        oolong = asked.buttons[2].action
        other = await app.dispatcher.handle_action(Action("test", "u2", "u2", oolong))
        assert other.text == "Only the person who was asked can answer this."
        reply = await app.dispatcher.handle_action(Action("test", "u1", "u1", oolong))
        assert reply.text == "Answered: oolong"
        await ch.wait_for("send", chat_id="c", timeout=30)
    assert tool_text(llm.requests[1]) == "brewing oolong"


async def test_a_longer_form_is_answered_by_a_reply(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    asks = everything(trusted_tools=["trigger-elicitation-request"], call_timeout_s=30)
    config = make_config(mcp={"servers": [asks]})
    llm.script(tool_call("everything__trigger-elicitation-request", {}), text("Signed up."))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("sign me up", chat_id="c", user_id="u1"))
        [form] = await ch.wait_for("send", chat_id="c", timeout=30)
        assert "Reply with one line per field" in form.text
        assert "name: text — Your full, legal name\n" in form.text
        assert "check: yes or no — Agree to the terms and conditions (optional)" in form.text
        wrong = ch.message("check: maybe", chat_id="c", user_id="u1")
        await app.dispatcher.handle_inbound(wrong)
        [_, retry] = await ch.wait_for("send", 2, chat_id="c")
        assert retry.text.startswith("That did not fit the form: check takes yes or no.")
        said = "name: Ada Lovelace\ncheck: yes\nuntitledSingleSelectEnum: Joey"
        await app.dispatcher.handle_inbound(ch.message(said, chat_id="c", user_id="u1"))
        await ch.wait_for("send", 3, chat_id="c", timeout=30)
        await app.dispatcher.wait_idle("test", "c")
    result = tool_text(llm.requests[1])
    assert "User provided the requested information" in result
    assert "Ada Lovelace" in result and "Joey" in result
    # the answers were not messages of the conversation: the model never saw them
    assert not any(
        "Ada Lovelace" in str(m.get("content"))
        for m in llm.requests[1]["messages"][:-1]
        if m["role"] == "user"
    )


async def test_a_question_left_unanswered_is_declined_before_the_call_times_out(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    fake = {"name": "fake", "command": sys.executable, "args": [FAKE], "call_timeout_s": 6}
    config = make_config(mcp={"servers": [fake]})  # the user has 6 - 5 = 1 s
    llm.script(tool_call("fake__pick_tea", {}), text("No answer, no tea."))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("make tea", chat_id="c", user_id="u1"))
        await ch.wait_for("private", timeout=30)
        await ch.wait_for("send", chat_id="c", timeout=30)
    assert tool_text(llm.requests[1]) == "no tea: decline"


async def test_a_page_to_open_is_shown_with_its_link_and_go_on_accepts(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    server = everything(trusted_tools=["trigger-url-elicitation"], call_timeout_s=30)
    config = make_config(mcp={"servers": [server]})
    page = {"url": "https://example.com/signin", "message": "Sign in to go on."}
    llm.script(tool_call("everything__trigger-url-elicitation", page), text("Signed in."))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("sign in", chat_id="c", user_id="u1"))
        [asked] = await ch.wait_for("private", timeout=30)
        assert asked.text == "everything: Sign in to go on.\n\nhttps://example.com/signin"
        assert [b.label for b in asked.buttons] == ["Go on", "Decline"]
        await app.dispatcher.handle_action(Action("test", "u1", "u1", asked.buttons[0].action))
        await ch.wait_for("send", chat_id="c", timeout=30)
    assert "User completed the URL elicitation flow" in tool_text(llm.requests[1])


# Every tool server-everything has, and whether relaybot offers it (None) or why not. The
# server itself hides a tool whose client capability is missing; relaybot announces roots,
# sampling and elicitation (form and URL), not MCP tasks of its own (the server's requests run
# as tasks by relaybot); the server's own task, simulate-research-query, is a background job.
EVERYTHING_TOOLS: dict[str, str | None] = {
    "echo": None,
    "get-annotated-message": None,  # content for the user goes to the chat
    "get-env": None,  # the server's environment is only what its config gives it
    "get-resource-links": None,  # the links are read with everything__read_resource
    "get-resource-reference": None,
    "get-structured-content": None,
    "get-sum": None,
    "get-tiny-image": None,  # a picture for a vision model
    "gzip-file-as-resource": None,  # its resource is read back, sent as a file
    "toggle-simulated-logging": None,
    "toggle-subscriber-updates": None,
    "trigger-long-running-operation": None,
    "get-roots-list": None,  # roots: the workspace
    "trigger-elicitation-request": None,  # a short form the user answers by replying
    "trigger-url-elicitation": None,  # a link with Go on / Decline
    "trigger-sampling-request": None,  # answered only where `sampling = true`
    "simulate-research-query": None,  # an MCP task: a background job (tests/test_mcp_tasks.py)
    "trigger-sampling-request-async": "needs MCP tasks, which relaybot does not announce",
    "trigger-elicitation-request-async": "needs MCP tasks, which relaybot does not announce",
}


async def test_every_tool_of_server_everything_is_offered_or_left_out_for_a_reason(
    tmp_path: Path,
) -> None:
    async def sample(ctx: ToolContext, asked: Sampling) -> tuple[str, str]:
        return "", "none"

    async def ask(ctx: ToolContext, question: Question) -> dict[str, Any] | None:
        return None

    client = McpClient(roots=lambda: [tmp_path], sample=sample, ask=ask)
    config = McpServerConfig(**everything())
    registry = ToolRegistry()
    async with McpManager([config], registry, client=client) as mcp:
        offered = {info.name for info in mcp.tools()}
    expected = {tool_name("everything", t) for t, why in EVERYTHING_TOOLS.items() if why is None}
    assert offered == expected | {"everything__read_resource"}


class NoPrivateChat(RecordingChannel):
    """A platform where the user never opened a private chat with the bot."""

    async def send_private(self, user_id: str, reply: Reply) -> MessageRef:
        raise PermissionError("Forbidden: bot can't initiate conversation with a user")


async def test_without_a_private_chat_the_question_is_a_short_form_in_the_chat(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    fake = {"name": "fake", "command": sys.executable, "args": [FAKE]}
    config = make_config(mcp={"servers": [fake]})
    llm.script(tool_call("fake__pick_tea", {}), text("Green tea."))
    ch = NoPrivateChat()
    async with App(config, channels=[ch]) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(ch.message("tea?", chat_id="g", is_private=False))
        [form] = await ch.wait_for("send", chat_id="g", timeout=30)
        assert form.text.startswith("fake: Which tea shall I brew?\n\nReply with one line")
        assert "tea: green | black | oolong" in form.text
        await app.dispatcher.handle_inbound(ch.message("tea: Green", chat_id="g", is_private=False))
        await ch.wait_for("send", 2, chat_id="g", timeout=30)
    assert tool_text(llm.requests[1]) == "brewing green"


async def test_a_reload_that_moves_the_workspace_gives_the_servers_the_new_root(
    make_config: Callable[..., Config], llm: FakeOpenAI, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    config = make_config(tools={"workspace": str(first)}, mcp={"servers": [everything()]})
    moved = make_config(tools={"workspace": str(second)}, mcp={"servers": [everything()]})
    llm.script(tool_call("everything__get-roots-list", {}), text("One root."))
    async with running(config) as (app, ch):
        await turn(app, ch, "roots?")
        assert await Reloader(app, None).apply(moved)
        app.dispatcher.settings.allowed_users["test"] = {"u1"}  # the test channel's, again
        llm.script(tool_call("everything__get-roots-list", {}), text("Another root."))
        assert await turn(app, ch, "and now?") == "Another root."
    assert f"URI: {first.as_uri()}" in tool_text(llm.requests[1])
    assert f"URI: {second.as_uri()}" in tool_text(llm.requests[3])
    assert first.as_uri() not in tool_text(llm.requests[3])


async def test_on_the_terminal_a_form_is_answered_while_the_call_waits(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    fake = f'builtins = []\n\n[[mcp.servers]]\nname = "fake"\ncommand = "{sys.executable}"\n'
    cfg = write_config(tmp_path, llm, fake + f'args = ["{FAKE}"]\ncall_timeout_s = 60')
    llm.script(tool_call("fake__pick_tea", {}), text("Black tea, brewing."))
    term = Terminal()
    env = {**os.environ, "TERM": "xterm", "RELAYBOT_TEST_KEY": "sk-test-key-123456"}
    command = (sys.executable, "-m", "bot", "chat", "-c", str(cfg))
    io = {"stdin": term.child, "stdout": term.child, "stderr": term.child, "env": env}
    proc = await asyncio.create_subprocess_exec(*command, **io)
    try:
        await term.expect(b"you> ")
        term.type(b"tea please\r")
        await term.expect(b"fake: Which tea shall I brew?")
        await term.expect(b"tea: green | black | oolong")
        term.type(b"tea: black\r")
        await term.expect(b"Black tea, brewing.")
        await term.expect(b"you> ")
        term.type(CTRL_D)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        term.close()
    assert tool_text(llm.requests[1]) == "brewing black"

"""The client side relaybot offers MCP servers (tools/mcp/_client.py), built from the daemon's
parts: the workspace as the roots; sampling with the model in force, charged to the user whose
tool call the server asked during (engine/chat/_access/_spend.py), as their turn would be; and its
questions put to that user (engine/chat/_confirmations/_questions.py); and a remote server's
OAuth sign-in (bot/_mcp_oauth.py).

Built here, at the top, because the tools package cannot import the engine; each hook reads
the App's parts when a server asks, so a reload's model and prices are the ones used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from bot._mcp_oauth import OAuthHost, oauth_hooks
from bot.config import Config
from engine.loop import ConversationKey
from engine.models import Message, ModelRequest

if TYPE_CHECKING:
    from engine.chat import Dispatcher
    from tools import ToolContext
    from tools.mcp import McpClient, Question, Sampling

SAMPLING_SYSTEM = "You answer a request made by a tool on the user's behalf. Be brief."
MAX_SAMPLING_TOKENS = 4_096  # whatever the server asks for


class Daemon(OAuthHost, Protocol):
    """What the hooks read of the daemon, when they run (a reload keeps its dispatcher)."""

    @property
    def dispatcher(self) -> Dispatcher: ...


def mcp_client(config: Config, app: Daemon | None = None) -> McpClient:
    """The hooks for `config`'s servers; sampling only with an `app` (the daemon)."""
    from tools.mcp import McpClient

    workspace = config.tools.workspace
    roots = (workspace.expanduser().resolve(),) if workspace is not None else ()
    if app is None:
        return McpClient(roots=lambda: roots)

    async def sample(ctx: ToolContext, asked: Sampling) -> tuple[str, str]:
        engine = app.dispatcher
        model = engine.live.tooling.loop.model
        messages = [
            Message.user(text) if role == "user" else Message.assistant(text)
            for role, text in asked.messages
        ]
        request = ModelRequest(
            asked.system or SAMPLING_SYSTEM,
            messages,
            max_output_tokens=min(asked.max_tokens, MAX_SAMPLING_TOKENS),
        )
        meter = engine.turns.meter
        if meter is None:
            reply = await model.complete(request)
        else:
            with meter.charging(ctx.channel, ctx.chat_id, ctx.user_id):
                reply = await model.complete(request)
        return reply.text or "", reply.model or model.name

    async def ask(ctx: ToolContext, question: Question) -> dict[str, Any] | None:
        key = ConversationKey(ctx.channel, ctx.chat_id)
        said = f"{question.server}: {question.message}"
        questions = app.dispatcher.questions
        if questions is None:
            return None
        return await questions.ask(
            key, ctx.user_id, said, question.schema, timeout_s=question.timeout_s
        )

    oauth = oauth_hooks(config, app)  # bot/_mcp_oauth.py
    return McpClient(roots=lambda: roots, sample=sample, ask=ask, oauth=oauth)

"""What relaybot offers MCP servers as a client, and for whom.

- roots: the workspace folder (`[tools] workspace`), so a server such as the filesystem one
  works in it without being given a folder;
- sampling (`sampling/createMessage`): relaybot's own model answers, charged to the user whose
  tool call the request came during; only for a server with `sampling = true` (off by default:
  a server could otherwise spend the owner's money), refused with an error otherwise;
- elicitation (`elicitation/create`): the question is put to that same user, in the chat the
  call was made in; no answer in time declines. A URL-mode question (a page the user should
  open, such as a sign-in) is shown with its link and answered "go on" or "decline".

A server's request carries nothing that ties it to one of relaybot's calls, so it is taken to
come from the calls in flight on that server: when they are all one user's in one chat, that
user is the requester; otherwise (no call, or several people's) the request is refused.

The daemon gives the hooks (bot/ builds them from the engine: this package cannot import it);
a capability without its hook is not announced, so a server does not wait for what cannot come.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp.client.session import ClientRequestContext

from tools._base import ToolContext
from tools.config import McpServerConfig
from tools.mcp._oauth import OAuth
from tools.mcp._transport import describe

log = logging.getLogger("tools.mcp")

NO_DAEMON = "an OAuth sign-in needs the running daemon (relaybot run)"
ANSWER_MARGIN_S = 5.0  # a question is declined this long before the call it came in times out


@dataclass(frozen=True, slots=True)
class Sampling:
    """What a server asks relaybot's model: a conversation of plain text turns."""

    server: str
    system: str
    messages: tuple[tuple[str, str], ...]  # (role "user" or "assistant", text)
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Question:
    """What a server asks the user: a message and the answer's flat JSON Schema."""

    server: str
    message: str
    schema: dict[str, Any]
    timeout_s: float  # the user's time: within the call's, so a decline reaches the server


Sampler = Callable[[ToolContext, Sampling], Awaitable[tuple[str, str]]]  # (text, model name)
Asker = Callable[[ToolContext, Question], Awaitable[dict[str, Any] | None]]  # None: declined


@dataclass(frozen=True, slots=True)
class McpClient:
    """The client side relaybot offers every server (each server's config decides sampling)."""

    roots: Callable[[], Sequence[Path]] = lambda: ()  # absolute folders
    sample: Sampler | None = None
    ask: Asker | None = None
    oauth: OAuth = field(default_factory=lambda: OAuth(missing=NO_DAEMON))  # tools/mcp/_oauth.py


@dataclass(slots=True)
class Callers:
    """The contexts of one server's calls in flight, by a token of each call."""

    _calls: dict[int, ToolContext] = field(default_factory=dict)
    _tokens: itertools.count[int] = field(default_factory=itertools.count)

    def enter(self, ctx: ToolContext) -> int:
        token = next(self._tokens)
        self._calls[token] = ctx
        return token

    def leave(self, token: int) -> None:
        self._calls.pop(token, None)

    def requester(self) -> ToolContext | None:
        """The one user (in one chat) all calls in flight are for; None if not exactly one."""
        whose = {(c.channel, c.chat_id, c.user_id): c for c in self._calls.values()}
        return next(iter(whose.values())) if len(whose) == 1 else None


class Answers:
    """One server's requests to relaybot, answered (the SDK's callbacks)."""

    def __init__(self, config: McpServerConfig, client: McpClient) -> None:
        self.config = config
        self.client = client
        self.callers = Callers()

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return root_list(self.client.roots())

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        name, sample = self.config.name, self.client.sample
        if not self.config.sampling or sample is None:
            log.info("MCP server %s asked for a sample; refused (sampling is off)", name)
            return refusal(f"relaybot does not sample for server {name}: sampling is off.")
        ctx = self.callers.requester()
        if ctx is None:
            return refusal("relaybot samples only during one user's tool call.")
        try:
            text, model = await sample(ctx, sampling_request(name, params))
        except ValueError as exc:
            return refusal(str(exc))
        except Exception as exc:
            log.warning("MCP server %s: sampling failed: %s", name, describe(exc))
            return refusal("relaybot's model could not answer.")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=model,
            stop_reason="endTurn",
        )

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        ctx, ask = self.callers.requester(), self.client.ask
        if ask is None:
            return refusal("relaybot asks users no questions here.")
        if ctx is None:
            return refusal("relaybot asks a user only during that user's tool call.")
        timeout_s = max(1.0, self.config.call_timeout_s - ANSWER_MARGIN_S)
        message, schema = params.message, getattr(params, "requested_schema", None)
        if isinstance(params, types.ElicitRequestURLParams):  # a page to open: go on or not
            message, schema = f"{message}\n\n{params.url}", {"type": "object", "properties": {}}
        question = Question(self.config.name, message, schema or {}, timeout_s)
        try:
            answer = await ask(ctx, question)
        except Exception as exc:
            log.warning("MCP server %s: a question failed: %s", self.config.name, describe(exc))
            return types.ElicitResult(action="cancel")
        if answer is None:
            return types.ElicitResult(action="decline")
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")  # the user goes on to the page
        return types.ElicitResult(action="accept", content=answer)


def root_list(folders: Sequence[Path]) -> types.ListRootsResult:
    return types.ListRootsResult(
        roots=[types.Root(uri=p.as_uri(), name=p.name or str(p)) for p in folders]
    )


def sampling_request(server: str, params: types.CreateMessageRequestParams) -> Sampling:
    """The server's request as plain text turns (pictures and tool use are not taken)."""
    turns = []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        text = "\n".join(b.text for b in blocks if isinstance(b, types.TextContent))
        if len(blocks) != sum(isinstance(b, types.TextContent) for b in blocks):
            raise ValueError("only text messages can be sampled")
        turns.append((message.role, text))
    return Sampling(server, params.system_prompt or "", tuple(turns), params.max_tokens)


def refusal(message: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)

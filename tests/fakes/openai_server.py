"""A fake OpenAI-compatible Chat Completions server for tests and benchmarks.

It is a real HTTP server (aiohttp) on 127.0.0.1 with an OS-chosen port, so the
real ``openai`` SDK can talk to it::

    from tests.fakes.openai_server import FakeOpenAI, error, hold, text, tool_call

    async with FakeOpenAI() as llm:
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0)
        llm.script(tool_call("add", {"a": 1, "b": 2}), text("3"))  # consumed in arrival order
        ...
        assert llm.requests[0]["messages"][-1]["role"] == "user"  # recorded JSON bodies

Replies (build them with the module-level helpers):

* ``text(content)`` - an assistant message (``reasoning=`` adds an open model's
  ``reasoning_content``, streamed before the content, counted in ``reasoning_tokens``);
  ``tool_call(name, args)`` / ``tool_calls([(name, args), ...])`` - tool calls (``args`` a
  dict, JSON-encoded, or a str sent verbatim, e.g. invalid JSON); ids default to ``call_1``,
  ``call_2``, ... unique over the server's life.
* ``error(status, message)`` - an HTTP error with an OpenAI-style JSON body (also for
  stream requests: the status is sent before any event).
* ``hold(event, then)`` - the request waits until ``event`` is set, then ``then`` is
  sent; ``hold(..., started=ev)`` sets ``ev`` when the request reaches the hold.
* any callable ``fn(body) -> reply`` (sync or async) - decided per request; may be
  scripted or used as ``llm.default``.

When the script is empty ``llm.default`` answers (initially ``echo``, which replies
``text("echo: <last user message>")``). ``llm.delay_s`` adds latency per request.
A request is appended to ``llm.requests`` before its reply is chosen, so tests can
``await llm.wait_requests(n)`` and then inspect it while it is held.

Requests with ``"stream": true`` get Server-Sent Events shaped like OpenAI's: a role
chunk, content in small deltas, tool calls split per index (first delta carries id,
type, name and empty arguments, later ones argument fragments), a final chunk with
``finish_reason``, an optional usage chunk (``stream_options.include_usage``), then
``data: [DONE]``.

Faults (opt-in, for crash and soak tests): ``llm.faults = LLMFaults(rate=0.3, seed=1)`` makes
that share of chat requests fail, whatever was scripted (the scripted reply waits for the next
request): 500, 429 with ``retry-after``, a stall past the client's timeout, or a malformed tool
call (arguments that are not JSON, or a tool that was not offered). ``llm.faults.injected``
counts them by kind.

Also served: ``GET /v1/models`` and ``GET /v1/models/{id}`` (``llm.models``).
Every request's ``Authorization`` header goes to ``llm.auth_headers``; if
``llm.api_key`` is set, other keys get 401.

Images: user content parts ``{"type": "image_url", "image_url": {"url": ...}}`` are checked
as OpenAI checks them (an http(s) URL, or a base64 data URL of a JPEG, PNG, GIF or WebP
whose bytes are one); a bad one gets 400, and so does any image while ``llm.vision`` is
False (a model without vision). ``images_in(body)`` gives the (MIME type, bytes) sent.

Speech (``/v1/audio/speech``) and pictures (``/v1/images/generations``): see
tests/fakes/openai_media.py.

Voice: ``POST /v1/audio/transcriptions`` (multipart, as the SDK sends it) is recorded in
``llm.transcriptions`` (model, file name, content type, bytes) and answered with the next
of ``llm.script_transcription(text_or_error, ...)``, else ``"transcript of <file name>"``.

Tokens are counted by the fake's own tokenizer (:func:`count_tokens`: every run of up to six
word characters and every punctuation mark is a token, plus a few per message, tool
definitions included), which is deliberately not relaybot's estimate. ``usage.prompt_tokens``
reports that count, ``llm.prompt_counts`` records it per request, and with ``context_window``
set a request whose count (plus its ``max_tokens``) exceeds the window is refused the way the
server of ``server_kind`` refuses it: OpenAI's 400 ``context_length_exceeded`` body ("openai",
"ollama"), vLLM's or llama.cpp's own wording; ``llm.refused`` counts them. ``server_kind`` also
says where the window is told: ``max_model_len`` in ``/v1/models`` (vllm), ``/props`` (llama.cpp),
``/api/show`` with ``num_ctx`` (ollama); the others answer 404 there.

Strict chat templates (``strict_template=True``): a request is refused the way llama.cpp's server
refuses what Gemma's, Mistral's and other strict jinja templates reject (:func:`template_error`):
roles that do not alternate user/assistant after the optional system message (a tool result
counts as a user turn, as llama.cpp renders it for a template without tools; consecutive results
as one), a system message anywhere but first, a message with empty content and no tool calls.
The status is ``template_status`` (400, as llama.cpp answers), the body llama.cpp's;
``llm.template_refusals`` counts them.

A request without tools whose system message opens by asking for a summary is answered by
:func:`summarize` (it does not consume the script) and recorded in ``llm.summary_requests``
as well as ``llm.requests``.

OpenAI's Responses API (``POST /v1/responses``, answering as a reasoning model and refusing what
the real API refuses): :class:`tests.fakes.openai_responses.FakeResponses`, this server with
that endpoint added.

Standalone (for benchmarks in another process)::

    python -m tests.fakes.openai_server --port 8001 [--delay 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import dataclasses
import enum
import inspect
import itertools
import json
import random
import re
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeAlias

from aiohttp import web

from tests.fakes.openai_media import MediaEndpoints

__all__ = [
    "ErrorReply",
    "FakeOpenAI",
    "Fault",
    "HoldReply",
    "LLMFaults",
    "Reply",
    "ReplyFn",
    "ReplyLike",
    "TextReply",
    "ToolCallSpec",
    "ToolCallsReply",
    "Transcription",
    "count_tokens",
    "echo",
    "error",
    "hold",
    "images_in",
    "summarize",
    "template_error",
    "text",
    "tool_call",
    "tool_calls",
]


# --------------------------------------------------------------------------- replies


class Reply:
    """Base class of the reply values."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class TextReply(Reply):
    content: str
    finish_reason: str = "stop"
    usage: Mapping[str, Any] | None = None
    reasoning: str | None = None  # sent as ``reasoning_content`` (an open model's thoughts)


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    name: str
    arguments: str  # already encoded, sent verbatim
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallsReply(Reply):
    calls: tuple[ToolCallSpec, ...]
    content: str | None = None
    finish_reason: str = "tool_calls"
    usage: Mapping[str, Any] | None = None
    reasoning: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorReply(Reply):
    status: int
    message: str
    type: str
    code: str | None = None
    headers: Mapping[str, str] | None = None


ReplyFn: TypeAlias = Callable[[dict[str, Any]], "ReplyLike | Awaitable[ReplyLike]"]
ReplyLike: TypeAlias = Reply | ReplyFn


@dataclass(frozen=True, slots=True)
class HoldReply(Reply):
    event: asyncio.Event
    then: ReplyLike
    started: asyncio.Event | None = None


def text(
    content: str,
    *,
    finish_reason: str = "stop",
    usage: Mapping[str, Any] | None = None,
    reasoning: str | None = None,
) -> TextReply:
    """An assistant text message (with `reasoning`: its ``reasoning_content``)."""
    return TextReply(content, finish_reason, usage, reasoning)


def _encode_args(arguments: Mapping[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    id: str | None = None,
    content: str | None = None,
    finish_reason: str = "tool_calls",
    usage: Mapping[str, Any] | None = None,
    reasoning: str | None = None,
) -> ToolCallsReply:
    """One tool call. ``arguments``: a dict (JSON-encoded) or a str sent verbatim."""
    return ToolCallsReply(
        (ToolCallSpec(name, _encode_args(arguments), id),), content, finish_reason, usage, reasoning
    )


def tool_calls(
    calls: Iterable[tuple[str, Mapping[str, Any] | str] | tuple[str, Mapping[str, Any] | str, str]],
    content: str | None = None,
    finish_reason: str = "tool_calls",
    *,
    usage: Mapping[str, Any] | None = None,
) -> ToolCallsReply:
    """Several tool calls in one reply: ``[(name, args), ...]`` or ``(name, args, id)``."""
    specs = tuple(
        ToolCallSpec(c[0], _encode_args(c[1]), c[2] if len(c) > 2 else None)  # type: ignore[misc]
        for c in calls
    )
    return ToolCallsReply(specs, content, finish_reason, usage)


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
}


def error(
    status: int,
    message: str = "The fake server returned an error.",
    *,
    type: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ErrorReply:
    """An HTTP error with an OpenAI-style body ``{"error": {message, type, param, code}}``.

    ``headers`` are added to the response (e.g. ``{"retry-after": "0"}``).
    """
    default_type, default_code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return ErrorReply(status, message, type or default_type, code or default_code, headers)


def hold(
    event: asyncio.Event, then: ReplyLike, *, started: asyncio.Event | None = None
) -> HoldReply:
    """Wait until ``event`` is set, then answer with ``then``.

    ``started`` (optional) is set when a request reaches this hold.
    """
    return HoldReply(event, then, started)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


@dataclass(frozen=True, slots=True)
class Transcription:
    """One /audio/transcriptions request, as received."""

    model: str
    filename: str
    content_type: str
    data: bytes


_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


def _decode_image_url(url: Any) -> tuple[str, bytes] | None:
    """(MIME type, bytes) of a data URL of a supported image; None for an http(s) URL. Raises
    ValueError with OpenAI's kind of message for anything else."""
    if not isinstance(url, str):
        raise ValueError("Invalid type for 'image_url.url': expected a string.")
    if url.startswith(("http://", "https://")):
        return None
    head, sep, data = url.partition(",")
    mime = head.removeprefix("data:").removesuffix(";base64")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise ValueError("Invalid image URL: expected an http(s) URL or a base64 data URL.")
    if mime not in _IMAGE_MAGIC:
        raise ValueError(f"Invalid MIME type {mime!r}: supported are png, jpeg, gif and webp.")
    try:
        content = base64.b64decode(data, validate=True)
    except ValueError:
        raise ValueError("Invalid base64 image data.") from None
    if not content.startswith(_IMAGE_MAGIC[mime]):
        raise ValueError("You uploaded an unsupported image. Please make sure it is valid.")
    return mime, content


def images_in(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The images of a chat request's messages, in order, as (MIME type, bytes)."""
    found = []
    for msg in body.get("messages") or ():
        for part in msg.get("content") if isinstance(msg.get("content"), list) else ():
            if part.get("type") == "image_url":
                decoded = _decode_image_url(part["image_url"]["url"])
                if decoded is not None:
                    found.append(decoded)
    return found


def _check_content(messages: list[Any], vision: bool) -> str | None:
    """Why OpenAI would refuse these messages' content parts (None: it would not)."""
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind != "image_url" or msg.get("role") != "user":
                return f"Invalid content part of type {kind!r} in a {msg.get('role')} message."
            if not vision:
                return "Invalid content type. image_url is only supported by certain models."
            try:
                _decode_image_url((part.get("image_url") or {}).get("url"))
            except ValueError as exc:
                return str(exc)
    return None


ALTERNATE = "Jinja Exception: Conversation roles must alternate user/assistant/user/assistant/..."
SYSTEM_FIRST = "Jinja Exception: System message must be at the beginning."
NO_CONTENT = (
    "Expected 'content' or 'tool_calls' (ref: https://github.com/ggml-org/llama.cpp/issues/8367 "
    "& https://github.com/ggml-org/llama.cpp/issues/12279)"
)


def template_error(messages: list[Any]) -> str | None:
    """What a strict chat template (as llama.cpp runs it) says of `messages`; None: accepted."""
    expected = "user"
    previous = None
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        blank = content is None or (isinstance(content, str) and not content.strip())
        if isinstance(content, list):
            blank = not any(
                isinstance(p, dict) and (p.get("type") != "text" or str(p.get("text", "")).strip())
                for p in content
            )
        if blank and not (role == "assistant" and msg.get("tool_calls")):
            return NO_CONTENT
        if role == "system":
            if i != 0:
                return SYSTEM_FIRST
            continue
        turn = "user" if role in ("user", "tool") else role
        if role == "tool" and previous == "tool":
            continue  # parallel results: one turn
        if turn != expected:
            return ALTERNATE
        expected = "assistant" if turn == "user" else "user"
        previous = role
    return None


def echo(body: dict[str, Any]) -> TextReply:
    """Default reply: ``text("echo: <content of the last user message>")``."""
    for msg in reversed(body.get("messages") or ()):
        if isinstance(msg, dict) and msg.get("role") == "user":
            return TextReply("echo: " + _message_text(msg.get("content")))
    return TextReply("echo: ")


_PIECE = re.compile(r"\w{1,6}|[^\w\s]")
_MESSAGE_TOKENS = 3
_IMAGE_TOKENS = 85


def _pieces(text: str) -> int:
    return len(_PIECE.findall(text))


def count_tokens(body: Mapping[str, Any]) -> int:
    """The fake's tokenizer: the prompt tokens of a chat request, tool definitions included."""
    n = _MESSAGE_TOKENS
    for msg in body.get("messages") or ():
        if not isinstance(msg, dict):
            continue
        n += _MESSAGE_TOKENS + _pieces(_message_text(msg.get("content")))
        content = msg.get("content")
        if isinstance(content, list):
            n += _IMAGE_TOKENS * sum(
                1 for p in content if isinstance(p, dict) and p.get("type") == "image_url"
            )
        for call in msg.get("tool_calls") or ():
            fn = call.get("function") or {}
            called = f"{fn.get('name') or ''} {fn.get('arguments') or ''}"
            n += _MESSAGE_TOKENS + _pieces(called)
    if body.get("tools"):
        n += _pieces(json.dumps(body["tools"]))
    return n


def is_summary_request(body: Mapping[str, Any]) -> bool:
    """No tools, and a system message whose first sentence asks for a summary."""
    messages = body.get("messages") or []
    if body.get("tools") or not messages or not isinstance(messages[0], dict):
        return False
    system = messages[0]
    first_sentence = _message_text(system.get("content")).split(". ", 1)[0]
    return system.get("role") == "system" and "summary" in first_sentence.lower()


def summarize(body: dict[str, Any], limit: int = 600) -> TextReply:
    """A summary as the fake writes one: the lines of the last user message that are neither
    headings (ending with a colon), placeholders in parentheses, nor what the assistant or a
    tool said, joined in order and cut to `limit` characters. So whatever the summary so far
    holds at its start stays there, and what users said is added while there is room."""
    ask = ""
    for msg in reversed(body.get("messages") or ()):
        if isinstance(msg, dict) and msg.get("role") == "user":
            ask = _message_text(msg.get("content"))
            break
    kept: list[str] = []
    for line in ask.splitlines():
        line = line.strip()
        if not line or line.endswith(":") or (line.startswith("(") and line.endswith(")")):
            continue
        if line.startswith(("Assistant", "Tool")) or line in kept:
            continue
        kept.append(line)
    return TextReply(" ".join(kept)[:limit] or "Nothing to note.")


# --------------------------------------------------------------------------- faults


class Fault(enum.StrEnum):
    SERVER_ERROR = "500"
    RATE_LIMITED = "429"
    TIMEOUT = "timeout"
    MALFORMED = "malformed tool call"


@dataclass(slots=True)
class LLMFaults:
    """A share (`rate`) of chat requests fails, the kind drawn from `kinds` with `seed`.

    A stall lasts `stall_s` (set it past the client's timeout) and then answers 504; a 429
    carries ``retry-after-ms: retry_after_ms``. `observer(body, fault or None)` is told of
    every request as it is drawn for.
    """

    rate: float
    seed: int = 0
    kinds: tuple[Fault, ...] = tuple(Fault)
    stall_s: float = 2.0
    retry_after_ms: int = 50
    injected: collections.Counter[Fault] = dataclasses.field(default_factory=collections.Counter)
    observer: Callable[[dict[str, Any], Fault | None], None] | None = None
    _rng: random.Random = dataclasses.field(init=False, repr=False)
    _n: itertools.count[int] = dataclasses.field(
        init=False, repr=False, default_factory=itertools.count
    )

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw(self, body: dict[str, Any]) -> ReplyLike | None:
        kind = self._rng.choice(self.kinds) if self._rng.random() < self.rate else None
        if self.observer is not None:
            self.observer(body, kind)
        if kind is None:
            return None
        self.injected[kind] += 1
        n = next(self._n)  # arguments differ each time: no "same error again" shortcut
        if kind is Fault.SERVER_ERROR:
            return error(500, "The server had an error while processing your request.")
        if kind is Fault.RATE_LIMITED:
            headers = {"retry-after-ms": str(self.retry_after_ms)}
            return error(429, "Rate limit reached for requests.", headers=headers)
        if kind is Fault.TIMEOUT:
            return _Stall(self.stall_s)
        offered = [t["function"]["name"] for t in body.get("tools") or () if "function" in t]
        if offered and self._rng.random() < 0.5:
            return tool_call(self._rng.choice(offered), f'{{"broken": {n}')  # not JSON
        return tool_call(f"no_such_tool_{n}", {})


@dataclass(frozen=True, slots=True)
class _Stall(Reply):
    seconds: float


# --------------------------------------------------------------------------- server

_JSON = "application/json"
_DONE = b"data: [DONE]\n\n"


def _error_response(
    status: int,
    message: str,
    type: str,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type=_JSON, headers=headers
    )


class _ShuttingDown(Exception):
    pass


def _split(s: str, size: int) -> list[str]:
    if not s:
        return []
    return [s[i : i + size] for i in range(0, len(s), size)]


class FakeOpenAI(MediaEndpoints):
    """Fake OpenAI server; use as ``async with FakeOpenAI() as llm``. See module doc (and
    tests/fakes/openai_media.py for speech and pictures)."""

    def __init__(
        self,
        *,
        models: Iterable[str] = ("fake-model",),
        default: ReplyLike = echo,
        delay_s: float = 0.0,
        api_key: str | None = None,
        reject_unknown_models: bool = False,
        stream_chunk_chars: int = 4,
        stream_chunk_delay_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        context_window: int | None = None,
        server_kind: str = "openai",
        strict_template: bool = False,
    ) -> None:
        self.models: list[str] = list(models)
        self.strict_template = strict_template  # refuse what strict chat templates refuse
        self.template_status = 400
        self.template_refusals = 0
        # refuse prompts longer than this (by count_tokens), as `server_kind` words it
        self.context_window = context_window
        self.server_kind = server_kind  # "openai", "vllm", "llama.cpp" or "ollama"
        self.prompt_counts: list[int] = []
        self.refused = 0
        self.summary_requests: list[dict[str, Any]] = []
        self.summarizer: ReplyLike = summarize  # how summary requests are answered
        self.default: ReplyLike = default
        self.delay_s = delay_s
        self.api_key = api_key
        # 404 model_not_found for chat requests naming a model not in ``models``
        self.reject_unknown_models = reject_unknown_models
        # size of content / argument fragments in streams, and a pause between events
        self.stream_chunk_chars = stream_chunk_chars
        self.stream_chunk_delay_s = stream_chunk_delay_s
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self.vision = True  # False: any image part is refused, as by a model without vision
        self.transcriptions: list[Transcription] = []
        self._transcripts: collections.deque[str | ErrorReply] = collections.deque()
        self._init_media()
        self.faults: LLMFaults | None = None
        self._queue: collections.deque[ReplyLike] = collections.deque()
        self._host = host
        self._port = port
        self._cond: asyncio.Condition | None = None
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)

    # ---- public API

    @property
    def port(self) -> int:
        if self._runner is None:
            raise RuntimeError("FakeOpenAI is not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    def script(self, *replies: ReplyLike) -> None:
        """Queue replies; each chat request consumes the next one."""
        self._queue.extend(replies)

    def script_transcription(self, *replies: str | ErrorReply) -> None:
        """Queue transcripts (or errors); each /audio/transcriptions request takes the next."""
        self._transcripts.extend(replies)

    @property
    def remaining(self) -> int:
        """Number of scripted replies not consumed yet."""
        return len(self._queue)

    async def wait_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``n`` chat requests arrived; return the first ``n`` bodies."""
        assert self._cond is not None, "FakeOpenAI is not started"
        cond = self._cond
        async with asyncio.timeout(timeout), cond:
            await cond.wait_for(lambda: len(self.requests) >= n)
        return self.requests[:n]

    async def start(self) -> Self:
        self._cond = asyncio.Condition()
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self._add_routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._port = sock.getsockname()[1]
        await web.SockSite(runner, sock, backlog=1024).start()
        self._runner = runner
        return self

    def _add_routes(self, app: web.Application) -> None:
        """The API's routes (the fake Anthropic server serves its own on the same machinery)."""
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._media_routes(app)
        app.router.add_get("/v1/models/{model_id:.+}", self._get_model)
        app.router.add_get("/props", self._props)
        app.router.add_post("/api/show", self._show)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            if self._closing is not None:
                self._closing.set()  # held requests get a 503 instead of blocking shutdown
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- handlers

    def _check_auth(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization")
        self.auth_headers.append(auth)
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return _error_response(
                401,
                "Incorrect API key provided.",
                "invalid_request_error",
                "invalid_api_key",
            )
        return None

    async def _transcribe(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:
            return denied
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str):
            return _error_response(400, "'file' and 'model' are required.", "invalid_request_error")
        record = Transcription(model, upload.filename, upload.content_type, upload.file.read())
        self.transcriptions.append(record)
        reply = self._transcripts.popleft() if self._transcripts else None
        if isinstance(reply, ErrorReply):
            return _error_response(reply.status, reply.message, reply.type, reply.code)
        transcript = reply if reply is not None else f"transcript of {record.filename}"
        return web.json_response({"text": transcript})

    async def _list_models(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:
            return denied
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        if self.server_kind == "vllm" and self.context_window is not None:
            for entry in data:
                entry["max_model_len"] = self.context_window
        return web.json_response({"object": "list", "data": data})

    async def _props(self, request: web.Request) -> web.Response:
        """llama.cpp's server properties (404 unless server_kind is "llama.cpp")."""
        if self.server_kind != "llama.cpp" or self.context_window is None:
            raise web.HTTPNotFound()
        settings = {"n_ctx": self.context_window, "temperature": 0.8}
        return web.json_response({"default_generation_settings": settings, "total_slots": 1})

    async def _show(self, request: web.Request) -> web.Response:
        """Ollama's model details (404 unless server_kind is "ollama")."""
        if self.server_kind != "ollama":
            raise web.HTTPNotFound()
        body = await request.json()
        if body.get("model") not in self.models:
            missing = {"error": f"model '{body.get('model')}' not found"}
            return web.json_response(missing, status=404)
        params = f"num_ctx {self.context_window}\n" if self.context_window else ""
        info = {"general.architecture": "llama", "llama.context_length": 131072}
        return web.json_response({"parameters": params, "model_info": info})

    def _overflow(self, count: int) -> web.Response:
        window = self.context_window
        self.refused += 1
        if self.server_kind == "vllm":
            message = (
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{count} tokens ({count} in the messages, 0 in the completion). Please reduce "
                "the length of the messages or completion."
            )
            body: dict[str, Any] = {
                "object": "error",
                "message": message,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
            return web.json_response(body, status=400)
        if self.server_kind == "llama.cpp":
            message = (
                f"request ({count} tokens) exceeds the available context size ({window} "
                "tokens), try increasing it"
            )
            err = {"code": 400, "message": message, "type": "exceed_context_size_error"}
            return web.json_response({"error": err}, status=400)
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {count} tokens. Please reduce the length of the messages."
        )
        return _error_response(
            400, message, "invalid_request_error", "context_length_exceeded", "messages"
        )

    async def _get_model(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:
            return denied
        model_id = request.match_info["model_id"]
        if model_id not in self.models:
            return self._model_not_found(model_id)
        return web.json_response(
            {"id": model_id, "object": "model", "created": 0, "owned_by": "fake"}
        )

    @staticmethod
    def _model_not_found(model_id: Any) -> web.Response:
        return _error_response(
            404,
            f"The model `{model_id}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        )

    async def _wait_hold(self, event: asyncio.Event) -> None:
        assert self._closing is not None
        released = asyncio.ensure_future(event.wait())
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait((released, closing), return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
            closing.cancel()
        if not event.is_set():
            raise _ShuttingDown

    async def _stall(self, seconds: float) -> None:
        assert self._closing is not None
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            return
        raise _ShuttingDown

    async def _resolve(self, reply: ReplyLike, body: dict[str, Any]) -> Reply:
        while True:
            if isinstance(reply, HoldReply):
                if reply.started is not None:
                    reply.started.set()
                if not reply.event.is_set():
                    await self._wait_hold(reply.event)
                reply = reply.then
            elif isinstance(reply, Reply):
                return reply
            elif callable(reply):
                result = reply(body)
                reply = await result if inspect.isawaitable(result) else result
            else:
                raise TypeError(f"not a reply: {reply!r}")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._check_auth(request)) is not None:
            return denied
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return _error_response(400, "Invalid JSON body.", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error_response(
                400,
                "Missing required parameter: 'messages'.",
                "invalid_request_error",
                None,
                "messages",
            )
        if "model" not in body:
            return _error_response(
                400, "Missing required parameter: 'model'.", "invalid_request_error", None, "model"
            )

        self.requests.append(body)
        cond = self._cond
        if cond is not None:
            async with cond:
                cond.notify_all()
        if self.strict_template and (problem := template_error(body["messages"])) is not None:
            self.template_refusals += 1
            err = {
                "code": self.template_status,
                "message": problem,
                "type": "invalid_request_error",
            }
            return web.json_response({"error": err}, status=self.template_status)
        if (refused := _check_content(body["messages"], self.vision)) is not None:
            return _error_response(400, refused, "invalid_request_error", None, "messages")

        if self.reject_unknown_models and body["model"] not in self.models:
            return self._model_not_found(body["model"])

        count = count_tokens(body)
        self.prompt_counts.append(count)
        if self.context_window is not None:
            reserved = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
            if count + reserved > self.context_window:
                return self._overflow(count)

        picked: ReplyLike
        fault = self.faults.draw(body) if self.faults is not None else None
        if fault is not None:
            picked = fault
        elif is_summary_request(body):
            self.summary_requests.append(body)
            picked = self.summarizer
        else:
            picked = self._queue.popleft() if self._queue else self.default
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        try:
            reply = await self._resolve(picked, body)
            if isinstance(reply, _Stall):
                await self._stall(reply.seconds)
                reply = error(504, "The fake server stalled past the client's timeout.")
        except _ShuttingDown:
            return _error_response(503, "The fake server is shutting down.", "server_error")

        if isinstance(reply, ErrorReply):
            return _error_response(
                reply.status, reply.message, reply.type, reply.code, headers=reply.headers
            )
        if isinstance(reply, TextReply):
            content: str | None = reply.content
            calls: list[tuple[str, str, str]] = []
        elif isinstance(reply, ToolCallsReply):
            content = reply.content
            calls = [
                (c.id or f"call_{next(self._call_ids)}", c.name, c.arguments) for c in reply.calls
            ]
        else:  # pragma: no cover - _resolve only returns the kinds above
            raise TypeError(f"unsupported reply {reply!r}")

        usage = reply.usage or self._usage(count, content, calls)
        if reply.reasoning and not reply.usage:
            thought = _pieces(reply.reasoning)
            usage = {
                **usage,
                "completion_tokens": usage["completion_tokens"] + thought,
                "total_tokens": usage["total_tokens"] + thought,
                "completion_tokens_details": {"reasoning_tokens": thought},
            }
        model = body["model"]
        completion_id = f"chatcmpl-{next(self._completion_ids)}"
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(
                request,
                completion_id,
                model,
                content,
                calls,
                reply.finish_reason,
                usage if include_usage else None,
                reply.reasoning,
            )

        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in calls
            ]
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": usage,
            "system_fingerprint": "fp_fake",
        }
        return web.Response(body=json.dumps(payload).encode(), content_type=_JSON)

    @staticmethod
    def _usage(
        prompt: int, content: str | None, calls: list[tuple[str, str, str]]
    ) -> dict[str, int]:
        completion = max(1, _pieces(content or "") + sum(_pieces(n + a) for _, n, a in calls))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    async def _stream(
        self,
        request: web.Request,
        completion_id: str,
        model: str,
        content: str | None,
        calls: list[tuple[str, str, str]],
        finish_reason: str,
        usage: Mapping[str, Any] | None,
        reasoning: str | None = None,
    ) -> web.StreamResponse:
        head = json.dumps(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_fake",
            }
        )[:-1]
        usage_null = ',"usage":null' if usage is not None else ""
        # b'data: {"id":...,"choices":[{"index":0,"delta":' + delta + tail
        prefix = f'data: {head},"choices":[{{"index":0,"delta":'.encode()
        tail = f',"logprobs":null,"finish_reason":null}}]{usage_null}}}\n\n'.encode()
        dumps = json.dumps
        size = max(1, self.stream_chunk_chars)

        events: list[bytes] = []
        first: dict[str, Any] = {
            "role": "assistant",
            "content": "" if content or not calls else None,
        }
        events.append(prefix + dumps(first).encode() + tail)
        for piece in _split(reasoning or "", size):
            events.append(prefix + dumps({"reasoning_content": piece}).encode() + tail)
        for piece in _split(content or "", size):
            events.append(prefix + dumps({"content": piece}).encode() + tail)
        for index, (cid, name, args) in enumerate(calls):
            start = {
                "index": index,
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            events.append(prefix + dumps({"tool_calls": [start]}).encode() + tail)
            for piece in _split(args, size):
                frag = {"index": index, "function": {"arguments": piece}}
                events.append(prefix + dumps({"tool_calls": [frag]}).encode() + tail)
        last = f',"logprobs":null,"finish_reason":{dumps(finish_reason)}}}]{usage_null}}}\n\n'
        events.append(prefix + b"{}" + last.encode())
        if usage is not None:
            events.append(f'data: {head},"choices":[],"usage":{dumps(usage)}}}\n\n'.encode())
        events.append(_DONE)
        return await self._send_events(request, events)

    async def _send_events(self, request: web.Request, events: list[bytes]) -> web.StreamResponse:
        """Server-Sent Events, paced by `stream_chunk_delay_s` (at once when 0)."""
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if self.stream_chunk_delay_s:
            for i, event in enumerate(events):
                if i:
                    await asyncio.sleep(self.stream_chunk_delay_s)
                await resp.write(event)
        else:
            await resp.write(b"".join(events))
        await resp.write_eof()
        return resp


# --------------------------------------------------------------------------- standalone


def _tool_then_text(body: dict[str, Any]) -> ReplyLike:
    """Benchmark reply: call ``add`` after a user message, otherwise answer with text."""
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "user":
        return tool_call("add", {"a": 1, "b": 2})
    return text("done")


def _first_tool_then_text(body: dict[str, Any]) -> ReplyLike:
    """Call the first tool offered (no arguments) after a user message, else answer."""
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    if tools and messages and messages[-1].get("role") == "user":
        return tool_call(tools[0]["function"]["name"], {})
    return text("I read it. Anything else?")


_MODES: dict[str, ReplyLike] = {
    "echo": echo,
    "tool": _tool_then_text,
    "first-tool": _first_tool_then_text,
}


async def _serve(
    port: int, delay_s: float, mode: str, window: int | None, kind: str, strict: bool = False
) -> None:
    llm = FakeOpenAI(
        port=port,
        delay_s=delay_s,
        default=_MODES[mode],
        context_window=window,
        server_kind=kind,
        strict_template=strict,
    )
    async with llm:
        print(f"fake OpenAI listening on {llm.base_url}", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            counts = llm.prompt_counts or [0]
            print(
                f"{len(llm.requests)} requests ({len(llm.summary_requests)} for summaries), "
                f"largest prompt {max(counts)} tokens, refused as too long: {llm.refused}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the fake OpenAI server.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per request")
    parser.add_argument(
        "--mode",
        choices=sorted(_MODES),
        default="echo",
        help="echo: echo the user; tool: call add() after a user message, else text; "
        "first-tool: call the first tool offered after a user message, else text",
    )
    parser.add_argument("--context-window", type=int, help="refuse longer prompts (tokens)")
    parser.add_argument("--kind", default="openai", choices=["openai", "vllm", "llama.cpp"])
    parser.add_argument(
        "--strict-template", action="store_true", help="refuse what strict chat templates refuse"
    )
    args = parser.parse_args(argv)
    try:
        asyncio.run(
            _serve(
                args.port,
                args.delay,
                args.mode,
                args.context_window,
                args.kind,
                args.strict_template,
            )
        )
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

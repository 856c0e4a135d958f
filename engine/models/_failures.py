"""What kind of failure a model request met, named the same way for every provider.

A chat, the log and ``doctor`` each say something different for each kind, so the providers
map their SDK's errors through these two functions instead of calling everything "unavailable":

- no HTTP answer at all: :class:`ModelUnreachable` when no connection was made (refused, no
  route, unknown host, or broken before the answer), :class:`ModelTimedOut` when the server took
  the request and did not answer in time. The SDKs' aiohttp client reports a refused connection
  as a *connect timeout*, so the cause chain is read, not the outer class;
- an HTTP error: :class:`ModelServerError` for 5xx (retry later), :class:`ModelRefused` for a
  request the server refuses as such (404 unknown model, a chat template that refuses the
  conversation, any other 4xx), which the same request would meet again. llama.cpp answers a
  template's own exception with 500, so a 5xx that says it came from the template is a refusal.

Overflow, authentication and rate limits keep their own classes; each provider recognises them
in its own API's words first.
"""

from __future__ import annotations

import errno
import socket

from tools.errors import LLMError, ModelRefused, ModelServerError, ModelTimedOut, ModelUnreachable

# How chat templates (llama.cpp's jinja, vLLM, Ollama) word a conversation they refuse.
_TEMPLATE = (
    "roles must alternate",
    "conversation roles",
    "jinja",
    "chat template",
    "system role not supported",
    "system message must be",
    "only user and assistant roles",
    "raise_exception",
)
# How servers word a model they do not know.
_NO_MODEL = ("model_not_found", "does not exist", "model not found", "unknown model", "no model")
_UNREACHABLE_ERRNO = {
    errno.ECONNREFUSED,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ECONNRESET,
    errno.EHOSTDOWN,
}

# aiohttp's and httpx's names for a connection not made, or lost before the answer.
_NO_CONNECTION = {
    "ClientConnectorError",
    "ClientConnectorDNSError",
    "ConnectionTimeoutError",
    "ConnectError",
    "ConnectTimeout",
    "ServerDisconnectedError",
    "RemoteProtocolError",
}


def connection_failure(exc: BaseException, where: str = "the model endpoint") -> LLMError:
    """A request that got no HTTP answer: unreachable or timed out, with the innermost cause."""
    chain = _chain(exc)
    root = chain[-1]
    detail = str(root) or type(root).__name__
    for cause in chain:
        name = type(cause).__name__
        if (
            isinstance(cause, ConnectionRefusedError | socket.gaierror)
            or (isinstance(cause, OSError) and cause.errno in _UNREACHABLE_ERRNO)
            or name in _NO_CONNECTION
        ):
            return ModelUnreachable(f"{where} is unreachable ({detail})")
    if any(isinstance(c, TimeoutError) or "Timeout" in type(c).__name__ for c in chain):
        return ModelTimedOut(f"{where} did not answer in time ({detail})")
    return ModelUnreachable(f"{where} is unreachable ({detail})")


def status_failure(status: int, detail: str) -> LLMError:
    """An HTTP error that is not an overflow, a rejected key or a rate limit."""
    words = detail.lower()
    if any(w in words for w in _TEMPLATE):
        return ModelRefused(detail, "template")
    if status >= 500:
        return ModelServerError(detail)
    if status == 404 or any(w in words for w in _NO_MODEL):
        return ModelRefused(detail, "model")
    return ModelRefused(detail, "request")


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes, outermost first (cycles cut)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out and len(out) < 12:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out

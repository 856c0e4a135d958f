"""relaybot's one error tree.

RelaybotError                 base of everything relaybot raises on purpose
├── ConfigError               the config is invalid; names the key and the reason
├── ToolDefinitionError       a tool is declared wrongly (bad name, misplaced context, ...)
├── ToolRetry                 raised by a tool: its message goes back to the model to retry
├── LLMError                  the model endpoint failed after the SDK's retries
│   ├── ModelUnavailable      unreachable, timed out, 5xx or overloaded: worth trying elsewhere
│   │   ├── ModelUnreachable  no connection (refused, no route, unknown host)
│   │   ├── ModelTimedOut     connected, but no answer in time
│   │   └── ModelServerError  5xx or overloaded: the server failed, retry later
│   ├── ModelRateLimited      429 past the SDK's retries
│   ├── ModelAuthError        the key was rejected (401/403)
│   ├── ModelRefused          4xx: the request itself was refused (model name, chat template,
│   │                         size): not retried, not failed over
│   └── ContextOverflow       the request is longer than the model's window
│       └── PromptTooLarge    even the system prompt and tool definitions do not fit it
├── StoreError                the store cannot be opened, migrated or written
│   └── StoreUnavailable      the store cannot record now (server away, disk full or read-only)
└── DownloadError             a file a user sent cannot be fetched from the platform
"""

from __future__ import annotations


class RelaybotError(Exception):
    """Base class for every error relaybot raises on purpose."""


class ConfigError(RelaybotError):
    """The configuration is invalid. Raised at start-up, before anything connects."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


class ToolDefinitionError(RelaybotError):
    """A tool is declared wrongly; raised when it is defined or registered, never at run time."""


class ToolRetry(RelaybotError):
    """Raised inside a tool when the model should fix its call and try again.

    The message is sent to the model as a retryable error result.
    """


class LLMError(RelaybotError):
    """The model endpoint could not be reached or answered with an error after retries."""


class ModelUnavailable(LLMError):
    """The model endpoint is unreachable, timed out, or answered 5xx / overloaded."""


class ModelUnreachable(ModelUnavailable):
    """No connection to the model endpoint: refused, no route, unknown host."""


class ModelTimedOut(ModelUnavailable):
    """The model endpoint took the request but did not answer within the timeout."""


class ModelServerError(ModelUnavailable):
    """The model endpoint failed on the request (5xx, overloaded): worth trying again later."""


class ModelRefused(LLMError):
    """The model endpoint refused the request itself (4xx): the same request fails again, so it
    is neither retried nor failed over. `kind` says what to fix: "model" (the server does not
    know the model), "template" (the chat template refused the conversation), "request"
    (anything else about the request)."""

    def __init__(self, message: str, kind: str = "request") -> None:
        super().__init__(message)
        self.kind = kind


class ModelRateLimited(LLMError):
    """The model endpoint kept answering 429 (rate limited) after the SDK's retries."""


class ModelAuthError(LLMError):
    """The model endpoint rejected the API key (401/403)."""


class ContextOverflow(LLMError):
    """The request did not fit the model's context window."""


class PromptTooLarge(ContextOverflow):
    """The system prompt and the tool definitions alone exceed the context budget: no turn can
    be answered until the window is larger or the prompt and tools are smaller."""


class StoreError(RelaybotError):
    """The store cannot be opened, migrated or written."""


class StoreUnavailable(StoreError):
    """The store cannot record (for now): its server cannot be reached, or the machine refuses
    the write (a SQLite disk full, read-only or locked). What was being written is not recorded,
    so nothing may be acknowledged to a platform or shown as done. Retried with backoff."""


class DownloadError(RelaybotError):
    """A file a user sent cannot be fetched from the chat platform (gone, too large, refused).

    The message is for the log; the user is told in relaybot's own words.
    """

"""The tool contract: Tool, its optional capabilities, and the per-call ToolContext."""

from __future__ import annotations

import abc
import contextvars
import dataclasses
import enum
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tools._result import ToolResult
from tools.errors import ToolRetry

Send = Callable[[str], Awaitable[None]]
Callback = Callable[[ToolResult], Awaitable[None]]


Progress = Callable[[str], None]
Keep = Callable[[str], Awaitable[None]]


async def no_send(text: str) -> None:
    """The `send` of a ToolContext outside any chat: the text goes nowhere."""
    return None


def no_progress(text: str) -> None:
    """The `progress` of a ToolContext no one watches: the line goes nowhere."""


async def keep_nowhere(text: str) -> None:
    return None


def never_stopped() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class BackgroundJob:
    """What a background job's tool knows of its job: where it had got to before a restart
    (`resume`, as it kept it; None on a fresh start), how to keep where it is now (`keep`:
    stored with the job), and whether a person stopped it (`stopped()`, true when it is
    cancelled on purpose; a shutdown's cancellation leaves it false: the job resumes later)."""

    id: str
    resume: str | None = None
    keep: Keep = keep_nowhere
    stopped: Callable[[], bool] = never_stopped


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who a tool call is for. Injected per execution, never shared between conversations."""

    channel: str = ""
    chat_id: str = ""
    user_id: str = ""
    send: Send = no_send
    call_id: str = ""
    is_private: bool = False  # a private chat with the user; False: a group (or not known)
    # how far the call has got, in a few words ("40% loading data"): shown beside the call's
    # line in the turn's progress message (never waits); MCP servers' progress notifications
    progress: Progress = no_progress
    job: BackgroundJob | None = None  # set when the call runs as a background job


# The context of the call running in the current asyncio task. Every execution runs in its own
# task (see ToolRegistry.run), so concurrent calls never see each other's context.
_current: contextvars.ContextVar[ToolContext] = contextvars.ContextVar("relaybot_tool_context")
_callback: contextvars.ContextVar[Callback | None] = contextvars.ContextVar(
    "relaybot_tool_callback", default=None
)


def current_context() -> ToolContext:
    """The ToolContext of the call running in this task (an empty one outside any call)."""
    return _current.get(ToolContext())


class Tier(enum.StrEnum):
    SAFE = "safe"
    DESTRUCTIVE = "destructive"


class Tool(abc.ABC):
    """A tool the model can call.

    Subclasses set `name`, `description` and `parameters` (a JSON Schema object) and implement
    `execute`. Arguments are validated against `parameters` before `execute` runs.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    tier: Tier = Tier.SAFE
    safety: dict[str, Any] = {}
    background: bool = False  # run as a background job; the model gets a job id at once
    exclusive: bool = False  # never run concurrently with other tools
    timeout_s: float | None = None
    resumable: bool = False  # background job re-run at start-up if the daemon died meanwhile
    bounded_output: bool = False  # bounds its own result (pages it): the loop's cap leaves it
    mcp_server: str | None = None  # the MCP server this tool calls (None: relaybot's, a plugin's)

    @abc.abstractmethod
    async def execute(self, args: dict[str, Any]) -> ToolResult: ...

    @property
    def destructive(self) -> bool:
        return self.tier is Tier.DESTRUCTIVE

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check `args` against the schema; raise ToolRetry with every problem found."""
        import jsonschema  # only class tools need it: keep it out of start-up

        validator = jsonschema.Draft202012Validator(self.parameters)
        problems = [
            f"{'.'.join(map(str, e.absolute_path)) or '(arguments)'}: {e.message}"
            for e in validator.iter_errors(args)
        ]
        if problems:
            raise ToolRetry("; ".join(problems))
        return args

    def strict_parameters(self) -> dict[str, Any]:
        """The OpenAI strict-mode variant of `parameters` (see tools._schema)."""
        from tools._schema import strict_schema

        return strict_schema(self.parameters)

    def from_strict(self, args: dict[str, Any]) -> dict[str, Any]:
        """Map strict-mode nulls back to omitted arguments, so defaults apply."""
        from tools._schema import drop_strict_nulls

        return drop_strict_nulls(args, self.parameters)

    def job_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """The JSON arguments stored for a background job (e.g. a relative time made absolute),
        so that a resumable job means the same thing when it is re-run after a restart."""
        return args

    def describe_call(self, args: dict[str, Any]) -> str:
        """One line a person can answer yes or no to, shown when this call asks first.

        By default the first sentence of the description with the arguments in words:
        "Cancel one of the user's orders (order id: 10234)". Override it for a better one.
        """
        return call_summary(self.name, self.description, args)

    def describe_step(self, args: dict[str, Any]) -> str | None:
        """A short line shown while this call runs ("Searching the archive for 'tea'"); None
        (the default) shows the tool's name and its first text argument."""
        return None

    def describe_action(self, args: dict[str, Any]) -> str:
        """The complete action, exactly what will run, shown verbatim next to the buttons.

        By default the tool's name and every argument as JSON. Override it when something
        plainer says exactly the same (`run_command` shows the command line itself).
        """
        return f"{self.name} {json.dumps(args, ensure_ascii=False, indent=2, default=str)}"


def call_summary(name: str, description: str | None, args: dict[str, Any]) -> str:
    """ "<what the tool does> (<argument>: <value>, ...)", at most about 300 characters."""
    first = (description or "").strip().split("\n\n")[0]
    what = " ".join(first.split()).split(". ")[0].rstrip(".") or name.replace("_", " ")
    what = _clip(what[:1].upper() + what[1:], 160)
    words = [f"{k.replace('_', ' ')}: {_in_words(v)}" for k, v in args.items() if v is not None]
    return _clip(f"{what} ({', '.join(words)})", 300) if words else what


def _in_words(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return _clip(" ".join(value.split()), 80)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return _clip(", ".join(map(str, value)) or "none", 80)
    if isinstance(value, int | float):
        return str(value)
    return _clip(json.dumps(value, ensure_ascii=False, default=str), 80)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class ContextualTool(Tool):
    """A tool that needs to know which chat it acts for.

    `set_context` is called by the registry inside the task that runs the call, so the value
    is private to that call even when many conversations use the tool at once.
    """

    def set_context(self, channel: str, chat_id: str) -> None:
        ctx = _current.get(ToolContext())
        _current.set(
            dataclasses.replace(ctx, channel=channel, chat_id=chat_id)
            if (ctx.channel, ctx.chat_id) != (channel, chat_id)
            else ctx
        )

    @property
    def context(self) -> ToolContext:
        return current_context()


class AsyncTool(Tool):
    """A tool that returns at once (ToolResult.started) and reports its result later.

    The engine calls `set_callback` before each execution; the tool awaits `self.callback(result)`
    when done, possibly from a task it spawned (the callback travels with the task's context).
    """

    def set_callback(self, callback: Callback) -> None:
        _callback.set(callback)

    @property
    def callback(self) -> Callback:
        cb = _callback.get()
        if cb is None:
            raise RuntimeError(f"{self.name}: no callback set for this call")
        return cb

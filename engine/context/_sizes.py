"""The sizes of the context budget: how it is configured, how many tokens a request may use and
how many are kept for the answer, and what fitting and /compact report back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from engine.context._window import WindowInfo
from engine.models import ModelRequest, Usage


@dataclass(frozen=True, slots=True)
class ContextSettings:
    window: int | None = None  # [llm] context_window; None: ask `discover`
    max_output_tokens: int | None = None  # None: 1,024, or an eighth of a smaller window
    budget: int | None = None  # None: the window less the output and a margin
    keep_recent_turns: int = 6
    tool_result_chars: int = 2_000
    history_limit: int = 200
    discover: Callable[[str], Awaitable[WindowInfo]] | None = None  # the window of a model


def output_for(window: int, settings: ContextSettings) -> int:
    """Tokens kept for the answer: as configured, else 1,024, or an eighth of a smaller window
    (512 of 4,096: a small model on a CPU writes a few tokens a second)."""
    if settings.max_output_tokens is not None:
        return settings.max_output_tokens
    return min(1_024, window // 8)


def budget_for(window: int, settings: ContextSettings) -> int:
    """Prompt tokens a request may use: the window less the answer's room and a 5 % margin."""
    room = max(window - output_for(window, settings) - window // 20, window // 4)
    return room if settings.budget is None else min(settings.budget, room)


@dataclass(frozen=True, slots=True)
class Fitted:
    request: ModelRequest
    estimate: int  # relaybot's estimate of its prompt, before the ratio
    model: str  # the name of the model it was fitted for
    spent: Usage = field(default_factory=Usage)  # what summary requests to fit it cost


@dataclass(frozen=True, slots=True)
class Compacted:
    """What /compact did: messages folded (of those it tried to fold), and the tokens of
    history sent before and after."""

    messages: int
    before: int
    after: int
    tried: int = 0  # messages it meant to fold (more than `messages`: a summary was not stored)

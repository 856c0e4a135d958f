"""Prometheus metrics and the last error of each channel: the objects, and one small hook per
place that knows a figure (a message received or refused, a turn ended, a model reply, a tool
result, a platform request that failed, a store call).

The hooks run on hot paths, so each is a dict lookup plus an increment or an observe: a labelled
metric's children are bound once per label value and kept (``labels()`` takes a lock and builds
its key on every call). The metrics live in prometheus_client's default registry, next to its
process and garbage-collector collectors. They exist, and count, once ``[metrics] listen`` is set
(:func:`enable_metrics`, before the daemon starts): unserved, each hook costs a test of one
global, and prometheus_client is not even imported (2 MiB of the idle daemon). The HTTP endpoint
(bot/_metrics_http.py) sets the gauges of state (queue depths, confirmations pending, jobs
running, the store's files) as it is scraped (:func:`set_state`).

Labels are bounded sets: channel names, model names, registered tool names ("other" for a name
the model made up), outcomes and reasons. Never a chat or a user id.

The newest error of each channel (and of the model, as "llm") is kept by an :class:`ErrorLog`
(engine/_errors.py, handed on from here) until housekeeping stores it, for `relaybot status`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine._clock import monotonic, perf
from engine._errors import ErrorLog, note_error, take_errors, use_error_log
from tools.errors import LLMError

if TYPE_CHECKING:
    from engine.models import Model, ModelRequest, ModelResponse, OnText

__all__ = [
    "ErrorLog",
    "api_error",
    "api_retry",
    "cost_added",
    "enable_metrics",
    "llm_failed",
    "llm_replied",
    "model_request",
    "note_error",
    "received",
    "refused",
    "set_state",
    "store_call",
    "take_errors",
    "tool_called",
    "turn_ended",
    "use_error_log",
]

_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
_STORE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.0)


class _Children(dict[Any, Any]):
    """A labelled metric's children by label value(s), each bound on first use."""

    def __init__(self, metric: Any) -> None:
        super().__init__()
        self.metric = metric

    def __missing__(self, key: Any) -> Any:
        child = self[key] = (
            self.metric.labels(*key) if isinstance(key, tuple) else (self.metric.labels(key))
        )
        return child


class _Metrics:
    """The metric objects, made by :func:`enable_metrics`."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.received = _Children(
            Counter(
                "relaybot_messages_received",
                "Messages from allowed users accepted into the inbox",
                ["channel"],
            )
        )
        self.answered = _Children(
            Counter(
                "relaybot_messages_answered",
                "Messages a turn replied to (an answer, a confirmation prompt or an apology)",
                ["channel"],
            )
        )
        self.refused = _Children(
            Counter(
                "relaybot_messages_refused",
                "Messages refused before the inbox (not_allowed, too_long, media, rate_limit)",
                ["channel", "reason"],
            )
        )
        self.turns = _Children(
            Histogram(
                "relaybot_turn_duration_seconds",
                "Time a turn took, by how it ended (answered, confirmation, failed)",
                ["outcome"],
                buckets=_LATENCY_BUCKETS,
            )
        )
        self.llm = _Children(
            Histogram(
                "relaybot_llm_request_duration_seconds",
                "Time a model request took until its reply",
                ["model"],
                buckets=_LATENCY_BUCKETS,
            )
        )
        self.llm_errors = _Children(
            Counter(
                "relaybot_llm_request_errors",
                "Model requests that failed (after the SDK's retries)",
                ["model"],
            )
        )
        self.prompt = _Children(
            Counter(
                "relaybot_llm_prompt_tokens",
                "Tokens sent to the model, as the provider counts them",
                ["model"],
            )
        )
        self.cost = _Children(Counter("relaybot_cost_usd", "Requests' cost by price", ["model"]))
        self.completion = _Children(
            Counter("relaybot_llm_completion_tokens", "Tokens the model produced", ["model"])
        )
        self.tools = _Children(
            Counter(
                "relaybot_tool_calls",
                "Tool calls by tool and outcome (ok, error)",
                ["tool", "outcome"],
            )
        )
        self.platform_errors = _Children(
            Counter(
                "relaybot_platform_api_errors",
                "Platform API requests that failed (an error status or no answer)",
                ["channel"],
            )
        )
        self.retries = _Children(
            Counter(
                "relaybot_platform_api_retries",
                "Platform API requests tried again (relaybot's backoff, or a 429 the library "
                "waits out)",
                ["channel"],
            )
        )
        self.store = _Children(
            Histogram(
                "relaybot_store_operation_duration_seconds",
                "Time a store call took (read, write, commit), waiting for SQLite's thread or a "
                "PostgreSQL connection included",
                ["operation"],
                buckets=_STORE_BUCKETS,
            )
        )
        self.confirmations_pending = Gauge(
            "relaybot_confirmations_pending", "Confirmations waiting for their requester"
        )
        self.jobs_running = Gauge("relaybot_jobs_running", "Background jobs not finished yet")
        self.turns_running = Gauge(
            "relaybot_turns_running", "Chats with a turn (or other work) running now"
        )
        self.queue_depth_max = Gauge(
            "relaybot_chat_queue_depth_max", "Items waiting in the longest chat queue"
        )
        self.queue_depth_sum = Gauge(
            "relaybot_chat_queue_depth_sum", "Items waiting in all chat queues"
        )
        self.store_bytes = Gauge(
            "relaybot_store_size_bytes",
            "Size of the store: the database (db) and SQLite's write-ahead log (wal)",
            ["file"],
        )


_m: _Metrics | None = None


def enable_metrics() -> None:
    """Count from now on (idempotent): the metrics exist once something can serve them."""
    global _m
    if _m is None:
        _m = _Metrics()


# -- hooks ---------------------------------------------------------------------------------------


def received(channel: str) -> None:
    if _m is not None:
        _m.received[channel].inc()


def refused(channel: str, reason: str) -> None:
    if _m is not None:
        _m.refused[channel, reason].inc()


def turn_ended(channel: str, outcome: str, seconds: float, messages: int) -> None:
    """A turn ended (`outcome`: answered, confirmation, failed), replying to `messages`."""
    if _m is not None:
        _m.turns[outcome].observe(seconds)
        if messages:
            _m.answered[channel].inc(messages)


def llm_replied(model: str, seconds: float, prompt_tokens: int, completion_tokens: int) -> None:
    if _m is not None:
        _m.llm[model].observe(seconds)
        if prompt_tokens:
            _m.prompt[model].inc(prompt_tokens)
        if completion_tokens:
            _m.completion[model].inc(completion_tokens)


def llm_failed(model: str, error: str) -> None:
    if _m is not None:
        _m.llm_errors[model].inc()
    note_error("llm", f"{model}: {error}")


async def model_request(
    model: Model, request: ModelRequest, on_text: OnText | None = None
) -> ModelResponse:
    """`model.complete(request, on_text)`, timed and counted (a turn's requests and the
    context budget's summary requests alike)."""
    started = monotonic()
    try:
        reply = await model.complete(request, on_text)
    except LLMError as exc:
        llm_failed(model.name, str(exc))
        raise
    u = reply.usage
    llm_replied(model.name, monotonic() - started, u.prompt_tokens, u.completion_tokens)
    return reply


def cost_added(model: str, usd: float) -> None:
    if _m is not None and usd:
        _m.cost[model].inc(usd)


def tool_called(tool: str, ok: bool) -> None:
    if _m is not None:
        _m.tools[tool, "ok" if ok else "error"].inc()


def api_error(channel: str, what: str) -> None:
    """A platform request failed: counted, and kept as the channel's last error."""
    if _m is not None:
        _m.platform_errors[channel].inc()
    note_error(channel, what)


def api_retry(channel: str) -> None:
    if _m is not None:
        _m.retries[channel].inc()


def store_call(operation: str, started: float) -> None:
    """A store call (read, write, commit) that began at perf_counter() `started` ended."""
    if _m is not None:
        _m.store[operation].observe(perf() - started)


def set_state(
    queue_depths: Sequence[int],
    busy: int,
    confirmations: int,
    jobs: int,
    db_bytes: int,
    wal_bytes: int | None,
) -> None:
    """The gauges of what is going on now (set when scraped)."""
    if _m is None:
        return
    _m.queue_depth_max.set(max(queue_depths, default=0))
    _m.queue_depth_sum.set(sum(queue_depths))
    _m.turns_running.set(busy)
    _m.confirmations_pending.set(confirmations)
    _m.jobs_running.set(jobs)
    _m.store_bytes.labels("db").set(db_bytes)
    if wal_bytes is not None:  # SQLite's; a PostgreSQL server keeps its own
        _m.store_bytes.labels("wal").set(wal_bytes)
    else:
        with contextlib.suppress(KeyError):  # no figure rather than a stale one
            _m.store_bytes.remove("wal")

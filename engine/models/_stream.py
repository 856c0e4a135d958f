"""Streaming helpers shared by providers: text deltas to a callback, tool-call deltas assembled."""

from __future__ import annotations

import inspect
from typing import Any

from engine.models._types import OnText, ToolCall


async def emit(on_text: OnText | None, delta: str) -> None:
    """Hand `delta` to `on_text`, which may be a plain or an async function."""
    if on_text is not None:
        result = on_text(delta)
        if inspect.isawaitable(result):
            await result


class CallAccumulator:
    """Assembles streamed tool-call deltas: keyed by `index`, else by `id`, else arrival."""

    def __init__(self) -> None:
        self._calls: dict[Any, dict[str, Any]] = {}
        self._last: Any = None

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, tc: Any) -> None:
        if getattr(tc, "type", None) not in (None, "function"):
            return
        key: Any = tc.index if tc.index is not None else tc.id
        if key is None:  # no index and no id: a continuation of the previous call
            key = self._last if self._last is not None else len(self._calls)
        entry = self._calls.setdefault(key, {"id": None, "name": "", "args": []})
        self._last = key
        if tc.id:
            entry["id"] = tc.id
        fn = tc.function
        if fn is not None:
            if fn.name and fn.name != entry["name"]:  # some servers repeat the name
                entry["name"] += fn.name
            if fn.arguments:
                entry["args"].append(fn.arguments)

    def finish(self) -> list[ToolCall]:
        return [
            ToolCall(e["id"] or f"call_{i}", e["name"], "".join(e["args"]))
            for i, e in enumerate(self._calls.values())
        ]

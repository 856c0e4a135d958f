"""Open models' thoughts kept apart from their answer, on Chat Completions.

DeepSeek, Qwen3 and gpt-oss (through vLLM, llama.cpp, Ollama, LiteLLM) think aloud before they
answer. Servers that parse it out give it in a ``reasoning_content`` (or ``reasoning``) field;
others leave it inline, as ``<think>…</think>`` before the answer (or with only the closing tag,
when the chat template opened the block in the prompt). Either way the user must never be shown
it unless they asked (``/settings thinking on``), not even half a tag while an answer streams.

:func:`split` takes a whole answer apart; :class:`ThinkFilter` does it to a stream of deltas,
holding back only what might be the start of a tag (a stray closing tag in a stream is dropped:
what came before it was shown already, which servers that open the block in the prompt avoid by
parsing the reasoning into its field). The thoughts become a :class:`Reasoning` part of the
assistant message; they are not sent back unless the endpoint is configured to (DeepSeek's API
wants ``reasoning_content`` back with the tool calls of the turn in progress; other servers
refuse the field).
"""

from __future__ import annotations

import json

from engine.models._types import Reasoning

API = "chat"
OPEN = "<think>"
CLOSE = "</think>"
FIELDS = ("reasoning_content", "reasoning")  # where servers put parsed-out thoughts


def split(text: str | None) -> tuple[str | None, str]:
    """(answer, thoughts) of a whole answer: every ``<think>`` block taken out; text before a
    closing tag without an opening one is thoughts; an unclosed block runs to the end."""
    if not text or "think>" not in text:
        return text, ""
    answer: list[str] = []
    thoughts: list[str] = []
    rest = text
    if CLOSE in rest and (OPEN not in rest or rest.index(CLOSE) < rest.index(OPEN)):
        before, _, rest = rest.partition(CLOSE)
        thoughts.append(before)
    while OPEN in rest:
        before, _, rest = rest.partition(OPEN)
        answer.append(before)
        inside, closed, rest = rest.partition(CLOSE)
        thoughts.append(inside)
        if not closed:
            rest = ""
    answer.append(rest)
    said = "".join(answer).strip()
    return said or None, "\n\n".join(t.strip() for t in thoughts if t.strip())


def reasoning(thoughts: str, field: str | None) -> tuple[Reasoning, ...]:
    """The thoughts as a reasoning part: with the field they came in, to be sent back there
    where the endpoint wants them back."""
    if not thoughts:
        return ()
    item = json.dumps({field: thoughts}) if field else ""
    return (Reasoning(API, item, thoughts),)


def sent_back(r: Reasoning) -> dict[str, str]:
    """The fields an assistant message carries its reasoning back in (DeepSeek's way)."""
    if r.api != API or not r.item:
        return {}
    found = json.loads(r.item)
    return {k: v for k, v in found.items() if k in FIELDS and isinstance(v, str)}


class ThinkFilter:
    """A stream's text deltas in, the answer's out: thoughts kept apart, no tag half shown."""

    def __init__(self) -> None:
        self.thoughts: list[str] = []
        self._held = ""  # what might be the start of a tag
        self._inside = False
        self._shown = False  # answer text has been let through

    def feed(self, delta: str) -> str:
        """The part of the answer that can be shown now."""
        if not self._inside and not self._held and "<" not in delta:
            return self._show(delta)
        buf = self._held + delta
        out: list[str] = []
        while True:
            tag = CLOSE if self._inside else OPEN
            at = buf.find(tag)
            stray = -1 if self._inside else buf.find(CLOSE)
            if stray != -1 and (at == -1 or stray < at):  # a closing tag with no opening one
                (out if self._shown else self.thoughts).append(buf[:stray])
                buf = buf[stray + len(CLOSE) :]
                continue
            if at == -1:
                keep = _partial(buf, (tag,) if self._inside else (OPEN, CLOSE))
                text, self._held = buf[: len(buf) - keep], buf[len(buf) - keep :]
                (self.thoughts if self._inside else out).append(text)
                break
            (self.thoughts if self._inside else out).append(buf[:at])
            buf = buf[at + len(tag) :]
            self._inside = not self._inside
        return self._show("".join(out))

    def finish(self) -> str:
        """What was held back at the end of the stream, if it is answer."""
        held, self._held = self._held, ""
        if self._inside:
            self.thoughts.append(held)
            return ""
        return self._show(held)

    @property
    def thought(self) -> str:
        return "".join(self.thoughts).strip()

    def _show(self, text: str) -> str:
        if not self._shown:
            text = text.lstrip()  # the blank line after a think block
            self._shown = bool(text)
        return text


def _partial(buf: str, tags: tuple[str, ...]) -> int:
    """How many characters at the end of `buf` may begin one of `tags`."""
    for n in range(min(len(buf), max(map(len, tags)) - 1), 0, -1):
        if any(t.startswith(buf[-n:]) for t in tags):
            return n
    return 0

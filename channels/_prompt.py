"""How a confirmation prompt is laid out, the same way on every platform.

The message that carries the buttons shows the summary (one human line), then the complete
action (``ConfirmationPrompt.details``) as a code block, then who may answer and until when. When
that does not fit in one message, the complete action goes with the prompt as a file attached to
the same message as the buttons, and the visible text says so in words. The action is never cut
without saying so, and the buttons never sit on a message that does not carry the action.

Until the engine fills ``details``, the summary is all there is: it is shown, and when it is too
long to show, the attachment carries it whole.

The platform adapters supply the markup (Telegram HTML, Discord Markdown), how the platform
counts length, and its limits; :func:`lay_out` decides what is shown and what is attached. A
terminal has neither markup nor attachments: :func:`as_plain_text` shows the action below the
summary, a very long one as its start and its end with how much lies between (the end of a
command line is where a second command hides).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine import ConfirmationPrompt
from engine.i18n import N_, translator

ATTACHMENT_NAME = "action.txt"
_ATTACHED = N_("The full action is attached as {name} — read it before you answer.")
ATTACHED_NOTE = _ATTACHED.format(name=ATTACHMENT_NAME)
PLAIN_SHOWN = 4000  # characters of an action a terminal shows whole (beyond: start and end)


def attached_note(language: str | None) -> str:
    """The note that the action is attached, in `language`."""
    return translator(language).gettext(_ATTACHED).format(name=ATTACHMENT_NAME)


# (summary, details or None, attached) -> the visible text in the platform's markup
Render = Callable[[str, str | None, bool], str]


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message with the buttons: `text` shown, `attachment` (if any) sent with it."""

    text: str
    attachment: bytes | None = None


def lay_out(
    prompt: ConfirmationPrompt,
    render: Render,
    measure: Callable[[str], int],
    *,
    limit: int,
    attached_limit: int,
) -> PromptMessage:
    """The prompt as one message of at most `limit` (or, with a file, `attached_limit`)."""
    details = prompt.details or None
    text = render(prompt.summary, details, False)
    if measure(text) <= limit:
        return PromptMessage(text)
    summary = prompt.summary
    while measure(text := render(summary, None, True)) > attached_limit and len(summary) > 1:
        over = measure(text) - attached_limit
        summary = summary[: max(len(summary) - over - 1, 0)].rstrip() + "…"
    return PromptMessage(text, (prompt.details or prompt.summary).encode())


def as_plain_text(prompt: ConfirmationPrompt, limit: int = PLAIN_SHOWN) -> str:
    """The prompt on a terminal: the summary, then the complete action indented below it."""
    lines = [f"relaybot wants to: {prompt.summary}"]
    details = prompt.details.strip("\n")
    if details.strip() and details.strip() != prompt.summary:
        if len(details) > limit:
            head, tail = details[: limit * 3 // 4], details[-(limit // 4) :]
            hidden = len(details) - len(head) - len(tail)
            details = f"{head}\n[… {hidden} characters not shown …]\n{tail}"
        lines += [f"    {line}" for line in details.splitlines()]
    return "\n".join(lines)


def who_and_when(user_name: str, expires_in: str, language: str | None = None) -> str:
    """The footer line: "Only Alice can answer · expires in 5 min"."""
    footer = translator(language).gettext("Only {name} can answer · expires {when}")
    return footer.format(name=user_name, when=expires_in)


def in_words(seconds: float, language: str | None = None) -> str:
    """A time span as a person says it: "in 45 s", "in 5 min", "in 2 h 10 min"."""
    _ = translator(language).gettext
    seconds = max(round(seconds), 0)
    if seconds < 60:
        return _("in {s} s").format(s=seconds)
    minutes = round(seconds / 60)
    if minutes < 60:
        return _("in {m} min").format(m=minutes)
    hours, minutes = divmod(minutes, 60)
    if minutes:
        return _("in {h} h {m} min").format(h=hours, m=minutes)
    return _("in {h} h").format(h=hours)

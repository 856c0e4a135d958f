"""Answers spoken as well as written: with ``[media] speech_model`` set, a turn that began with
a voice message gets its answer as a voice message too, after the text (a chat may choose
always or never instead, in /settings).

The text is what is spoken, less its Markdown; past ``[media] max_speech_chars`` it is cut at a
sentence and the voice says the rest is in the text. The audio is Ogg/Opus, sent as a file the
channel shows natively (Telegram: a voice note; Discord: an audio attachment). A failure leaves
the text answer as it is: it is logged once, and again only after speech has worked meanwhile.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from engine._channel import Channel, MediaKind, OutgoingFile
from engine.chat._settings._chat import ChatSettings
from engine.loop import ConversationKey
from engine.models import OGG_OPUS, Speaker
from engine.store import InboxRow, VoiceReplies

log = logging.getLogger(__name__)

FILE_NAME = "answer.ogg"
REST_IN_TEXT = "The rest is in the written answer."
_MARKS = re.compile(r"[*_`~#>|]+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_SENTENCE_END = re.compile(r"[.!?…](?=\s)")


def speakable(text: str, limit: int) -> tuple[str, bool]:
    """`text` as it is read aloud (no Markdown, links by their words, no bare URLs), within
    `limit` characters, cut at a sentence when it can be; and whether it was cut."""
    plain = _URL.sub("", _MARKS.sub("", _LINK.sub(r"\1", text)))
    plain = re.sub(r"[ \t]+", " ", re.sub(r"\n{2,}", "\n", plain)).strip()
    if len(plain) <= limit:
        return plain, False
    room = limit - len(REST_IN_TEXT) - 2
    head = plain[:room]
    ends = [m.end() for m in _SENTENCE_END.finditer(head + " ")]
    if ends and ends[-1] > room // 2:
        head = head[: ends[-1]]
    else:
        head = head[: head.rfind(" ")] if " " in head else head
        head = head.rstrip(",;: ") + "…"
    return f"{head.strip()} {REST_IN_TEXT}", True


def began_with_voice(rows: Sequence[InboxRow]) -> bool:
    return any(a.kind is MediaKind.AUDIO for r in rows for a in r.attachments)


class VoiceAnswers:
    def __init__(
        self,
        speaker: Speaker,
        max_chars: Callable[[], int],
        chat_settings: ChatSettings | None = None,
    ) -> None:
        self.speaker = speaker
        self.max_chars = max_chars  # `[media] max_speech_chars` in force (a reload changes it)
        self.chat_settings = chat_settings
        self._failing = False  # a failure was logged; quiet until speech works again

    def wanted(self, key: ConversationKey, answering: Sequence[InboxRow]) -> bool:
        choice = self.chat_settings.of(key).voice if self.chat_settings is not None else None
        if choice is VoiceReplies.NEVER:
            return False
        return choice is VoiceReplies.ALWAYS or began_with_voice(answering)

    async def answer(
        self,
        channel: Channel,
        key: ConversationKey,
        answering: Sequence[InboxRow],
        text: str,
        reply_to: str | None,
    ) -> None:
        """Send `text` spoken, when this chat wants it for this turn; never raises."""
        if not self.wanted(key, answering):
            return
        spoken, cut = speakable(text, self.max_chars())
        if not spoken:
            return
        try:
            audio = await self.speaker.speak(spoken)
            await channel.send_files(
                key.chat_id, [OutgoingFile(FILE_NAME, OGG_OPUS, audio)], reply_to=reply_to
            )
        except Exception as exc:
            level = logging.DEBUG if self._failing else logging.WARNING
            self._failing = True
            log.log(level, "could not speak the answer in %s (the text stands): %s", key, exc)
            return
        if self._failing:
            log.info("speaking answers works again")
            self._failing = False
        log.info(
            "spoke the answer in %s (%d characters%s)", key, len(spoken), ", cut" if cut else ""
        )

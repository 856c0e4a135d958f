"""Each chat's own settings (/settings), for every backend: one row per chat that changed any."""

from __future__ import annotations

from engine._clock import wall
from engine.store._db import Db
from engine.store._types._rows import ChatPrefs
from engine.store._types._states import ReplyMode, VoiceReplies


class ChatSettings:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def all(self) -> list[ChatPrefs]:
        rows = await self.db.fetch(
            "SELECT channel, chat_id, persona, model, reply_mode, voice, language, thinking "
            "FROM chat_settings"
        )
        return [
            ChatPrefs(
                r["channel"],
                r["chat_id"],
                r["persona"],
                r["model"],
                ReplyMode(r["reply_mode"]) if r["reply_mode"] else None,
                VoiceReplies(r["voice"]) if r["voice"] else None,
                language=r["language"],
                thinking=bool(r["thinking"]),
            )
            for r in rows
        ]

    async def save(self, prefs: ChatPrefs, user_id: str) -> None:
        """Store the chat's settings as a whole (who changed them last, and when)."""
        await self.db.execute(
            "INSERT INTO chat_settings(channel, chat_id, persona, model, reply_mode, updated_by, "
            "updated_at, voice, language, thinking) VALUES (?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (channel, chat_id) DO UPDATE SET persona=excluded.persona, "
            "model=excluded.model, "
            "reply_mode=excluded.reply_mode, updated_by=excluded.updated_by, "
            "updated_at=excluded.updated_at, voice=excluded.voice, language=excluded.language, "
            "thinking=excluded.thinking",
            prefs.channel,
            prefs.chat_id,
            prefs.persona,
            prefs.model,
            prefs.reply_mode.value if prefs.reply_mode else None,
            user_id,
            wall(),
            prefs.voice.value if prefs.voice else None,
            prefs.language,
            prefs.thinking,
        )

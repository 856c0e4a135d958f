"""/settings: a chat's own settings shown with buttons, and changed by a press or by words.

The buttons serve the choices that are a list (the model, the reply mode, clearing the persona);
free text comes as arguments (`/settings persona You are a pirate`), because a persona is a
sentence and no platform has a portable text box under a message. The same arguments work for
everything (`/settings model gpt-4o`, `/settings mode all`), so the terminal and scripts need no
buttons. In a group only its admins may change them: relaybot's `[access] admins`, or whom the
platform calls an admin of that chat (:meth:`engine.Channel.is_chat_admin`). Anyone allowed may
look. What the settings are, and where they are kept, is engine/chat/_settings/_chat.py's.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from engine._channel import Action, Button, InboundMessage, Reply
from engine.chat._settings._chat import ChatSettings
from engine.i18n import LANGUAGES, N_, translator
from engine.loop import ConversationKey
from engine.store import ReplyMode, VoiceReplies

log = logging.getLogger("engine.chat._settings._chat")

_SET = "set:"

MAX_PERSONA = 2000

USAGE = N_(
    "Change them with buttons, or: /settings persona <text> (or persona off), "
    "/settings model <name> (or model default), /settings mode mentions|all (groups), "
    "/settings language {languages} (or language auto)."
)

THINKING_USAGE = N_("/settings thinking on|off: show a short view of the model's reasoning.")

VOICE_USAGE = N_("/settings voice voice|always|never: when answers are spoken too.")

_PRIVACY = N_(
    "On Telegram, the bot sees every group message only with privacy mode off (@BotFather → "
    "/setprivacy → Disable), and after being re-added to the group."
)

_AUTO = ("auto", "default", "off")


class SettingsMenu:
    def __init__(self, settings: ChatSettings) -> None:
        self.settings = settings  # the chats' settings it shows and changes

    async def command(self, msg: InboundMessage) -> Reply:
        key = ConversationKey(msg.channel, msg.chat_id)
        words = msg.text.split(maxsplit=2)[1:]  # after "/settings" (or "/settings@bot")
        if not words:
            return self.menu(key, msg.is_private, language=msg.language)
        _ = translator(msg.language).gettext
        what, value = words[0].lower(), (words[1] if len(words) > 1 else "").strip()
        if what == "persona" and not value:
            current = self.settings.of(key).persona
            shown = (
                _("The persona here is: {persona}").format(persona=current)
                if current
                else _("No persona is set here.")
            )
            return Reply(
                f"{shown}\n" + _("Set one with /settings persona <text>; clear it with off.")
            )
        change = self._parse(what, value, msg.is_private, msg.language)
        if isinstance(change, str):
            return Reply(f"{change}\n{_usage(msg.language)}")
        return await self._change(key, msg.user_id, msg.is_private, change)

    async def act(self, action: Action) -> Reply | None:
        """A press on /settings' buttons; None when the action is not one of ours."""
        if not action.action.startswith(_SET):
            return None
        what, _sep, value = action.action.removeprefix(_SET).partition(":")
        if what == "model" and value.isdigit() and int(value) < len(self.settings.models):
            value = self.settings.models[int(value)]
        change = self._parse(what, value, action.is_private, action.language)
        if isinstance(change, str):
            return None
        key = ConversationKey(action.channel, action.chat_id)
        return await self._change(key, action.user_id, action.is_private, change)

    def menu(
        self, key: ConversationKey, is_private: bool, note: str = "", language: str | None = None
    ) -> Reply:
        _ = translator(language).gettext
        prefs = self.settings.of(key)
        default = _("{model} (default)").format(model=self.settings.default_model)
        lines = [
            _("Settings of this chat:"),
            _("• Persona: {persona}").format(persona=prefs.persona or _("(none)")),
            _("• Model: {model}").format(model=self.settings.model(key) or default),
        ]
        buttons = []
        if prefs.persona:
            buttons.append(Button(_("Clear persona"), f"{_SET}persona:off"))
        if self.settings.models:
            buttons += [
                Button(_("Model: {model}").format(model=name)[:40], f"{_SET}model:{i}")
                for i, name in enumerate(self.settings.models)
                if name != prefs.model
            ]
            if prefs.model:
                buttons.append(Button(_("Default model"), f"{_SET}model:default"))
        if self.settings.speaks:
            voice = prefs.voice or VoiceReplies.TO_VOICE
            lines.append(_("• Voice replies: {voice}").format(voice=_(_VOICE_WORDS[voice])))
            buttons += [
                Button(_(_VOICE_BUTTONS[v]), f"{_SET}voice:{v.value}")
                for v in VoiceReplies
                if v != voice
            ]
        if not is_private:
            mode = prefs.reply_mode
            lines.append(_("• I answer: {mode}").format(mode=_(_MODE_WORDS[mode])))
            buttons += [
                Button(_(_MODE_BUTTONS[m]), f"{_SET}mode:{m.value}") for m in ReplyMode if m != mode
            ]
        lines.append(_("• Language: {language}").format(language=_language_name(prefs.language, _)))
        buttons += [
            Button(LANGUAGES[code][1], f"{_SET}language:{code}")
            for code in LANGUAGES
            if code != prefs.language
        ]
        if prefs.language:
            buttons.append(Button(_("Language: automatic"), f"{_SET}language:auto"))
        shown = _("shown") if prefs.thinking else _("hidden")
        lines.append(_("• The model's thinking: {shown}").format(shown=shown))
        flip = ("off", _("Hide thinking")) if prefs.thinking else ("on", _("Show thinking"))
        buttons.append(Button(flip[1], f"{_SET}thinking:{flip[0]}"))
        usage = [
            _usage(language),
            _(THINKING_USAGE),
            *([_(VOICE_USAGE)] if self.settings.speaks else []),
        ]
        lines.append(" ".join(usage))
        return Reply(f"{note}\n" * bool(note) + "\n".join(lines), tuple(buttons))

    def _parse(
        self, what: str, value: str, is_private: bool, language: str | None
    ) -> dict[str, object] | str:
        """The fields to change, or what is wrong with the request."""
        _ = translator(language).gettext
        if what == "language":
            if value.lower() in _AUTO:
                return {"language": None}
            if value.lower() not in LANGUAGES:
                return _("Unknown language {language!r}.").format(language=value)
            return {"language": value.lower()}
        if what == "persona":
            if value.lower() in ("off", "none", "clear"):
                return {"persona": None}
            if len(value) > MAX_PERSONA:
                return _("A persona can be at most {limit} characters.").format(limit=MAX_PERSONA)
            return {"persona": value}
        if what == "model":
            if value.lower() in ("default", "off"):
                return {"model": None}
            if not self.settings.models:
                return _("This bot offers no other models ([llm] models_allowed is empty).")
            if value not in self.settings.models:
                return _("Unknown model {model!r}; the models here are: {models}.").format(
                    model=value, models=", ".join(self.settings.models)
                )
            return {"model": value}
        if what == "mode":
            if is_private:
                return _("The reply mode is for groups: in a private chat I answer every message.")
            try:
                return {"reply_mode": ReplyMode(value.lower())}
            except ValueError:
                return _("The reply mode is mentions or all.")
        if what == "thinking":
            if value.lower() not in ("on", "off"):
                return _("Thinking is shown (on) or not (off).")
            return {"thinking": value.lower() == "on"}
        if what == "voice" and self.settings.speaks:
            try:
                return {"voice": VoiceReplies(value.lower().removeprefix("to ").strip() or "?")}
            except ValueError:
                return _("Voice replies are: voice (to voice messages), always or never.")
        return _("Unknown setting {setting!r}.").format(setting=what)

    async def _change(
        self, key: ConversationKey, user_id: str, is_private: bool, change: dict[str, object]
    ) -> Reply:
        _ = translator(self.settings.languages.of(key, user_id)).gettext
        if not is_private and not await self._may_change(key, user_id):
            return Reply(
                _("Only this group's admins can change its settings. /settings shows them.")
            )
        prefs = dataclasses.replace(self.settings.of(key), **change)  # type: ignore[arg-type]
        await self.settings.save(prefs, user_id)
        log.info("/settings: %s changed %s in %s", user_id, ", ".join(change), key)
        language = self.settings.languages.of(key, user_id)  # a new choice answers in its language
        _ = translator(language).gettext
        note = _("Saved.")
        if change.get("reply_mode") is ReplyMode.ALL and key.channel == "telegram":
            note += " " + _(_PRIVACY)
        return self.menu(key, is_private, note, language)

    async def _may_change(self, key: ConversationKey, user_id: str) -> bool:
        if self.settings.policy.is_admin(key.channel, user_id):
            return True
        channel = self.settings.channels.get(key.channel)
        if channel is None:
            return False
        try:
            return await channel.is_chat_admin(key.chat_id, user_id)
        except Exception as exc:  # the platform could not say: refuse, and say why in the log
            log.warning("could not check whether %s is an admin of %s: %s", user_id, key, exc)
            return False


_MODE_WORDS = {
    None: N_("as the bot is set up for every group (mentions, unless its owner chose all)"),
    ReplyMode.MENTIONS: N_("only when mentioned or replied to"),
    ReplyMode.ALL: N_("every message"),
}


_MODE_BUTTONS = {
    ReplyMode.MENTIONS: N_("Answer mentions only"),
    ReplyMode.ALL: N_("Answer every message"),
}


def _usage(language: str | None) -> str:
    return translator(language).gettext(USAGE).format(languages="|".join(LANGUAGES))


def _language_name(code: str | None, _: Callable[[str], str]) -> str:
    if code in LANGUAGES:
        return LANGUAGES[code][1]
    return _("automatic (each person's own, as their app says)")


_VOICE_WORDS = {
    VoiceReplies.TO_VOICE: N_("to voice messages"),
    VoiceReplies.ALWAYS: N_("always"),
    VoiceReplies.NEVER: N_("never"),
}


_VOICE_BUTTONS = {
    VoiceReplies.TO_VOICE: N_("Speak to voice messages"),
    VoiceReplies.ALWAYS: N_("Always speak"),
    VoiceReplies.NEVER: N_("Never speak"),
}

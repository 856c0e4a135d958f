"""Who may use the bot, and pairing: a stranger asks, an owner answers with a button.

A person is let in by the config (`allowed_users`, per platform), by being an owner (`[access]
admins`), or by an owner's yes, stored per platform (engine/store/_people/_access.py) and kept until
revoked (`relaybot users revoke`, or /users). With `[access] pairing` on (the default), a stranger
who writes to the bot in private (or addresses it in a group) gets one answer with a short code, and
every owner a private message naming them, with Allow and Deny. Nobody gets in without an owner's
yes: an unanswered request lapses after a day, a denied person is not asked about again for a day,
one request pends per person, and the owners are told of at most `per_hour` requests an hour from
everyone together. Further messages of a waiting stranger get no answer; other refusals at most one
answer per person every ten minutes.

The buttons' payloads name the request's code only: a press is checked against the store (still
pending, pressed by an owner), so they keep working after a restart, on any instance.

Who an owner let in is kept in memory (asked at every message), and read again whenever it may
have changed anywhere: a revoke or an approval by another instance, by `relaybot users`, or by a
console, is told through the store (engine/store/_people/_access.py) and in force within about a
second. A read begun before a change here is not kept (`_generation`), so a revoke is never
undone by a read that raced it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping

from engine import metrics
from engine._channel import Action, Button, Channel, InboundMessage, Reply
from engine._clock import monotonic, wall
from engine.chat._settings._languages import Languages
from engine.chat._settings._live import Live, Policy
from engine.chat._turns._notices import Notices
from engine.i18n import N_, translator
from engine.loop import ConversationKey
from engine.store import AccessRequest, RequestState, Store
from engine.work import Tasks

log = logging.getLogger(__name__)

_ALLOW = "pair:ok:"
_DENY = "pair:no:"
_REVOKE = "pair:rv:"
_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud or typed
_QUIET_S = 600.0  # one refusal per person this often
_MAX_QUIET = 10_000  # the refusal memory is emptied past this many people


def new_code() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(6))


class Pairing:
    def __init__(
        self,
        store: Store,
        live: Live,
        policy: Policy,
        channels: Mapping[str, Channel],
        notices: Notices,
        tasks: Tasks,
        languages: Languages | None = None,
    ) -> None:
        self.store = store
        self.languages = languages or Languages(lambda: "en", lambda key: None)
        self.live = live
        self.policy = policy
        self.channels = channels
        self.notices = notices
        self.tasks = tasks
        self._approved: set[tuple[str, str]] = set()
        self._generation = 0  # changed by every load begun and every revoke here
        self._told: dict[tuple[str, str], float] = {}
        store.access.on_change(lambda: tasks.spawn(self.load(), "pairing-reload"))

    async def load(self) -> None:
        """The people owners let in, from the store (at start-up, and after any change)."""
        self._generation += 1
        mine = self._generation
        approved = {(a.channel, a.user_id) for a in await self.store.access.approved()}
        if mine == self._generation:  # no later load nor revoke began meanwhile
            self._approved = approved

    def allowed(self, channel: str, user_id: str) -> bool:
        """The config's users, the owners, and those an owner let in (as known here)."""
        return (
            self.live.settings.allowed(channel, user_id)
            or self.policy.is_admin(channel, user_id)
            or (channel, user_id) in self._approved
        )

    async def recheck(self, channel: str, user_id: str) -> bool:
        """Ask the store (let in or revoked meanwhile by another instance, or the CLI)."""
        before = self._generation
        if await self.store.access.is_approved(channel, user_id):
            if before == self._generation:  # else a load or a revoke began meanwhile
                self._approved.add((channel, user_id))
            return True
        self._approved.discard((channel, user_id))
        return self.allowed(channel, user_id)

    async def refusal(self, msg: InboundMessage, *, always: bool = False) -> str | None:
        """What to answer a person who is not let in (None: nothing, they were answered
        already); a new request is made and the owners asked when pairing is on. `always`: a
        command, which must be answered."""
        _ = translator(msg.language).gettext
        log.warning("refused %s user %s (%s)", msg.channel, msg.user_id, msg.user_name)
        metrics.refused(msg.channel, "not_allowed")
        if not (msg.is_private or msg.mentioned or always):  # no reply to chatter in a group
            return None
        pairing = self.live.settings.pairing
        if pairing.enabled and self.policy.admins:
            text = await self._ask(msg, always)
            if text is not None or not always:
                return text
        elif not always and not self._first_refusal(msg):
            return None
        return _(
            "Sorry, you are not allowed to use this bot. Your user id is {user_id}; ask the "
            "owner to add it to allowed_users."
        ).format(user_id=msg.user_id)

    def _first_refusal(self, msg: InboundMessage) -> bool:
        now = monotonic()
        who = (msg.channel, msg.user_id)
        if now - self._told.get(who, -_QUIET_S) < _QUIET_S:
            return False
        if len(self._told) >= _MAX_QUIET:
            self._told.clear()
        self._told[who] = now
        return True

    async def _ask(self, msg: InboundMessage, always: bool) -> str | None:
        _ = translator(msg.language).gettext
        pairing = self.live.settings.pairing
        now = wall()
        latest = await self.store.access.latest(msg.channel, msg.user_id)
        if latest is not None and latest.state is RequestState.PENDING and latest.expires_at > now:
            return _waiting(latest, _) if always or self._first_refusal(msg) else None
        if (
            latest is not None
            and latest.state is RequestState.DENIED
            and now - (latest.decided_at or now) < pairing.expiry_s
        ):
            told = always or self._first_refusal(msg)
            return _(SAID_NO) if told else None
        if await self.store.access.asked_since(now - 3600) >= pairing.per_hour:
            log.warning("pairing: %d asked this hour; %s not asked", pairing.per_hour, msg.user_id)
            if not (always or self._first_refusal(msg)):
                return None
            return _("Sorry, you are not allowed to use this bot yet; please try again later.")
        request = AccessRequest(
            new_code(),
            msg.channel,
            msg.user_id,
            msg.user_name,
            msg.username or "",
            msg.chat_id,
            now,
            now + pairing.expiry_s,
        )
        if not await self.store.access.ask(request):  # asked at the same moment, or a clash
            return None
        self._told[(msg.channel, msg.user_id)] = monotonic()
        log.info("pairing: %s:%s asks to be let in (%s)", msg.channel, msg.user_id, request.code)
        for owner in sorted(self.policy.admins):
            channel_name, _sep, user_id = owner.partition(":")
            channel = self.channels.get(channel_name)
            if channel is not None:
                self.tasks.spawn(self._tell_owner(channel, user_id, request), "pairing-ask")
        return _(
            "I don't know you yet, so I asked the owner to let you in (request {code}). I will "
            "tell you here when they answer."
        ).format(code=request.code)

    async def _tell_owner(self, channel: Channel, user_id: str, request: AccessRequest) -> None:
        _ = translator(self.languages.of(ConversationKey(channel.name, user_id), user_id)).gettext
        asks = _("{who} asks to use the bot (request {code}; in chat {chat}). Let them in?")
        reply = Reply(
            asks.format(who=_who(request, _), code=request.code, chat=request.chat_id),
            (
                Button(_("Allow"), f"{_ALLOW}{request.code}"),
                Button(_("Deny"), f"{_DENY}{request.code}"),
            ),
        )
        try:
            sent = await channel.send_private(user_id, reply)
        except Exception as exc:
            log.warning("pairing: could not ask owner %s:%s: %s", channel.name, user_id, exc)
            return
        if sent is None:
            log.warning("pairing: the %s channel cannot write to owner %s", channel.name, user_id)

    async def act(self, action: Action) -> Reply | None:
        """A press on Allow, Deny (an owner's message) or Revoke (/users); None when not ours."""
        if action.action.startswith((_ALLOW, _DENY)):
            allow = action.action.startswith(_ALLOW)
            code = action.action.removeprefix(_ALLOW if allow else _DENY)
        elif action.action.startswith(_REVOKE):
            code, allow = "", False
        else:
            return None
        _ = translator(action.language).gettext
        if not self.policy.is_admin(action.channel, action.user_id):
            return Reply(_("Only the bot's owners can answer this."))
        by = f"{action.channel}:{action.user_id}"
        if not code:
            channel, _sep, user_id = action.action.removeprefix(_REVOKE).partition(":")
            revoked = await self.revoke(channel, user_id, by, action.language)
            return await self.menu(revoked, action.language)
        decided = await self.store.access.decide(code, allow, by, wall())
        if decided is None:
            return Reply(await self._already(code, _))
        log.info("pairing: %s %s:%s (by %s)", decided.state, decided.channel, decided.user_id, by)
        theirs = ConversationKey(decided.channel, decided.chat_id)
        said = translator(self.languages.of(theirs, decided.user_id)).gettext
        if allow:
            self._approved.add((decided.channel, decided.user_id))
            told = said("The owner let you in: write to me whenever you like.")
        else:
            told = said(SAID_NO)
        self.tasks.spawn(
            self.notices.say(decided.channel, decided.chat_id, told, None), "pairing-answer"
        )
        done = (
            _("Allowed: {who} (request {code}).") if allow else _("Denied: {who} (request {code}).")
        )
        return Reply(done.format(who=_who(decided, _), code=decided.code))

    async def _already(self, code: str, _: Callable[[str], str]) -> str:
        request = await self.store.access.request(code)
        if request is None:
            return _("This request is unknown.")
        if request.state is RequestState.PENDING or request.state is RequestState.EXPIRED:
            return _("Request {code} expired: {who} may ask again.").format(
                code=code, who=_who(request, _)
            )
        return _("Request {code} was already answered: {state} by {by}.").format(
            code=code, state=request.state, by=request.decided_by
        )

    async def revoke(self, channel: str, user_id: str, by: str, language: str | None = None) -> str:
        _ = translator(language).gettext
        self._approved.discard((channel, user_id))
        self._generation += 1  # a load reading before the revoke must not bring them back
        if await self.store.access.revoke(channel, user_id):
            log.info("pairing: %s user %s revoked by %s", channel, user_id, by)
            revoked = _("Revoked: {platform} user {user_id} is no longer let in.")
            return revoked.format(platform=channel, user_id=user_id)
        not_let_in = _("{platform} user {user_id} was not let in by an owner.")
        return not_let_in.format(platform=channel, user_id=user_id)

    async def menu(self, note: str = "", language: str | None = None) -> Reply:
        """/users: who is let in, and from where, with a button to revoke each approval."""
        _ = translator(language).gettext
        lines = []
        settings = self.live.settings
        for channel, users in sorted(settings.allowed_users.items()):
            for user in sorted(users):
                who = _("everyone") if user == "*" else user
                lines.append(_("• {platform} {who}: config").format(platform=channel, who=who))
        for owner in sorted(settings.admins):
            lines.append(_("• {who}: owner").format(who=owner.replace(":", " ", 1)))
        approved = await self.store.access.approved()
        buttons = []
        for a in approved:
            lines.append(
                _("• {platform} {user_id} ({name}): approved by {by}").format(
                    platform=a.channel, user_id=a.user_id, name=a.user_name, by=a.approved_by
                )
            )
            action = f"{_REVOKE}{a.channel}:{a.user_id}"
            if len(action) <= 61:
                revoke = _("Revoke {name}").format(name=a.user_name or a.user_id)
                buttons.append(Button(revoke[:40], action))
        text = _("Who may use me:") + "\n" + ("\n".join(lines) or _("nobody yet"))
        return Reply(f"{note}\n{text}".strip(), tuple(buttons[:20]))


SAID_NO = N_("Sorry, the owner said no.")


def _who(request: AccessRequest, _: Callable[[str], str]) -> str:
    handle = f" (@{request.username})" if request.username else ""
    return _("{name}{handle}, {platform} user {user_id}").format(
        name=request.user_name or _("Someone"),
        handle=handle,
        platform=request.channel,
        user_id=request.user_id,
    )


def _waiting(request: AccessRequest, _: Callable[[str], str]) -> str:
    return _(
        "Your request {code} is waiting for the owner's answer; I will tell you here when they "
        "answer."
    ).format(code=request.code)

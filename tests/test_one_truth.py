"""One truth in force (issue 39): a seeded random schedule of messages, reloads (who may use the
bot, limits, memory budget, model), revokes, forgets, pairing and settings changes, made through
the daemons and through the command line, against two instances on PostgreSQL and one on SQLite.
After every step: no user who is not let in is answered, no forgotten text reaches a model
request, and every accepted message is answered once. A change made elsewhere (the command line,
the other instance) is waited for at most two seconds: what the daemon promises.

The instances are the real App, each with a recording channel, over a real store; the fake
OpenAI server records every request and echoes the last user message (so an answer carries its
message's token); the command line is its own functions, each opening its own connection to the
store as its process would."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from bot._operate import forget
from bot._reload import Reloader
from bot._users import users
from bot.app import App
from bot.config import Config
from engine import Action, Command
from engine.loop import ConversationKey
from engine.store import ComposedStore
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.postgres import PostgresServer
from tools.builtins import user_owner

STEPS = 200
SEED = 39
PEOPLE = [str(n) for n in range(101, 109)]  # Telegram user ids are numbers
OWNER = "900"
GROUPS = ("g1", "g2")
IN_FORCE_S = 2.0  # what another process changed is in force within this long


async def until(seconds: float, check: Callable[[], bool], what: str) -> None:
    """Wait until `check()` holds (the daemons' own tasks make it true); fail after `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            while not check():  # noqa: ASYNC110 (nothing to wait on from outside the daemon)
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"not within {seconds} s: {what}") from None


@dataclass
class World:
    """What the test expects: who is let in, what was forgotten, what was answered."""

    llm: FakeOpenAI
    apps: list[App]
    channels: list[RecordingChannel]
    makes: list[Callable[..., Config]]  # each instance's config maker (its [instance], its store)
    rng: random.Random
    configured: set[str] = field(default_factory=set)  # allowed_users of the config in force
    approved: set[str] = field(default_factory=set)  # let in by an owner or the command line
    forgotten: set[str] = field(default_factory=set)  # tokens that must never be sent again
    said: dict[str, list[str]] = field(default_factory=dict)  # each user's tokens
    answered: list[str] = field(default_factory=list)  # tokens of accepted messages
    refused: list[str] = field(default_factory=list)  # tokens of messages not let in
    personas: dict[str, str] = field(default_factory=dict)  # private chat -> persona token
    # (a private chat's id is its user's, as on Telegram)
    checked: int = 0  # requests checked for forgotten tokens
    n: int = 0

    def token(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n:04d}Z"

    def let_in(self, user: str) -> bool:
        return user in self.configured or user in self.approved

    def configs(self) -> list[Config]:
        """A config for each instance: who may use the bot, limits, memory budget and model
        drawn anew (the same for every instance)."""
        rng = self.rng
        sections = {
            "telegram": {"allowed_users": sorted(self.configured)},
            "access": {"admins": [f"telegram:{OWNER}"], "pairing": True},
            "limits": {"messages_per_minute": rng.randint(500, 1000)},
            "memory": {"max_tokens": rng.randint(200, 800)},
            "llm": {"model": rng.choice(["fake-model", "fake-model-b"]), "stream": False},
        }
        return [make(**sections) for make in self.makes]

    def shown(self) -> list[str]:
        return [s.text for ch in self.channels for s in ch.log if s.kind in ("send", "edit")]


async def check(w: World) -> None:
    """The three promises, after a step."""
    new = w.llm.requests[w.checked :]
    w.checked = len(w.llm.requests)
    sent = "\n".join(json.dumps(r) for r in new)
    leaked = [t for t in w.forgotten if t in sent]
    assert not leaked, f"forgotten text reached the model: {leaked}"
    everything = "\n".join(json.dumps(r) for r in w.llm.requests)
    shown = "\n".join(w.shown())
    for token in w.refused[-3:]:
        assert token not in everything and token not in shown, f"{token} was answered"
    for token in w.answered[-3:]:
        assert sum(token in text for text in w.shown()) == 1, f"{token} not answered once"


# -- steps ---------------------------------------------------------------------------------


async def message(w: World) -> None:
    user = w.rng.choice([*PEOPLE, *PEOPLE, OWNER])
    private = w.rng.random() < 0.4
    chat = user if private else w.rng.choice(GROUPS)
    token = w.token("T")
    app = w.rng.choice(w.apps)
    ch = w.channels[w.apps.index(app)]
    let_in = w.let_in(user) or user == OWNER
    msg = ch.message(f"{token} hello", chat_id=chat, user_id=user, is_private=private)
    await app.dispatcher.handle_inbound(msg)  # a refusal is decided here
    if not let_in:
        w.refused.append(token)
        return
    w.said.setdefault(user, []).append(token)
    w.answered.append(token)
    await until(10, lambda: any(token in t for t in w.shown()), f"{token} answered")
    for a in w.apps:
        await a.dispatcher.wait_idle("telegram", chat)
    if private and chat in w.personas:
        assert w.personas[chat] in json.dumps(w.llm.requests[-1])  # the chat's settings


async def reload(w: World) -> None:
    w.configured = set(w.rng.sample(PEOPLE, w.rng.randint(2, 5)))
    for app, config in zip(w.apps, w.configs(), strict=True):  # the operator reloads each
        assert await Reloader(app, None).apply(config)


async def revoke(w: World) -> None:
    if not w.approved:
        return
    user = w.rng.choice(sorted(w.approved))
    w.approved.discard(user)
    if w.rng.random() < 0.5:
        assert await users(w.apps[0].config, "revoke", f"telegram:{user}", io.StringIO()) == 0
    else:  # an owner's Revoke button under /users, on either instance
        press = Action("telegram", OWNER, OWNER, f"pair:rv:telegram:{user}", True)
        await w.rng.choice(w.apps).dispatcher.handle_action(press)
    if user not in w.configured:
        await until(
            IN_FORCE_S,
            lambda: not any(a.dispatcher.allowed("telegram", user) for a in w.apps),
            f"{user} revoked everywhere",
        )


async def allow(w: World) -> None:
    """Pairing: a stranger asks in private and an owner allows; or the command line lets in."""
    strangers = [u for u in PEOPLE if not w.let_in(u)]
    if not strangers:
        return
    user = w.rng.choice(strangers)
    if w.rng.random() < 0.5:
        assert await users(w.apps[0].config, "allow", f"telegram:{user}", io.StringIO()) == 0
        w.approved.add(user)
        return
    app = w.rng.choice(w.apps)
    ch = w.channels[w.apps.index(app)]
    token = w.token("T")
    ask = ch.message(f"{token} let me in", chat_id=user, user_id=user)
    await app.dispatcher.handle_inbound(ask)
    w.refused.append(token)
    waiting = [r for r in await app.store.access.waiting(0) if r.user_id == user]
    if not waiting:  # asked too often this hour, or denied lately: nothing to press
        return
    press = Action("telegram", OWNER, OWNER, f"pair:ok:{waiting[-1].code}", True)
    done = await w.rng.choice(w.apps).dispatcher.handle_action(press)
    assert done is not None and "Allowed" in done.text
    w.approved.add(user)


async def forget_someone(w: World) -> None:
    user = w.rng.choice(PEOPLE)
    before = [heard(a) for a in w.apps]
    if w.rng.random() < 0.5 or not w.let_in(user):  # /forget_me is for those let in
        out = io.StringIO()
        assert await forget(w.apps[0].config, f"telegram:{user}", True, out) == 0
        outside = "Deleted" in out.getvalue()  # else nothing was written
    else:
        press = Action("telegram", user, user, f"forget:yes:{user}", True)
        done = await w.rng.choice(w.apps).dispatcher.handle_action(press)
        assert done.text.startswith(("Done", "I have nothing")), done.text
        outside = False
    w.forgotten.update(w.said.pop(user, []))
    w.forgotten.add(f"MEMORY-OF-{user}")
    if persona := w.personas.pop(user, None):
        w.forgotten.add(persona)
    w.approved.discard(user)  # an owner's approval goes with the rest
    key = ConversationKey("telegram", user)

    def let_go() -> bool:
        return all(
            a.dispatcher.chat_settings.of(key).persona is None
            and (not outside or heard_since(a, was))
            and (user in w.configured or not a.dispatcher.allowed("telegram", user))
            for a, was in zip(w.apps, before, strict=True)
        )

    await until(IN_FORCE_S, let_go, f"{user} forgotten everywhere")


async def settings(w: World) -> None:
    user = w.rng.choice([u for u in PEOPLE if w.let_in(u)] or [OWNER])
    persona = w.token("P")
    app = w.rng.choice(w.apps)
    ch = w.channels[w.apps.index(app)]
    msg = ch.message(f"/settings persona {persona}", chat_id=user, user_id=user)
    reply = await app.dispatcher.handle_command(msg, Command.SETTINGS)
    assert persona in reply.text or "persona" in reply.text.lower()
    w.personas[user] = persona
    key = ConversationKey("telegram", user)
    await until(
        IN_FORCE_S,
        lambda: all(a.dispatcher.chat_settings.of(key).persona == persona for a in w.apps),
        "the persona everywhere",
    )


# How often each SQLite daemon heard of another process's write (its store's watch); a
# PostgreSQL store keeps nothing of the kind in memory: its instances count as having heard.
_HEARD: dict[int, int] = {}


def heard(app: App) -> int:
    return _HEARD.get(id(app), 0)


def heard_since(app: App, was: int) -> bool:
    return id(app) not in _HEARD or _HEARD[id(app)] > was


def listen(app: App) -> None:
    store = app.store
    if not isinstance(store, ComposedStore) or store.db.dialect.shared:
        return
    _HEARD[id(app)] = 0

    async def hook() -> None:
        _HEARD[id(app)] += 1

    store.db.after_outside_write(hook)


STEP_KINDS: list[tuple[Callable[[World], Any], int]] = [
    (message, 60),
    (reload, 8),
    (revoke, 8),
    (allow, 8),
    (forget_someone, 6),
    (settings, 10),
]


async def run_schedule(w: World, seed: int) -> None:
    kinds = [k for k, _ in STEP_KINDS]
    weights = [n for _, n in STEP_KINDS]
    for owner in PEOPLE[:2]:  # in their private chats' prompts
        await w.apps[0].store.memory.add(user_owner("telegram", owner), f"MEMORY-OF-{owner}")
    for step in range(STEPS):
        kind = w.rng.choices(kinds, weights)[0]
        try:
            await kind(w)
            await check(w)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, step {step} ({kind.__name__}): {exc}") from None
    assert len(w.answered) >= 30 and len(w.refused) >= 10 and w.forgotten  # it was tried
    for token in w.answered:
        assert sum(token in text for text in w.shown()) == 1, f"{token} not answered once"


@pytest.fixture
async def sqlite_world(make_config: Callable[..., Config], llm: FakeOpenAI) -> AsyncIterator[World]:
    async with world(llm, [make_config]) as w:
        yield w


@pytest.fixture
async def pg_world(
    make_config: Callable[..., Config], llm: FakeOpenAI, postgres: PostgresServer
) -> AsyncIterator[World]:
    url = postgres.new_database()

    def instance(name: str) -> Callable[..., Config]:
        return lambda **more: make_config(
            storage={"url": url}, instance={"id": name, "lease_s": 5}, **more
        )

    async with world(llm, [instance("a"), instance("b")]) as w:
        yield w


@contextlib.asynccontextmanager
async def world(llm: FakeOpenAI, makes: list[Callable[..., Config]]) -> AsyncIterator[World]:
    """The instances running, one per config maker, each with its recording channel."""
    w = World(llm, [], [], makes, random.Random(SEED))
    w.configured = set(PEOPLE[:3])
    async with contextlib.AsyncExitStack() as stack:
        for config in w.configs():
            ch = RecordingChannel(name="telegram")
            app = await stack.enter_async_context(App(config, channels=[ch]))
            listen(app)
            w.apps.append(app)
            w.channels.append(ch)
        yield w


async def test_one_instance_on_sqlite_and_the_command_line(sqlite_world: World) -> None:
    await run_schedule(sqlite_world, SEED)


async def test_two_instances_on_postgresql_and_the_command_line(pg_world: World) -> None:
    await run_schedule(pg_world, SEED)

"""Exactly once on Discord (issue 44): every answer relaybot creates carries a nonce derived from
its delivery record, sent with ``enforce_nonce``, so an answer that Discord took just before the
daemon died (the send window: the platform has it, the store never recorded it) is not created a
second time when the restart delivers it again; Discord returns the first message, which
relaybot records as delivered.

`relaybot run` runs as a subprocess against the fake Discord, which implements Discord's nonce
rule and kills the daemon (SIGKILL) from inside the create request, after the message exists and
before the answer reaches the daemon. Synchronisation is on recorded calls, never on sleeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._crash_rig import Daemon, TokenModel, delivery_records, token, write_files
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

GUILD, CHANNEL = 1001, 2001
ALICE = 4001
WAIT_S = 30.0


def answers(tok: str) -> Any:
    return lambda c: f"answer: {tok}" in str((c.json or {}).get("content"))


async def test_an_answer_sent_as_the_daemon_dies_is_not_sent_twice(tmp_path: Path) -> None:
    model = TokenModel()
    async with (
        FakeTelegram() as tg,
        FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as dc,
        FakeOpenAI(default=model) as llm,
    ):
        discord = (
            f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
            f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
            'respond_in_guilds = "all"\n'
        )
        files = write_files(tmp_path, tg, llm.base_url, extra=discord)
        daemon = Daemon(files, tg)
        first, second = token(1), token(2)

        async def die_in_the_send_window(message: dict[str, Any]) -> None:
            if f"answer: {first}" in message["content"]:
                dc.on_created = None
                daemon.kill_now()  # Discord has the answer; the daemon never hears so
                await daemon.wait_dead()

        try:
            await daemon.start()
            await dc.wait_for_gateway_op(2, timeout=WAIT_S)  # identified
            dc.on_created = die_in_the_send_window
            await dc.inject_message(CHANNEL, ALICE, f"{first} please", GUILD)
            taken = await dc.wait_for_call(
                "POST", rf"/channels/{CHANNEL}/messages", answers(first), timeout=WAIT_S
            )
            await daemon.wait_dead()
            await daemon.start()  # delivers the answer the store holds as not yet delivered
            resent = await dc.wait_for_call(
                "POST",
                rf"/channels/{CHANNEL}/messages",
                answers(first),
                after=dc.calls.index(taken) + 1,
                timeout=WAIT_S,
            )
            await dc.inject_message(CHANNEL, ALICE, f"{second} next", GUILD)
            await dc.wait_for_call(
                "POST", rf"/channels/{CHANNEL}/messages", answers(second), timeout=WAIT_S
            )
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            daemon.kill_now()
    posts = [c for c in dc.calls_to("POST", rf"/channels/{CHANNEL}/messages") if answers(first)(c)]
    assert len(posts) == 2  # sent again after the restart …
    assert posts[0].json["nonce"] == posts[1].json["nonce"]  # … as the same delivery
    assert posts[1].json["enforce_nonce"] is True
    shown = [m for m in dc.channel_messages(CHANNEL) if f"answer: {first}" in m["content"]]
    assert len(shown) == 1, shown  # the user sees it once
    assert resent.response["id"] == shown[0]["id"]  # Discord handed back the first message
    recorded = delivery_records(files.db) or {}
    assert (CHANNEL, int(shown[0]["id"])) in recorded  # and relaybot recorded it as delivered
    ours = [m for m in dc.channel_messages(CHANNEL) if m["author"]["id"] == str(dc.bot_id)]
    assert [m["content"].count(second) for m in ours].count(1) == 1  # and goes on as usual


async def test_the_fake_creates_a_message_once_per_nonce() -> None:
    """Discord's rule as the fake keeps it, through discord.py's own request."""
    import discord

    base = discord.http.Route.BASE  # process-wide in discord.py: put back after
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}) as dc:
        discord.http.Route.BASE = dc.api_base_url
        client = discord.Client(intents=discord.Intents.none())
        await client.login(dc.token)
        try:
            where = client.get_partial_messageable(CHANNEL)
            one = await where.send("hello", nonce="abc")
            two = await where.send("hello", nonce="abc")
            three = await where.send("hello", nonce="abd")
            too_long = None
            try:
                await where.send("hello", nonce="x" * 26)
            except discord.HTTPException as exc:
                too_long = exc.status
        finally:
            await client.close()
            discord.http.Route.BASE = base
    assert one.id == two.id != three.id
    assert len(dc.channel_messages(CHANNEL)) == 2
    assert too_long == 400

"""Discord shards on several instances (issue 21): two real `relaybot run` processes on one
PostgreSQL store, each connecting half of the fake gateway's shards (`shard_ids`), so each
receives only its own servers' messages and button presses, while a chat's turns run on
whichever instance holds the chat. A confirmation's press arrives on the shard of the server the
prompt was shown in, so it may reach the instance that did not run the turn. There it must
resume the turn once, wherever the turn goes on, and the destructive tool must run once.

Which instance takes a chat is a race between the instances (the least busy first); here it is
made certain: instance b's claims on chats reach the database 2 s late (a trigger that sleeps
for connections named "b", as a slow link to the database would), so instance a runs every
turn, those in b's server too, and b receives their presses (a those in its own server). The
store's chat leases, read while the turns wait at the fake model, show where each turn runs and
resumes; each instance's log shows which presses it took. The destructive tool
(benchmarks/_crash_rig.py's `wipe`) writes a line per run, so a second run would be seen
whichever process made it.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks._crash_rig import ROOT, Daemon, TokenModel, token, write_files
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.postgres import PostgresServer
from tests.test_discord import callback, posts
from tests.test_instances import LEASE_S, WAIT_S, wait_recorded
from tests.test_operating import relaybot

ALICE = 4101
MANAGER = 4102  # may change /settings in shard 1's server (Manage Server)
SHARDS = 2
OWNER = {0: "a", 1: "b"}  # the shard each instance connects
GUILD = {shard: FakeDiscord.guild_on_shard(shard, SHARDS) for shard in OWNER}
CHATS = {0: (2201, 2202), 1: (2211, 2212)}  # channels of each shard's server
SHARD_OF = {chat: shard for shard, chats in CHATS.items() for chat in chats}

# b's claims on chats are refused by the database (whether b is a chat's home or not): a takes
# every chat, through its sweep of unheld work if not at once
SLOW_B = """
CREATE FUNCTION b_never_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = 'b' THEN RETURN NULL; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER b_never_claims BEFORE INSERT ON chat_leases
    FOR EACH ROW EXECUTE FUNCTION b_never_claims();
"""


@dataclass
class Rig:
    pg: PostgresServer
    database: str
    dc: FakeDiscord
    llm: FakeOpenAI
    model: TokenModel
    daemons: dict[str, Daemon]

    def holders(self) -> dict[int, str]:
        """Discord chat → the instance holding it now."""
        rows = self.pg.psql(
            "SELECT l.chat_id || ' ' || i.name FROM chat_leases l JOIN instances i "
            "ON i.id = l.instance WHERE l.channel = 'discord'",
            self.database,
        )
        return {int(chat): name for chat, name in (r.split() for r in rows.splitlines() if r)}

    def resumable(self, part: str) -> bool:
        """Whether the store keeps a session to resume `part` from."""
        rows = self.pg.psql(
            f"SELECT count(*) FROM receivers WHERE channel = '{part}' AND resume IS NOT NULL",
            self.database,
        )
        return rows.strip() == "1"

    async def until(self, condition: Callable[[], bool]) -> None:
        """Poll a log or the database (other processes write them: no event to wait on)."""
        async with asyncio.timeout(WAIT_S):
            while not await asyncio.to_thread(condition):  # noqa: ASYNC110
                await asyncio.sleep(0.1)

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{d.log_tail(25)}" for n, d in self.daemons.items())


@pytest.fixture
async def rig(postgres: PostgresServer, tmp_path: Path) -> AsyncIterator[Rig]:
    url = postgres.new_database()
    database = url.split("/")[3].split("?")[0]
    postgres.psql(SLOW_B, database)
    model = TokenModel()
    guilds = {GUILD[shard]: list(chats) for shard, chats in CHATS.items()}
    async with (
        FakeTelegram() as tg,  # the rig's config has Telegram too (one instance polls it)
        FakeDiscord(guilds=guilds, users={ALICE: "Alice"}, shards=SHARDS, max_concurrency=2) as dc,
        FakeOpenAI(default=model) as llm,
    ):
        daemons = {}
        for shard, name in OWNER.items():
            discord = (
                f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
                f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
                f"shard_count = {SHARDS}\nshard_ids = [{shard}]\n"
            )
            files = write_files(
                tmp_path,
                tg,
                llm.base_url,
                store_url=f"{url}&application_name={name}",
                instance=name,
                lease_s=LEASE_S,
                llm_timeout_s=WAIT_S,
                extra=discord,
            )
            daemons[name] = Daemon(files, tg)
        try:
            yield Rig(postgres, database, dc, llm, model, daemons)
        finally:
            for daemon in daemons.values():
                if daemon.running:
                    daemon.kill_now()
                    await daemon.wait_dead()


async def test_a_press_on_the_other_instances_shard_resumes_the_turn_once(rig: Rig) -> None:
    dc = rig.dc
    await asyncio.gather(*(d.start(polls=False) for d in rig.daemons.values()))
    for shard in OWNER:
        await dc.wait_for_shard(shard, timeout=WAIT_S)
    assert sorted(dc.identified()) == [(shard, SHARDS) for shard in OWNER]

    rig.model.gate.clear()  # each turn waits at the model while the leases are read
    wanted = {chat: token(n) for n, chat in enumerate(SHARD_OF, start=1)}
    for chat, tok in wanted.items():
        guild = GUILD[SHARD_OF[chat]]
        await dc.inject_message(chat, ALICE, f"{tok} please wipe", guild, mentions_bot=True)
    await rig.llm.wait_requests(len(wanted), timeout=WAIT_S)
    assert rig.holders() == dict.fromkeys(wanted, "a"), rig.logs()  # b's server's turns too
    rig.model.gate.set()

    prompts: dict[int, Call] = {}
    for chat in wanted:
        prompts[chat] = await dc.wait_for_call(
            "POST", posts(chat), lambda c: bool((c.json or {}).get("components")), timeout=WAIT_S
        )
    rig.model.gate.clear()  # the resumed turns wait at the model once the tool ran
    for chat, prompt in prompts.items():  # each press comes on its server's shard
        row = prompt.json["components"][0]["components"]
        allow = next(b["custom_id"] for b in row if b["label"] == "Allow once")
        press = await dc.inject_button(allow, ALICE, chat, int(prompt.response["id"]))
        await dc.wait_for_call("POST", callback(press.id), timeout=WAIT_S)
    await rig.llm.wait_requests(2 * len(wanted), timeout=WAIT_S)
    assert rig.holders() == dict.fromkeys(wanted, "a"), rig.logs()  # resumed where they ran
    rig.model.gate.set()

    for chat, tok in wanted.items():
        await dc.wait_for_call(
            "POST",
            posts(chat),
            lambda c, tok=tok: f"wiped {tok}" in str((c.json or {}).get("content")),
            timeout=WAIT_S,
        )
    await wait_recorded(rig.pg, rig.database, quiet=True)
    for name, daemon in rig.daemons.items():
        assert await daemon.terminate() == 0, f"{name}\n{daemon.log_tail()}"

    runs = rig.daemons["a"].files.run_counts()  # one file for both instances
    assert runs == {tok: 1 for tok in wanted.values()}, f"{runs}\n{rig.logs()}"
    for chat, tok in wanted.items():
        sent = [str((c.json or {}).get("content")) for c in dc.calls_to("POST", posts(chat))]
        answers = [text for text in sent if text.startswith("answer:")]
        assert answers == [f"answer: {tok} | wiped {tok}"], (chat, sent)
    for chat in wanted:  # each press was taken by the instance with its shard
        taker = OWNER[SHARD_OF[chat]]
        log = rig.daemons[taker].files.log.read_text()
        assert f"in discord:{chat} approved by user {ALICE}" in log, rig.logs()


async def test_a_killed_instances_shard_moves_to_the_other_and_comes_back(rig: Rig) -> None:
    """b is killed: a takes b's shard over, resuming its gateway session, so what is written in
    b's server while nobody receives there is answered. b restarts: a gives the shard back, b
    resumes it, and messages there are answered again: each message once, with no new session.
    Later a starts alone after Discord ended both sessions: each shard identifies anew."""
    dc, a, b = rig.dc, rig.daemons["a"], rig.daemons["b"]
    await asyncio.gather(a.start(polls=False), b.start(polls=False))
    for shard in OWNER:
        await dc.wait_for_shard(shard, timeout=WAIT_S)
    await rig.until(lambda: rig.resumable("discord/shard-1"))  # b keeps its session
    env = {"PYTHONPATH": f"{a.files.directory}{os.pathsep}{ROOT}"}
    code, out, err = await relaybot("status", "-c", str(a.files.config), env=env)
    assert code == 0, err
    assert re.search(
        r"^receiving: discord/shard-0 \(a\), discord/shard-1 \(b\), telegram \([ab]\)$", out, re.M
    ), out
    tokens = iter(token(n) for n in range(1, 100))
    asked: dict[str, int] = {}  # token → the chat it was written in

    async def write(chat: int, words: str) -> None:
        tok = next(tokens)
        asked[tok] = chat
        await dc.inject_message(chat, ALICE, f"{tok} {words}", GUILD[SHARD_OF[chat]], True)

    async def answered() -> None:
        for tok, chat in asked.items():
            await dc.wait_for_call(
                "POST",
                posts(chat),
                lambda c, tok=tok: f"answer: {tok}" in str((c.json or {}).get("content")),
                timeout=WAIT_S,
            )

    b.kill_now()
    await b.wait_dead()
    reset = await dc.inject_slash("reset", ALICE, CHATS[1][0], GUILD[1])  # Discord: "failed"
    for chat in (*CHATS[1], CHATS[0][0]):  # b's server while nobody receives there, and a's
        await write(chat, "while b is dead")
    await answered()
    log = a.files.log.read_text()
    assert "discord/shard-1: this instance receives now" in log, rig.logs()
    # the /reset came again with the resumed session, too late to answer: not acted on
    assert f"not acting on an interaction by user {ALICE} from before" in log, rig.logs()
    assert dc.calls_to("POST", callback(reset.id)) == []

    await b.start(polls=False)
    await rig.until(lambda: b.files.log.read_text().count("shard-1: this instance receives") == 2)
    for chat in CHATS[1]:
        await write(chat, "after b is back")
    await answered()  # (two messages queued together are one turn, with one answer)
    # a resumed session brings no server details: the bot's role and the admins are read over
    # REST, so a mention of the bot's role is heard and a server admin may change /settings
    tok = next(tokens)
    asked[tok] = CHATS[1][1]
    await dc.inject_message(CHATS[1][1], ALICE, f"{tok} by role", GUILD[1], mentions_bot_role=True)
    managers = dc.add_role(GUILD[1], "Managers", 1 << 5)  # Manage Server
    dc.member_roles[(GUILD[1], MANAGER)] = [managers]
    changed = await dc.inject_slash(
        "settings", MANAGER, CHATS[1][0], GUILD[1], {"text": "mode all"}
    )
    reply = await dc.wait_for_call("POST", callback(changed.id), timeout=WAIT_S)
    assert str(reply.json["data"]["content"]).startswith("Saved."), (reply.json, rig.logs())
    await answered()
    await wait_recorded(rig.pg, rig.database, quiet=True)
    for name, daemon in rig.daemons.items():
        assert await daemon.terminate() == 0, f"{name}\n{daemon.log_tail()}"
    assert sorted(dc.identified()) == [(0, SHARDS), (1, SHARDS)]  # taken over by resuming
    assert "given back to the instance whose own it is" in a.files.log.read_text(), rig.logs()

    dc.end_sessions()  # as Discord does a while after the connections dropped
    await a.start(polls=False)  # alone: both sessions are stale, so each shard identifies anew
    for shard in OWNER:
        await dc.wait_for_shard(shard, timeout=WAIT_S)
    for chat in (CHATS[0][1], CHATS[1][1]):
        await write(chat, "after a restart alone")
    await answered()
    await wait_recorded(rig.pg, rig.database, quiet=True)
    assert await a.terminate() == 0, a.log_tail()
    assert sorted(dc.identified()) == [(0, SHARDS), (0, SHARDS), (1, SHARDS), (1, SHARDS)]
    for tok, chat in asked.items():
        sent = [str((c.json or {}).get("content")) for c in dc.calls_to("POST", posts(chat))]
        assert sum(f"answer: {tok}" in text for text in sent) == 1, (tok, sent, rig.logs())

"""Crash recovery in Telegram forum topics (issue 33): `relaybot run` as a subprocess against the
fake Bot API (which has topics) and the fake model, killed with SIGKILL mid-turn, restarted. What
the restart finishes or sends again lands in the topic the message came from, once, because the
store's chat id of a topic names the topic (channels/telegram/_topics.py). The rig is
tests/test_crash_recovery.py's; synchronisation is on recorded calls and the SQLite file."""

from __future__ import annotations

from benchmarks._crash_rig import Daemon, Kind
from tests.fakes.telegram_server import FakeTelegram, SendFaults
from tests.test_crash_recovery import WAIT_S, Rig, rig, token, wait_for_db, write_files

__all__ = ["rig"]  # the fixture

FORUM = -100900
PRIVATE = 5050


def topic_of(tg: FakeTelegram, chat: int, message_id: int) -> int | None:
    return tg.messages[(chat, message_id)].get("message_thread_id")


def say(r: Rig, chat: int, topic: int | None, n: int, words: str = "hello") -> str:
    tok = token(n)
    kind = "private" if chat > 0 else "supergroup"
    r.tg.inject_message(
        chat, chat if chat > 0 else 7, f"{tok} {words}", chat_type=kind, topic=topic
    )
    r.said.setdefault(chat, []).append(tok)
    return tok


def forum_rig(r: Rig) -> None:
    # The prompt in the group public (private replies off): the rig's ledger reads the chat.
    telegram = {"group_mode": "all", "private_replies": False}
    r.files = write_files(r.tmp, r.tg, r.llm.base_url, telegram=telegram)
    r.daemon = Daemon(r.files, r.tg)


async def test_a_turn_cut_off_in_a_topic_is_answered_in_that_topic(rig: Rig) -> None:
    forum_rig(rig)
    ideas, bugs = rig.tg.open_topic(FORUM, "Ideas"), rig.tg.open_topic(FORUM, "Bugs")
    mine = rig.tg.open_topic(PRIVATE, "Mine", chat_type="private")
    await rig.daemon.start()
    rig.model.gate.clear()
    where = {say(rig, FORUM, ideas, 1): ideas, say(rig, PRIVATE, mine, 2): mine}
    await rig.llm.wait_requests(2, timeout=WAIT_S)
    await rig.kill()
    where[say(rig, FORUM, bugs, 3)] = bugs  # while the daemon is down
    rig.model.gate.set()
    await rig.daemon.start()
    await rig.wait_until(lambda: rig.ledger.answered(where))
    assert await rig.daemon.terminate() == 0, rig.daemon.log_tail()
    for tok, topic in where.items():
        (answer,) = rig.ledger.answers(tok)
        assert topic_of(rig.tg, answer.chat, answer.message_id) == topic, rig.transcript()
    assert rig.tg.topic_texts(FORUM, None) == []  # nothing went to General


async def test_an_answer_stored_but_not_sent_at_a_kill_is_sent_to_its_topic(rig: Rig) -> None:
    forum_rig(rig)
    topic = rig.tg.open_topic(FORUM, "Ops")
    await rig.daemon.start()
    rig.tg.send_faults = SendFaults(1.0, statuses=(502,))
    first = say(rig, FORUM, topic, 1)
    await rig.tg.wait_for_call("sendMessage", status=502, timeout=WAIT_S)
    await wait_for_db(rig.files.db, f"answer: {first}", WAIT_S)  # stored, not delivered
    await rig.kill()
    rig.tg.send_faults = None
    second = say(rig, FORUM, topic, 2)
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    rig.assert_in_order()
    for tok in (first, second):
        (answer,) = rig.ledger.answers(tok)
        assert topic_of(rig.tg, FORUM, answer.message_id) == topic, rig.transcript()


async def test_a_confirmation_asked_in_a_topic_is_answered_there_after_a_restart(
    rig: Rig,
) -> None:
    forum_rig(rig)
    topic = rig.tg.open_topic(FORUM, "Ops")
    await rig.daemon.start()
    wanted = say(rig, FORUM, topic, 1, "please wipe")
    await rig.wait_until(lambda: bool(rig.ledger.of(Kind.PROMPT, FORUM)))
    (prompt,) = rig.ledger.of(Kind.PROMPT, FORUM)
    assert topic_of(rig.tg, FORUM, prompt.message_id) == topic
    await rig.kill()
    await rig.daemon.start()
    confirm = next(data for data in prompt.buttons if data.endswith(":y"))
    rig.tg.inject_callback(FORUM, 7, prompt.message_id, confirm)
    await rig.finish()
    (answer,) = rig.ledger.answers(wanted)
    assert f"wiped {wanted}" in answer.text
    assert topic_of(rig.tg, FORUM, answer.message_id) == topic, rig.transcript()
    assert rig.files.run_counts() == {wanted: 1}

"""A crash while an answer streams as a draft (issue 33): `relaybot run` as a subprocess against
the fake Bot API and the fake model, killed with SIGKILL while the answer is a draft in a private
chat, restarted. A draft is no message: nothing half-written is left behind, and the restart
answers once. The rig is tests/test_crash_recovery.py's; synchronisation is on recorded calls."""

from __future__ import annotations

from tests.test_crash_recovery import WAIT_S, Rig, rig

__all__ = ["rig"]  # the fixture

CHAT = 5101


def stream(r: Rig) -> None:
    config = r.files.config
    config.write_text(config.read_text().replace("[llm]\n", "[llm]\nstream = true\n", 1))


async def test_a_kill_mid_draft_leaves_nothing_half_written_and_the_answer_comes_once(
    rig: Rig,
) -> None:
    stream(rig)
    rig.llm.stream_chunk_chars, rig.llm.stream_chunk_delay_s = 2, 0.5  # "answer: q…" takes 4 s
    await rig.daemon.start()
    tok = rig.say(CHAT)
    await rig.tg.wait_for_call("sendMessageDraft", timeout=WAIT_S)
    await rig.kill()
    shown = [c for c in rig.tg.calls if c.method in ("sendMessage", "editMessageText")]
    assert shown == []  # only a draft was shown, and it vanishes by itself
    rig.llm.stream_chunk_delay_s = 0.0
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    assert rig.tg.chat_texts(CHAT) == [f"answer: {tok}"]
    assert rig.tg.calls_of("editMessageText") == []

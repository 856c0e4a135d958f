"""The wall clock jumps an hour forward and back (issue 34), through the real daemon.

The daemon's `time.time()` is shifted by tests/fakes/wall_shift.py (the machine's clock is
left alone; the monotonic clock does not move, as with a real NTP correction). What is due at
a wall time follows the wall clock, what lasts a length of time follows the monotonic one:

- a reminder and a scheduled task that fall due inside the jump run once, at once (the jump
  wakes them, no minute's nap), and not again after the jump back;
- a confirmation asked before the jump forward is not expired by it (it is approved after the
  jump and runs once); one asked before the jump back expires after its timeout, not an hour
  later;
- every message is answered once; one log line per jump, no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._crash_rig import (
    Daemon,
    Kind,
    Ledger,
    decide,
    token,
    wait_for_log,
    write_files,
)
from tests.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wall_shift import WallShift
from tests.test_faults_store import log_records

HOUR = 3600.0
TIMEOUT_S = 15.0  # confirmation_timeout_s
WAIT_S = 30.0
REMINDED, SCHEDULED = token(98), token(99)  # named by the reminder and by the scheduled run
ASKER, REMINDER, SCHEDULER, LATE_ASKER, TALKER = 7101, 7102, 7103, 7104, 7105


def _last_user(body: dict[str, Any]) -> str:
    last = body["messages"][-1]
    content = last.get("content") if last.get("role") == "user" else ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


async def model(body: dict[str, Any]) -> Reply:
    """The rig's model, plus a reminder in half an hour and a task every half hour."""
    asked = _last_user(body)
    if "ping me later" in asked:
        return tool_call("remind_me", {"text": f"note for {REMINDED}", "in_seconds": HOUR / 2})
    if "every half hour" in asked:
        return tool_call("schedule_task", {"task": f"{SCHEDULED} report", "every_minutes": 30})
    return decide(body).reply


async def test_the_wall_clock_jumps_an_hour_forward_and_back(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=model) as llm:
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        files = write_files(
            tmp_path,
            tg,
            llm.base_url,
            confirmation_timeout_s=TIMEOUT_S,
            builtins=("remind_me", "schedule_task"),
        )
        shift = WallShift(tmp_path)
        daemon = Daemon(files, tg)
        try:
            await daemon.start()
            said = [token(1), token(2), token(3)]
            tg.inject_message(REMINDER, REMINDER, f"{said[0]} ping me later")
            tg.inject_message(SCHEDULER, SCHEDULER, f"{said[1]} every half hour please")
            await ledger.wait_until(lambda: ledger.answered(said[:2]), WAIT_S)
            assert not ledger.mentioning(REMINDED) and not ledger.answers(SCHEDULED)
            tg.inject_message(ASKER, ASKER, f"{said[2]} please wipe")
            await ledger.wait_until(lambda: bool(ledger.of(Kind.PROMPT, ASKER)), WAIT_S)

            shift.set(HOUR)  # an hour forward
            await wait_for_log(files.log, "jumped forward", WAIT_S)
            # due inside the hour: each runs once, woken by the jump
            await ledger.wait_until(
                lambda: bool(ledger.mentioning(REMINDED)) and bool(ledger.answers(SCHEDULED)),
                WAIT_S,
            )
            # the confirmation asked a moment ago is not expired by the jump (the expiry watch
            # looked right after it saw the jump): approved now, it runs once
            prompt = ledger.of(Kind.PROMPT, ASKER)[0]
            tg.inject_callback(ASKER, ASKER, prompt.message_id, _yes(prompt.buttons))
            await ledger.wait_until(lambda: bool(ledger.presses), WAIT_S)
            assert ledger.presses[0][1].startswith("Confirmed"), ledger.presses
            await ledger.wait_until(lambda: ledger.answered([said[2]]), WAIT_S)

            late = token(4)
            tg.inject_message(LATE_ASKER, LATE_ASKER, f"{late} please wipe")
            await ledger.wait_until(lambda: bool(ledger.of(Kind.PROMPT, LATE_ASKER)), WAIT_S)
            asked = ledger.of(Kind.PROMPT, LATE_ASKER)[0]
            shift.set(0)  # and back: its stored expiry is now an hour and 15 s away
            await wait_for_log(files.log, "jumped back", WAIT_S)
            talk = token(5)
            tg.inject_message(TALKER, TALKER, f"{talk} hello")
            expired = await tg.wait_for_call(
                "editMessageText",
                lambda p: "Expired" in p.get("text", "") and int(p["chat_id"]) == LATE_ASKER,
                timeout=TIMEOUT_S + WAIT_S,
            )
            lasted = expired.at - asked.sent_at
            await ledger.wait_until(lambda: ledger.answered([late, talk]), WAIT_S)
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            if daemon.running:
                daemon.kill_now()
                await daemon.wait_dead()
    assert files.run_counts() == {said[2]: 1}  # approved once, run once; the expired one never
    assert len(ledger.mentioning(REMINDED)) == 1
    assert len(ledger.answers(SCHEDULED)) == 1
    assert all(len(ledger.answers(t)) == 1 for t in [*said, late, talk])
    assert TIMEOUT_S - 1 <= lasted < TIMEOUT_S + 10, f"expired after {lasted:.1f} s"
    records = log_records(files.log)
    jumps = [r for r in records if "wall clock jumped" in str(r["msg"])]
    assert [("forward" in str(r["msg"])) for r in jumps] == [True, False], jumps
    assert not [r for r in records if "exc" in r], daemon.log_tail()
    print(
        f"clock jumps: reminder and scheduled task once each; the confirmation survived the "
        f"jump forward; the next expired after {lasted:.1f} s (timeout {TIMEOUT_S:.0f} s) "
        "after the jump back"
    )


def _yes(buttons: tuple[str, ...]) -> str:
    return next(data for data in buttons if data.endswith(":y"))

"""Skills through the daemon over Telegram: a long SKILL.md and a long file of a skill read in
full a page at a time (past the loop's 16,000-character tool-output cap), `/skill-name args`
starting a turn with the skill open (and kept in the conversation), an unknown slash word left as
an ordinary message; a skills folder inside the workspace refused by `check-config`, and
commands (run_command in its bubblewrap sandbox) reading and running a skill's files but unable
to change them."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot._generation import open_tools
from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.sandbox import require_bwrap
from tests.test_skills import PDF_SKILL, telegram, write_skill
from tools import ToolContext

DM = 1001
GROUP = -100500


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_long_instructions_and_files_are_read_in_full_by_pages(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, tmp_path: Path
) -> None:
    steps = "\n".join(
        f"{i}. Step number {i} of the long procedure, done with care." for i in range(700)
    )
    reference = "".join(f"row {i}: é value\n" for i in range(3000))  # ~50 kB, two-byte letters
    base = tmp_path / "skills"
    write_skill(
        base,
        "long-job",
        f"---\nname: long-job\ndescription: A long procedure\n---\n{steps}\n",
        {"reference/table.md": reference},
    )
    cfg = telegram(make_config, tg, skills={"dirs": [str(base)], "max_file_kb": 24})
    llm.script(
        tool_call("use_skill", {"name": "long-job"}),
        tool_call("use_skill", {"name": "long-job", "offset": 24 * 1024}),
        tool_call("use_skill", {"name": "long-job", "file": "reference/table.md"}),
        tool_call("use_skill", {"name": "long-job", "file": "reference/table.md", "offset": 24576}),
        tool_call("use_skill", {"name": "long-job", "file": "reference/table.md", "offset": 49152}),
        text("Done."),
    )
    async with App(cfg):
        tg.inject_message(DM, DM, "do the long job")
        await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == DM)
    pages = tool_results(llm.requests[-1])
    assert len(pages) == 5
    first, second, *table = pages
    assert len(first) > 16_000 and "truncated" not in first  # the loop's cap left it whole
    assert "offset=24576 to read the rest" in first
    body = first.split(" to read the rest]")[0].rsplit("\n[…", 1)[0] + second
    assert steps in body and "Files of this skill" in second and "- reference/table.md" in second
    text_pages = [p.rsplit("\n[… the file goes on", 1)[0] for p in table]
    assert "".join(text_pages) == reference  # whole characters at each page's edge
    assert "offset=24576" in table[0] and "offset=49152" in table[1] and "[…" not in table[2]


async def test_a_slash_skill_starts_the_turn_with_it_open(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, tmp_path: Path
) -> None:
    base = tmp_path / "skills"
    write_skill(base, "pdf-forms", PDF_SKILL, {"reference/fields.md": "name, date"})
    cfg = telegram(make_config, tg, skills={"dirs": [str(base)]})
    llm.script(text("Filled."), text("Plain answer."), text("Still open."))
    async with App(cfg):
        tg.inject_message(DM, DM, "/pdf-forms fill in form.pdf for Ann")
        await tg.wait_for_call("sendMessage", lambda p: "Filled." in p.get("text", ""))
        tg.inject_message(DM, DM, "/nosuch-skill hello")
        await tg.wait_for_call("sendMessage", lambda p: "Plain answer." in p.get("text", ""))
        tg.inject_message(DM, DM, "thanks")
        await tg.wait_for_call("sendMessage", lambda p: "Still open." in p.get("text", ""))
    opened, plain, later = llm.requests
    user, call, result = opened["messages"][-3:]
    assert user == {"role": "user", "content": "/pdf-forms fill in form.pdf for Ann"}
    assert call["tool_calls"][0]["function"]["name"] == "use_skill"
    assert (
        result["role"] == "tool" and "2. Run `python scripts/fill.py form.pdf`" in result["content"]
    )
    assert "- reference/fields.md" in result["content"]
    assert plain["messages"][-1] == {"role": "user", "content": "/nosuch-skill hello"}
    assert sum(m["role"] == "tool" for m in plain["messages"]) == 1  # only the first opening
    assert any("scripts/fill.py" in str(m.get("content")) for m in later["messages"])


async def test_a_slash_skill_in_a_group_is_addressed_to_the_bot(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, tmp_path: Path
) -> None:
    base = tmp_path / "skills"
    write_skill(base, "pdf-forms", PDF_SKILL)
    write_skill(base, "weather", "---\nname: weather\ndescription: Weather\n---\nscripts/fill.py")
    cfg = telegram(make_config, tg, skills={"dirs": [str(base)]})
    llm.script(text("First."), text("Second."))
    command = f"/weather@{BOT_USERNAME}"  # one entity, as Telegram sends it: no mention in it
    entities = [{"type": "bot_command", "offset": 0, "length": len(command)}]
    async with App(cfg):
        tg.inject_message(GROUP, 5, f"{command} Paris", chat_type="group", entities=entities)
        await tg.wait_for_call("sendMessage", lambda p: "First." in p.get("text", ""))
        tg.inject_message(GROUP, 5, f"@{BOT_USERNAME} /pdf-forms again", chat_type="group")
        await tg.wait_for_call("sendMessage", lambda p: "Second." in p.get("text", ""))
    for request in llm.requests:
        opened = request["messages"][-1]
        assert opened["role"] == "tool" and "scripts/fill.py" in opened["content"]


async def test_a_skills_folder_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    write_skill(workspace / "skills", "pdf-forms", PDF_SKILL)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[tools]\nworkspace = "{workspace}"\nbuiltins = ["read_file"]\n'
        f'[skills]\ndirs = ["{workspace / "skills"}"]\n'
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "check-config",
        "-c",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode != 0
    said = out.decode()
    assert "skills.dirs" in said and "overlap" in said and "Traceback" not in said


async def test_commands_read_the_skills_but_cannot_change_them(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    require_bwrap()
    workspace = tmp_path / "work"
    workspace.mkdir()
    base = tmp_path / "conf" / "skills"
    folder = write_skill(base, "pdf-forms", PDF_SKILL, {"scripts/fill.py": "print('filled')\n"})
    cfg = make_config(
        tools={"workspace": str(workspace), "builtins": ["run_command"]},
        skills={"dirs": [str(base)]},
    )
    attack = f"""
python3 {folder}/scripts/fill.py
echo changed >> {folder}/SKILL.md || echo "append refused"
truncate -s 0 {folder}/scripts/fill.py || echo "truncate refused"
rm {folder}/scripts/fill.py || echo "rm refused"
touch {base}/new-skill || echo "create refused"
mkdir {folder}/more || echo "mkdir refused"
echo made > out.txt && cat out.txt
"""
    async with open_tools(cfg) as (registry, _):
        result = await registry.execute("run_command", {"command": attack}, ToolContext())
    said = result.for_llm
    assert said.startswith("Exit code 0.") and "filled" in said, said
    for refused in ("append", "truncate", "rm", "create", "mkdir"):
        assert f"{refused} refused" in said, said
    assert "made" in said  # the workspace stays writable
    assert (folder / "SKILL.md").read_text() == PDF_SKILL
    assert (folder / "scripts" / "fill.py").read_text() == "print('filled')\n"
    assert sorted(p.name for p in base.iterdir()) == ["pdf-forms"]

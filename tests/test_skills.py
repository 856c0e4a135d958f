"""Skills in the SKILL.md format: the front matter (YAML), the library's problems, use_skill's
refusals (nothing outside the skill's folder, symlinks resolved, paged), `relaybot skills`,
and end to end over Telegram: a skill's description is offered, its body read by use_skill, a
path outside it refused, a skill limited to some chats left out elsewhere."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tools import ToolContext
from tools.registry import ToolRegistry
from tools.skills import FrontMatterError, load_skills, split_front_matter, use_skill_tool

DM = 1001
GROUP = -100500

# As Claude's skills are written (a folded description, a list and a mapping besides).
PDF_SKILL = """---
name: pdf-forms
description: >-
  Fill in PDF forms and extract their fields.
  Use when the user mentions a PDF form.
license: Apache-2.0  # see LICENSE
allowed-tools: [Read, "Bash(python:*)"]
metadata:
  author: someone
  version: "1.2"
---
# Filling PDF forms

1. Read `reference/fields.md` for the field names.
2. Run `python scripts/fill.py form.pdf` through run_command.
"""


def write_skill(base: Path, folder: str, text: str, files: dict[str, str] | None = None) -> Path:
    where = base / folder
    where.mkdir(parents=True)
    (where / "SKILL.md").write_text(text)
    for name, content in (files or {}).items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return where


# -- the front matter -----------------------------------------------------------------------


def test_front_matter_as_other_assistants_write_it() -> None:
    meta, body = split_front_matter(PDF_SKILL)
    assert meta == {
        "name": "pdf-forms",
        "description": "Fill in PDF forms and extract their fields. Use when the user mentions "
        "a PDF form.",
        "license": "Apache-2.0",
        "allowed-tools": ["Read", "Bash(python:*)"],
        "metadata": {"author": "someone", "version": "1.2"},
    }
    assert body.startswith("# Filling PDF forms") and body.endswith("through run_command.")


@pytest.mark.parametrize(
    ("lines", "description"),
    [
        (['description: "Says \\"hi\\" in\\tFrench"'], 'Says "hi" in\tFrench'),
        (["description: 'It''s plain'"], "It's plain"),
        (["description: one line", "  continued here"], "one line continued here"),
        (["description: |", "  line one", "  line two"], "line one\nline two"),
        (["description: >", "  folded", "  text", "", "  next"], "folded text\nnext"),
        (["# a comment", "description: plain # not part of it"], "plain"),
    ],
)
def test_front_matter_scalars(lines: list[str], description: str) -> None:
    meta, _ = split_front_matter("\n".join(["---", "name: x", *lines, "---", "body"]))
    assert meta["description"] == description


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# just markdown\n", "does not start with a front matter"),
        ("---\nname: x\n", "no closing '---'"),
        ("---\nname: x\n  bad: indent\n---\n", "line 3: not valid YAML"),
        ("---\nname: x\ndescription: [a, b\n---\n", "line 4: not valid YAML"),
        ('---\nname: "never closed\n---\n', "not valid YAML"),
        ("---\n- a list\n---\n", "not a mapping"),
        ("---\nx: !!python/object/apply:os.system [echo hi]\n---\n", "line 2: not valid YAML"),
    ],
)
def test_front_matter_mistakes_name_their_line(text: str, problem: str) -> None:
    with pytest.raises(FrontMatterError, match=problem.replace("(", r"\(")):
        split_front_matter(text)


# -- the library and use_skill ------------------------------------------------------------------


def test_problems_are_listed_and_the_good_skills_kept(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write_skill(first, "pdf-forms", PDF_SKILL)
    write_skill(second, "pdf-forms", PDF_SKILL)
    write_skill(first, "bare", "# no front matter\n")
    write_skill(first, "nameless", "---\ndescription: d\n---\n")
    write_skill(first, "mute", "---\nname: mute\n---\n")
    (first / "not-a-skill").mkdir()  # no SKILL.md: not a skill, not a problem
    missing = tmp_path / "missing"
    found = load_skills(
        [first, second, missing, tmp_path / "quiet"],
        only_in={"nope": ["telegram:1"]},
        required=[missing],
    )
    assert list(found.skills) == ["pdf-forms"]
    assert found.skills["pdf-forms"].folder == (first / "pdf-forms").resolve()
    problems = sorted(str(p) for p in found.problems)
    assert problems == sorted(
        [
            f"{first / 'bare' / 'SKILL.md'}: skipped: it does not start with a front matter "
            "(a line '---' first)",
            f"{first / 'nameless' / 'SKILL.md'}: skipped: the front matter has no name",
            f"{first / 'mute' / 'SKILL.md'}: skipped: the front matter has no description",
            f"{second / 'pdf-forms' / 'SKILL.md'}: skipped: the name 'pdf-forms' is already "
            f"used by {(first / 'pdf-forms').resolve()}",
            f"{missing}: not a directory",
            "[skills] only_in: no skill named 'nope'",
        ]
    )


@pytest.fixture
def skill_dir(tmp_path: Path) -> Path:
    base = tmp_path / "skills"
    folder = write_skill(
        base,
        "pdf-forms",
        PDF_SKILL,
        {
            "reference/fields.md": "name, date, signature",
            "scripts/fill.py": "print('filled')",
            "big.txt": "x" * 3000,
            ".hidden": "secret",
        },
    )
    (tmp_path / "secret.txt").write_text("the owner's secret")
    os.symlink(tmp_path / "secret.txt", folder / "escape.txt")
    (folder / "blob.bin").write_bytes(b"\x00\x01binary")
    return base


async def test_use_skill_reads_only_inside_the_skill(skill_dir: Path) -> None:
    registry = ToolRegistry()
    registry.register(use_skill_tool(load_skills([skill_dir], max_file_bytes=1024)))
    ctx = ToolContext("telegram", "1", "1")

    async def use(**args: Any) -> tuple[bool, str]:
        result = await registry.execute("use_skill", args, ctx)
        return result.is_error, result.for_llm

    error, opened = await use(name="pdf-forms")
    assert not error and "1. Read `reference/fields.md`" in opened and "name: pdf" not in opened
    files = opened.split("Files of this skill (read one with use_skill and file):\n")[1]
    assert files.splitlines() == [
        "- big.txt",
        "- blob.bin",
        "- reference/fields.md",
        "- scripts/fill.py",
    ]  # hidden files and the link leading out are not listed
    assert await use(name="pdf-forms", file="reference/fields.md") == (
        False,
        "name, date, signature",
    )
    for outside in ("../secret.txt", "escape.txt", str(skill_dir.parent / "secret.txt")):
        error, said = await use(name="pdf-forms", file=outside)
        assert error and "secret" not in said.replace(outside, ""), said
    assert "outside the skill's folder" in (await use(name="pdf-forms", file="escape.txt"))[1]
    assert "binary" in (await use(name="pdf-forms", file="blob.bin"))[1]
    error, big = await use(name="pdf-forms", file="big.txt")
    assert not error and big.startswith("x" * 1024) and not big.startswith("x" * 1025)
    assert "3,000 bytes in all, read up to 1,024" in big and "offset=1024" in big
    error, rest = await use(name="pdf-forms", file="big.txt", offset=2048)
    assert not error and rest == "x" * 952  # the last page: no note
    error, past = await use(name="pdf-forms", file="big.txt", offset=3000)
    assert error and "past its end" in past
    error, past = await use(name="pdf-forms", offset=100_000)
    assert error and "past their end" in past
    error, unknown = await use(name="excel")
    assert error and "Skills: pdf-forms." in unknown


# -- relaybot skills --------------------------------------------------------------------------


async def test_relaybot_skills_lists_them_with_their_problems(skill_dir: Path) -> None:
    write_skill(skill_dir, "broken", "no front matter")
    config = skill_dir.parent / "config.toml"
    config.write_text('[skills]\ndirs = ["skills"]\nonly_in = {pdf-forms = ["telegram:-5"]}\n')
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "skills",
        "-c",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    lines = out.decode().splitlines()
    assert proc.returncode == 1, err
    assert lines[0] == f"pdf-forms  ({(skill_dir / 'pdf-forms').resolve()})"
    assert lines[1].startswith("    Fill in PDF forms") and lines[2] == "    only in: telegram:-5"
    assert lines[3].startswith(f"problem: {skill_dir / 'broken' / 'SKILL.md'}: skipped")


# -- end to end over Telegram ------------------------------------------------------------------


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def telegram(make_config: Callable[..., Config], tg: FakeTelegram, **sections: Any) -> Config:
    section = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": ["*"],
        "poll_timeout_s": 5,
    }
    return make_config(telegram=section, **sections)


async def test_a_skill_is_offered_opened_and_kept_to_itself(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, skill_dir: Path
) -> None:
    write_skill(skill_dir, "team", "---\nname: stand-up\ndescription: Run the stand-up\n---\nGo.")
    only_in = {"stand-up": [f"telegram:{GROUP}"]}
    cfg = telegram(make_config, tg, skills={"dirs": [str(skill_dir)], "only_in": only_in})
    llm.script(
        tool_call("use_skill", {"name": "pdf-forms"}),
        tool_call("use_skill", {"name": "pdf-forms", "file": "../secret.txt"}),
        text("Here is how I fill it in."),
    )
    async with App(cfg):
        tg.inject_message(DM, DM, "fill in my PDF form")
        await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == DM)
        tg.inject_message(GROUP, 5, f"@{BOT_USERNAME} stand-up time", chat_type="group")
        await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == GROUP)
    first, opened, refused, group = llm.requests
    system = first["messages"][0]["content"]
    assert "- pdf-forms: Fill in PDF forms and extract their fields." in system
    assert "stand-up" not in system  # limited to the group
    assert "use_skill" in {t["function"]["name"] for t in first["tools"]}
    body = opened["messages"][-1]
    assert body["role"] == "tool" and "2. Run `python scripts/fill.py form.pdf`" in body["content"]
    outside = refused["messages"][-1]["content"]
    assert "outside the skill's folder" in outside or "has no file" in outside
    assert "the owner's secret" not in str(llm.requests)
    assert "- stand-up: Run the stand-up" in group["messages"][0]["content"]


async def test_without_skills_nothing_is_added(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    cfg = telegram(make_config, tg, skills={"dirs": [str(tmp_path / "empty")]})
    async with App(cfg):
        tg.inject_message(DM, DM, "hello")
        await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == DM)
    [request] = llm.requests
    assert "Skills" not in str(request["messages"]) and "tools" not in request

"""Skills as the ecosystem ships them, in folders the tests write: an Anthropic-style skill
(SKILL.md, scripts/, reference files), OpenClaw's multi-line JSON metadata, ClawHub's nested
lists, hermes' category folders, a repository root, a macOS-only skill on Linux, a skill needing a
program that is not installed; names against the format's rules; the listing within its token
budget and find_skill; `relaybot skills` saying why a skill is not offered, and its exit code."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.test_skills import write_skill
from tools import ToolContext
from tools.registry import ToolRegistry
from tools.skills import load_skills, skill_tools

ANTHROPIC = """---
name: report-builder
description: Build a quarterly report from spreadsheets. Use when the user asks for a report.
license: Complete terms in LICENSE.txt
---
# Report builder

Read `reference/layout.md`, then run `python scripts/build.py data.csv`.
"""

OPENCLAW = """---
name: issue-triage
description: "Triage the issues of a repository with its command-line client."
metadata:
  {
    "openclaw":
      {
        "emoji": "🐙",
        "requires": { "bins": ["sh"], "env": ["TRIAGE_TOKEN"] },
        "primaryEnv": "TRIAGE_TOKEN",
      },
  }
---
List the open issues, then label each.
"""

CLAWHUB = """---
name: weather-brief
description: Give a short weather brief for a city.
version: 1.0.2
metadata:
  clawdbot:
    requires:
      bins:
        - sh
      anyBins: [curl, wget, sh]
    install:
      - id: brew
        kind: brew
        formula: weather-cli
        bins: [weather]
      - id: apt
        kind: apt
        package: weather-cli
tags:
  - weather
  - travel
---
Ask for the city first.
"""


NEEDS_MISSING_BIN = 'metadata: {"openclaw": {"requires": {"bins": ["relaybot-no-such-bin"]}}}\n'
MAC_ONLY = 'metadata: {"openclaw": {"os": ["darwin"]}}\n'


def skill(name: str, description: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\nDo it.\n"


def test_the_ecosystems_front_matter_loads(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "report-builder",
        ANTHROPIC,
        {"scripts/build.py": "print(1)\n", "reference/layout.md": "# Layout\n"},
    )
    write_skill(tmp_path, "issue-triage", OPENCLAW)
    write_skill(tmp_path, "weather-brief", CLAWHUB)
    found = load_skills([tmp_path])
    assert found.problems == []
    assert sorted(found.skills) == ["issue-triage", "report-builder", "weather-brief"]
    assert all(not s.unmet for s in found.skills.values())
    assert found.skills["issue-triage"].description.startswith("Triage the issues")


def test_bad_yaml_is_one_skipped_skill_naming_file_and_line(tmp_path: Path) -> None:
    write_skill(tmp_path, "good", skill("good", "Fine"))
    broken = write_skill(
        tmp_path, "broken", '---\nname: broken\ndescription: x\nmetadata: {"a": [1, 2}\n---\n'
    )
    found = load_skills([tmp_path])
    assert list(found.skills) == ["good"]
    [problem] = found.problems
    assert str(problem).startswith(f"{broken / 'SKILL.md'}: skipped: line 4: not valid YAML (")


def test_layouts_are_searched_four_folders_down(tmp_path: Path) -> None:
    hermes = tmp_path / "hermes"
    write_skill(hermes, "productivity/notes", skill("notes", "Keep notes"))
    write_skill(hermes, "devops/deploy", skill("deploy", "Deploy the app"))
    repo = tmp_path / "repo"
    write_skill(repo, "skills/pdf", skill("pdf", "PDF work", ""), {"scripts/x/y/SKILL.md": "no"})
    write_skill(repo, "a/b/c/d/too-deep", skill("too-deep", "Five folders down"))
    write_skill(repo, ".git/hooks/hidden", skill("hidden", "In a hidden folder"))
    single = write_skill(tmp_path, "one/solo", skill("solo", "A folder that is a skill"))
    found = load_skills([hermes, repo, single])
    assert sorted(found.skills) == ["deploy", "notes", "pdf", "solo"]
    assert found.problems == []  # the SKILL.md among pdf's files is one of its files
    again = load_skills([hermes, hermes / "productivity"])  # one folder inside another
    assert sorted(again.skills) == ["deploy", "notes"] and again.problems == []


def test_requirements_this_machine_lacks_keep_a_skill_from_being_offered(tmp_path: Path) -> None:
    write_skill(tmp_path, "mac-notes", skill("mac-notes", "Apple Notes", MAC_ONLY))
    write_skill(tmp_path, "shortcuts", skill("shortcuts", "Run Shortcuts", "platforms: [macos]\n"))
    write_skill(tmp_path, "imsg", skill("imsg", "Messages", "compatibility: Requires macOS 14\n"))
    write_skill(tmp_path, "gh-x", skill("gh-x", "Use gh", NEEDS_MISSING_BIN))
    write_skill(tmp_path, "linux-ok", skill("linux-ok", "Runs", "platforms: [linux, macos]\n"))
    found = load_skills([tmp_path])
    if sys.platform.startswith("linux"):
        assert found.skills["mac-notes"].unmet == ("needs macOS (this is Linux)",)
        assert found.skills["shortcuts"].unmet == ("needs macOS (this is Linux)",)
        assert found.skills["imsg"].unmet == ("needs macOS (this is Linux)",)
        assert [s.name for s in found.offered("telegram", "1")] == ["linux-ok"]
    assert found.skills["gh-x"].unmet == ("needs relaybot-no-such-bin on PATH (not found)",)


async def test_a_skill_not_offered_is_neither_listed_nor_opened(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "gh-x",
        skill(
            "gh-x",
            "Use gh",
            'metadata: {"openclaw": {"requires": {"bins": ["relaybot-no-such-bin"]}}}\n',
        ),
    )
    write_skill(tmp_path, "ok", skill("ok", "Fine"))
    found = load_skills([tmp_path])
    prompt = await found.prompt("telegram", "1", "1", True)
    assert "- ok: Fine" in prompt and "gh-x" not in prompt
    registry = ToolRegistry()
    for tool in skill_tools(found):
        registry.register(tool)
    result = await registry.execute("use_skill", {"name": "gh-x"}, ToolContext("telegram", "1"))
    assert result.is_error and "There is no skill 'gh-x' here. Skills: ok." == result.for_llm


def test_names_against_the_formats_rules_warn_only(tmp_path: Path) -> None:
    write_skill(tmp_path, "pdf-tools", skill("PDF_Tools", "Upper case and underscore"))
    write_skill(tmp_path, "folder", skill("other-name", "Not its folder's name"))
    found = load_skills([tmp_path])
    assert sorted(found.skills) == ["PDF_Tools", "other-name"]
    assert all(p.warning for p in found.problems)
    said = sorted(p.problem for p in found.problems)
    assert said == [
        "the name 'PDF_Tools' differs from its folder's name 'pdf-tools'",
        "the name 'PDF_Tools' is not lowercase letters, digits and single hyphens "
        "(at most 64 characters) as the format asks",
        "the name 'other-name' differs from its folder's name 'folder'",
    ]


async def test_many_skills_fit_the_budget_and_find_skill_finds_them(tmp_path: Path) -> None:
    for i in range(300):
        write_skill(
            tmp_path, f"skill-{i:03}", skill(f"skill-{i:03}", f"Handles chores of kind {i}")
        )
    write_skill(tmp_path, "invoice-pdf", skill("invoice-pdf", "Turn an invoice into a PDF"))
    found = load_skills([tmp_path], listing_tokens=500)
    prompt = await found.prompt("telegram", "1", "1", True)
    assert len(prompt) <= 500 * 4 and "find_skill" in prompt
    assert "find_skill finds them" in prompt  # the names that did not fit are counted
    registry = ToolRegistry()
    for tool in skill_tools(found):
        registry.register(tool)
    assert sorted(registry.names()) == ["find_skill", "use_skill"]
    result = await registry.execute(
        "find_skill", {"query": "make a PDF of my invoice"}, ToolContext("telegram", "1")
    )
    assert result.for_llm.splitlines()[0] == "- invoice-pdf: Turn an invoice into a PDF"
    few = load_skills([tmp_path / "skill-001"], listing_tokens=500)
    assert [t.name for t in skill_tools(few)] == ["use_skill"]
    assert "- skill-001: Handles chores of kind 1" in await few.prompt("telegram", "1", "1", True)


async def run_skills_command(config: Path) -> tuple[int, list[str]]:
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
    assert not err.strip() or proc.returncode is not None
    return proc.returncode or 0, out.decode().splitlines()


async def test_relaybot_skills_says_why_and_hints_the_layout(tmp_path: Path) -> None:
    base = tmp_path / "skills"
    write_skill(
        base,
        "tools/gh-x",
        skill(
            "gh-x",
            "Use gh",
            'metadata: {"openclaw": {"requires": {"bins": ["relaybot-no-such-bin"]}}}\n',
        ),
    )
    write_skill(base, "tools/Odd", skill("Odd", "Odd name"))
    config = tmp_path / "config.toml"
    config.write_text('[skills]\ndirs = ["skills"]\n')
    code, lines = await run_skills_command(config)
    assert code == 0, lines  # warnings and skills not offered here are not failures
    assert "    not offered: needs relaybot-no-such-bin on PATH (not found)" in lines
    assert any(line.startswith("warning: ") and "'Odd' is not lowercase" in line for line in lines)
    empty = tmp_path / "empty"
    (empty / "notes").mkdir(parents=True)
    (empty / "notes" / "README.md").write_text("not a skill")
    config.write_text('[skills]\ndirs = ["empty"]\n')
    code, lines = await run_skills_command(config)
    assert code == 1
    assert lines[0] == (
        f"no skills in {empty} (searched 4 folders down; expected "
        "<dir>/<name>/SKILL.md, or <dir>/<category>/<name>/SKILL.md)"
    )
    assert lines[1].startswith("A skill is a folder there holding a SKILL.md")  # and an example
    assert any(
        line.startswith(f"problem: {empty}: no SKILL.md found up to 4 folders down")
        for line in lines
    )


@pytest.mark.parametrize(
    ("compatibility", "runs_on_linux"),
    [
        ("Requires macOS 14 and the Shortcuts app", False),
        ("macOS only; not on Linux", False),
        ("Works on Linux and macOS", True),
        ("Any system except Windows", True),
        ("Not for Windows", True),
        ("Designed for Claude Code (or similar products); needs network access", True),
    ],
)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="read as this machine's OS")
def test_compatibility_text_names_the_systems(
    tmp_path: Path, compatibility: str, runs_on_linux: bool
) -> None:
    write_skill(tmp_path, "x", skill("x", "X", f"compatibility: {compatibility}\n"))
    found = load_skills([tmp_path])
    assert bool(found.offered("telegram", "1")) is runs_on_linux

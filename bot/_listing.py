"""What `relaybot tools` and `relaybot skills` print: every tool the model is offered, with its
tier and where it comes from (built-in, plugin, or mcp:SERVER), and the skills found."""

from __future__ import annotations

import asyncio
import json
import sys

from bot.config import Config
from tools.plugins import load_plugins
from tools.registry import summary
from tools.skills import LAYOUT, MAX_DEPTH

SKILL_FORMAT = """\
A skill is a folder there holding a SKILL.md, e.g. skills/haiku/SKILL.md:
    ---
    name: haiku
    description: Answer in a haiku when asked for a poem.
    ---
    Three lines: five, seven and five syllables.
(README: Memory, skills and delegation)"""


async def list_tools(config: Config) -> int:
    """Exit 1 when an MCP server did not start (named on stderr)."""
    from bot._checks import configured_skills
    from bot._generation import open_tools

    skills = await asyncio.to_thread(configured_skills, config)  # use_skill, when there are
    async with open_tools(config, skills=skills) as (registry, mcp):
        sources = {info.name: f"mcp:{info.server}" for info in mcp.tools()} if mcp else {}
        plugins, _ = load_plugins(  # imported already: the same tools, no second report
            config.tools.plugins, plugin_dirs=config.plugin_dirs(), log_problems=False
        )
        sources.update({tool.name: "plugin" for tool in plugins})
        for spec in registry.definitions(registry.names()):  # what the model is offered
            title = getattr(registry.get(spec.name), "title", None)  # an MCP server's name for it
            shown = f"  “{title}”" if title else ""
            print(f"{spec.name}  [{spec.tier}]  ({sources.get(spec.name, 'built-in')}){shown}")
            if text := summary(spec.description):
                print(f"    {text}")
            print(f"    schema: {json.dumps(spec.parameters, separators=(',', ':'))}")
        for server, name, reason in mcp.left_out() if mcp else []:
            print(f"not offered: {name} (mcp:{server}): {reason}")
        down = mcp.down() if mcp else []
        for server, reason in down:
            print(f"MCP server {server} did not start: {reason}", file=sys.stderr)
    return 1 if down else 0


async def list_skills(config: Config) -> int:
    """Exit 1 when there is a problem (a warning alone is not one) or no skill at all."""
    from bot._checks import configured_skills

    found = await asyncio.to_thread(configured_skills, config)
    for skill in found.skills.values():
        print(f"{skill.name}  ({skill.folder})")
        print(f"    {skill.description}")
        if skill.chats:
            print(f"    only in: {', '.join(sorted(skill.chats))}")
        for reason in skill.unmet:
            print(f"    not offered: {reason}")
    if not found.skills:
        dirs = " or ".join(map(str, config.skill_dirs()[0]))
        print(f"no skills in {dirs} (searched {MAX_DEPTH} folders down; expected {LAYOUT})")
        print(SKILL_FORMAT)
    for problem in found.problems:
        print(f"{'warning' if problem.warning else 'problem'}: {problem}")
    failed = not found.skills or any(not p.warning for p in found.problems)
    return 1 if failed else 0

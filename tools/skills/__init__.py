"""Skills in the common SKILL.md format (the daemon's side of tools, like tools.plugins and
tools.mcp): a folder with a SKILL.md whose YAML front matter names and describes it, followed by
instructions, and any files beside it. Skills written for other assistants work unchanged where
they need only instructions and files (a script they mention runs through run_command, with its
confirmation); one whose OS or programs this machine lacks is listed by `relaybot skills` with
the reason and not offered.

    skills = load_skills([Path("~/.config/relaybot/skills")])   # in a thread: it reads files
    for t in skill_tools(skills): registry.register(t)          # when there is any
    build_engine(..., parts=[skills])                            # each request lists them
"""

from tools.skills._front_matter import FrontMatterError, split_front_matter
from tools.skills._library import LAYOUT, MAX_DEPTH, Skill, SkillProblem, Skills, load_skills
from tools.skills._tool import open_skill, skill_tools, use_skill_tool

__all__ = [
    "LAYOUT",
    "MAX_DEPTH",
    "FrontMatterError",
    "Skill",
    "SkillProblem",
    "Skills",
    "load_skills",
    "open_skill",
    "skill_tools",
    "split_front_matter",
    "use_skill_tool",
]

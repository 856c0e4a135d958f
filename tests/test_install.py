"""Installed from a wheel, relaybot works from any directory: the wheel is built from a copy of
the source, installed into a fresh venv, and run from an empty directory: `relaybot init`
(answers piped) writes under $XDG_CONFIG_HOME, a plugin and a skill put there are found,
`relaybot chat` answers through the fake OpenAI server, `relaybot install-service` prints and
installs the unit naming this venv's relaybot.

Nothing is fetched: the wheel is built with the test venv's setuptools (--no-build-isolation)
and installed with --no-deps --offline; its dependencies come from the test venv's
site-packages through a .pth file (a full `pip install WHEEL` resolves ~60 packages from the
indexes and takes minutes here; what is tested is relaybot's own packaging). The wheel's
relaybot is the one imported: checked below. uv builds and installs it (a fraction of pip's
CPU; pip and pipx are what the README's install lines test, below).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    "pyproject.toml",
    "README.md",
    "config.example.toml",
    "bot",
    "channels",
    "engine",
    "tools",
    "deploy",
)
UV = str(Path(sys.executable).parent / "uv")

PLUGIN = '''
from tools import tool


@tool
def order_status(order_id: str) -> str:
    """Look up where an order is: packed, shipped or delivered.

    Args:
        order_id: the order's number.
    """
    return f"order {order_id} is shipped"
'''
SKILL = """---
name: haiku
description: Answer in a haiku when asked for a poem.
---
Three lines: five, seven and five syllables.
"""


@dataclass(frozen=True)
class Built:
    src: Path  # a copy of the checkout's sources
    wheel: Path  # built from it


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A copy of the checkout (what a clone holds that the wheel is built from) and its wheel."""
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("the wheel is built with setuptools>=77 (the [dev] extra installs it)")
    base = tmp_path_factory.mktemp("build")
    src = base / "src"
    src.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=junk)
        else:
            shutil.copy2(ROOT / name, src / name)
    build = [UV, "build", "-q", "--wheel", "--no-build-isolation", "--offline", "-o", "dist"]
    build += ["--python", sys.executable, "./src"]
    subprocess.run(build, cwd=base, env=_uv_env(base), check=True, timeout=120)
    [wheel] = (base / "dist").glob("relaybot-*.whl")
    return Built(src, wheel)


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with relaybot installed from a freshly built wheel: its bin/ directory."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    install = [UV, "pip", "install", "-q", "--python", str(python), "--no-deps", "--offline"]
    install += ["--no-index", "--no-cache", str(built.wheel)]
    subprocess.run(install, env=_uv_env(venv.parent), check=True, timeout=120)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "_relaybot_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def _env(base: Path, **extra: str) -> dict[str, str]:
    """A clean environment: no XDG_*, RELAYBOT_* or PYTHONPATH of the test's own."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XDG_", "RELAYBOT_", "PYTHON", "PIP_", "PIPX_", "UV_"))
        and k != "VIRTUAL_ENV"
    }
    return {
        **keep,
        "XDG_CONFIG_HOME": str(base / "xdg"),
        "XDG_STATE_HOME": str(base / "state"),
        **extra,
    }


def _uv_env(base: Path) -> dict[str, str]:
    """uv offline with none of this machine's settings or caches."""
    return _env(base, UV_NO_CONFIG="1", UV_OFFLINE="1", UV_CACHE_DIR=str(base / "uv-cache"))


async def _run(
    bin_dir: Path, cwd: Path, env: dict[str, str], *args: str, stdin: bytes = b""
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        bin_dir / "relaybot",
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_wheel_installs_a_relaybot_that_works_from_an_empty_directory(
    installed: Path, tmp_path: Path, llm: FakeOpenAI
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _env(tmp_path, RB_INSTALL_KEY="sk-install-test-key-1234")
    where = (
        await asyncio.to_thread(
            subprocess.run,
            [installed / "python", "-c", "import bot, tools; print(bot.__file__)"],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    ).stdout
    assert where.startswith(str(installed.parent)), where  # the wheel's, not the checkout's

    answers = f"{llm.base_url}\nRB_INSTALL_KEY\nfake-model\nn\nn\n".encode()  # the key: set
    code, out, err = await _run(installed, empty, env, "init", stdin=answers)
    config = tmp_path / "xdg" / "relaybot" / "config.toml"
    assert code == 0, err
    assert f"Wrote {config}" in out and list(empty.iterdir()) == []

    # A plugin and a skill next to the config, found from any directory.
    (config.parent / "shop_tools.py").write_text(PLUGIN)
    (config.parent / "skills" / "haiku").mkdir(parents=True)
    (config.parent / "skills" / "haiku" / "SKILL.md").write_text(SKILL)
    text_ = config.read_text()
    assert "[tools]\n" in text_  # a local model: init wrote a small tool set
    config.write_text(text_.replace("[tools]\n", '[tools]\nplugins = ["shop_tools"]\n'))

    code, out, err = await _run(installed, empty, env, "check-config")
    assert code == 0 and f"{config}: OK" in out, out + err
    assert "warning" not in out, out
    code, out, err = await _run(installed, empty, env, "tools")
    assert code == 0, err
    assert "order_status  [safe]  (plugin)" in out
    assert "    Look up where an order is: packed, shipped or delivered." in out
    code, out, err = await _run(installed, empty, env, "skills")
    assert code == 0 and f"haiku  ({config.parent / 'skills' / 'haiku'})" in out, out + err

    llm.script(
        text("Hello from the installed relaybot."),
        tool_call("order_status", {"order_id": "42"}),
        text("Order 42 is shipped."),
    )
    code, out, err = await _run(installed, empty, env, "chat", stdin=b"hello\nwhere is order 42?\n")
    assert code == 0, err
    assert out.splitlines() == ["Hello from the installed relaybot.", "Order 42 is shipped."]
    assert llm.requests[0]["max_tokens"] == 1  # init's test of the key and model
    assert llm.requests[1]["model"] == "fake-model"
    assert llm.requests[-1]["messages"][-1]["content"] == "order 42 is shipped"
    assert (tmp_path / "state" / "relaybot" / "relaybot.db").exists()
    assert list(empty.iterdir()) == []  # nothing written where it was run


async def test_install_service_names_the_installed_relaybot(
    installed: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _env(tmp_path)
    config = tmp_path / "xdg" / "relaybot" / "config.toml"
    code, out, err = await _run(installed, empty, env, "install-service")
    assert code == 0, err
    assert "Type=notify" in out and "DynamicUser=yes" in out  # the system unit of deploy/
    assert f"ExecStart={installed / 'relaybot'} run -c /etc/relaybot/config.toml" in out
    assert "systemctl daemon-reload && systemctl enable --now relaybot" in err
    assert "relaybot.env.example" in err and "share/relaybot/deploy" in err  # from the wheel

    code, out, err = await _run(installed, empty, env, "install-service", "--user", "--install")
    unit = tmp_path / "xdg" / "systemd" / "user" / "relaybot.service"
    assert code == 0, err
    assert f"Wrote {unit}" in out and "systemctl --user daemon-reload" in out
    written = unit.read_text()
    assert f"ExecStart={installed / 'relaybot'} run -c {config}\n" in written
    assert "ExecReload=/bin/kill -HUP $MAINPID" in written and "PrivateUsers=yes" in written
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # the unit of deploy/ is verified in tests/test_unit_file.py where it can be
    check = await asyncio.to_thread(
        subprocess.run,
        [analyze, "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path)},
    )
    output = check.stdout + check.stderr
    if "Failed to initialize manager" not in output:  # it checks that ExecStart= exists too
        assert check.returncode == 0 and str(unit) not in output, output


def test_the_wheel_carries_what_the_commands_read(installed: Path) -> None:
    share = installed.parent / "share" / "relaybot" / "deploy"
    for name in ("relaybot.service", "relaybot-user.service", "relaybot@.service"):
        assert (share / name).read_text() == (ROOT / "deploy" / name).read_text()
    assert (share / "relaybot.env.example").exists()
    example = (ROOT / "config.example.toml").read_text()
    assert (share.parent / "config.example.toml").read_text() == example  # init --example's
    guide = list(installed.parent.glob("lib/python*/site-packages/tools/PLUGINS.md"))
    assert guide and guide[0].read_text() == (ROOT / "tools" / "PLUGINS.md").read_text()
    site = guide[0].parent.parent
    for language in ("de", "es", "fr", "ru", "zh"):  # the catalogs the daemon reads (engine.i18n)
        mo = f"engine/i18n/locale/{language}/LC_MESSAGES/relaybot.mo"
        assert (site / mo).read_bytes() == (ROOT / mo).read_bytes()


def test_containerfile_copies_what_the_wheel_needs_and_runs_unprivileged() -> None:
    lines = (ROOT / "Containerfile").read_text().splitlines()
    copied = {
        line.split()[1] for line in lines if line.startswith("COPY ") and "--from" not in line
    }
    assert {"pyproject.toml", *SOURCES[3:]} <= copied  # every package, and deploy/ for the units
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert 'VOLUME ["/var/lib/relaybot"]' in lines
    assert any("STATE_DIRECTORY=/var/lib/relaybot" in line for line in lines)  # the store there


BUILDER = shutil.which("podman") or shutil.which("docker")


@pytest.mark.skipif(
    BUILDER is None or os.environ.get("RELAYBOT_CONTAINER_TEST") != "1",
    reason="needs podman (or docker with a daemon) and RELAYBOT_CONTAINER_TEST=1: the build "
    "pulls python:3.11-slim and relaybot's dependencies from the internet, which tests may "
    "not reach unless asked to",
)
def test_the_image_builds_and_runs_as_a_non_root_user(tmp_path: Path) -> None:
    assert BUILDER is not None
    tag = f"relaybot-test:{os.getpid()}"
    subprocess.run(
        [BUILDER, "build", "-t", tag, "-f", "Containerfile", "."], cwd=ROOT, check=True, timeout=900
    )
    try:
        run = [BUILDER, "run", "--rm", "--entrypoint", "sh", tag, "-c"]
        out = subprocess.run(
            [*run, "id -u; relaybot --version; relaybot install-service"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        uid, version, *unit = out.splitlines()
        assert uid != "0" and version.startswith("relaybot ")
        assert "ExecStart=/opt/relaybot/bin/relaybot run -c /etc/relaybot/config.toml" in unit
    finally:
        subprocess.run([BUILDER, "rmi", "-f", tag], capture_output=True, timeout=120)


def _install_lines() -> list[tuple[str, str]]:
    """The README's install lines: (the tool's command, what it installs)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Install with pipx or uv\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^(pipx install|uv tool install) (\S+)", section, re.M)


@dataclass(frozen=True)
class Offline:
    wheelhouse: Path  # relaybot's dependencies and build backend, as wheels (tests/wheelhouse.py)
    bare: Path  # a bare clone of the checkout, for the git URL


@pytest.fixture(scope="module")
def offline(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Offline:
    from tests.wheelhouse import wheelhouse

    base = tmp_path_factory.mktemp("offline")
    repo = base / "clone"
    shutil.copytree(built.src, repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "relaybot"]):
        subprocess.run([*git, "-C", str(repo), *args], check=True, timeout=60)
    bare = base / "relaybot.git"
    subprocess.run([*git, "clone", "-q", "--bare", str(repo), str(bare)], check=True, timeout=60)
    wheelhouse(base / "wheelhouse")
    return Offline(base / "wheelhouse", bare)


def test_the_readme_shows_each_source_with_each_tool() -> None:
    lines = _install_lines()
    assert sorted(lines) == sorted(
        (tool, spec)
        for tool in ("pipx install", "uv tool install")
        for spec in ("./relaybot", f"./relaybot-{_version()}-py3-none-any.whl", GIT_EXAMPLE)
    )


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


GIT_EXAMPLE = "git+file:///srv/git/relaybot.git"


@pytest.mark.parametrize("tool, spec", _install_lines(), ids=lambda x: x.split(" ")[0])
async def test_each_readme_install_line_works_from_an_empty_directory(
    tool: str, spec: str, built: Built, offline: Offline, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    if spec == "./relaybot":  # `git clone <repository> relaybot` made it
        shutil.copytree(built.src, work / "relaybot")
    elif spec.endswith(".whl"):
        shutil.copy2(built.wheel, work / spec)  # the README names the file the build makes
    else:
        assert spec == GIT_EXAMPLE
        spec = f"git+file://{offline.bare}"
    house = str(offline.wheelhouse)
    bin_dir = tmp_path / "bin"
    env = {
        **_env(tmp_path, HOME=str(tmp_path)),
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(bin_dir),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
        "PIPX_DEFAULT_PYTHON": sys.executable,
        "PIP_CONFIG_FILE": os.devnull,  # this machine's pip.conf names more indexes
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": house,
        "UV_TOOL_DIR": str(tmp_path / "uv"),
        "UV_TOOL_BIN_DIR": str(bin_dir),
        "UV_CACHE_DIR": str(offline.wheelhouse.parent / "uv-cache"),  # shared: unpacked once
        "UV_NO_CONFIG": "1",
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": house,
        "UV_PYTHON": sys.executable,
        "UV_PYTHON_DOWNLOADS": "never",
    }
    program = Path(sys.executable).parent / tool.split()[0]
    done = await asyncio.to_thread(
        subprocess.run,
        [program, *tool.split()[1:], spec],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    home = tmp_path / ("pipx" if tool.startswith("pipx") else "uv")
    assert (bin_dir / "relaybot").resolve().is_relative_to(home)  # the tool's own venv

    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = await _run(bin_dir, empty, env, "--version")
    assert (code, out) == (0, f"relaybot {_version()}\n"), err
    code, out, err = await _run(bin_dir, empty, env, "init", "--example")
    assert code == 0 and out == (ROOT / "config.example.toml").read_text(), err
    code, out, err = await _run(bin_dir, empty, env, "check-config")
    assert code == 78 and "relaybot init --example >" in err, out + err
    assert list(empty.iterdir()) == []

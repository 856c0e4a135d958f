"""Workspace files: list, read, write, delete and send to the user, never outside one directory.

What the model sees names paths relative to the workspace only: errors never show where the
workspace is, and a symbolic link leading out of it is listed without anything about its target.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import Field

from tools._base import Tool
from tools._function import tool
from tools._result import File, ToolResult
from tools.builtins._text import clip
from tools.errors import ToolRetry

LIST_LIMIT = 200
READ_LIMIT = 10_000  # characters per read_file call
SEND_LIMIT = 50 * 1024 * 1024  # bytes per send_file call (what a Telegram bot may upload)
_SNIFF = 8192


class Workspace:
    """Maps the model's relative paths to files inside `root`, refusing every way out:
    absolute paths, `..`, and symbolic links whose target is outside."""

    def __init__(self, root: Path) -> None:
        self.root = root.expanduser().resolve()

    def path(self, rel: str) -> Path:
        rel = rel.strip()
        pure = PurePosixPath(rel or ".")
        if pure.is_absolute() or rel.startswith("~"):
            raise ToolRetry(
                f"{rel!r} is absolute; give a path relative to the workspace, e.g. 'notes/a.txt'."
            )
        if ".." in pure.parts:
            raise ToolRetry(f"{rel!r} is refused: '..' would leave the workspace.")
        try:
            full = self.root.joinpath(pure)
            parent = full.parent.resolve()
            target = full.resolve()
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else exc
            raise ToolRetry(f"{rel!r} is not a usable path: {reason}.") from None
        inside = parent.is_relative_to(self.root) and target.is_relative_to(self.root)
        if pure.parts and not inside:
            raise ToolRetry(f"{rel!r} is refused: a symbolic link leads outside the workspace.")
        # The final name is kept (not its link target), so deleting a link removes the link.
        return parent / full.name if pure.parts else self.root

    def show(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def inside(self, path: Path) -> bool:
        """Whether `path`, links followed, is in the workspace."""
        try:
            return path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):  # a link loop
            return False

    @contextlib.contextmanager
    def errors(self, rel: str) -> Iterator[None]:
        """An OSError as a ToolRetry naming `rel` (the OS's message names the absolute path)."""
        try:
            yield
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ToolRetry(f"{rel!r}: {reason}.") from None

    def is_dir(self, path: Path) -> bool:
        """Whether `path` is a folder in the workspace (a link out of it is not: nothing about
        its target is told, not even by the order of a listing)."""
        return path.is_dir() and (not path.is_symlink() or self.inside(path))

    def entry(self, path: Path) -> str | None:
        """One list_files line: "name/", "name (N bytes)", a link out of the workspace without
        anything about its target; None for a broken link inside."""
        if path.is_symlink() and not self.inside(path):
            return f"{path.name} (a link out of the workspace)"
        if self.is_dir(path):
            return f"{path.name}/"
        return f"{path.name} ({path.stat().st_size} bytes)" if path.exists() else None


def workspace_tools(workspace: Workspace) -> dict[str, Tool]:
    """list_files, read_file, write_file, delete_file and send_file for one workspace, by name."""

    @tool
    def list_files(path: str = ".") -> str:
        """List the files and folders in a workspace folder (folders end with '/'). Use it to
        find a file's exact path before reading or changing it.

        Args:
            path: A folder relative to the workspace; the workspace itself when omitted.
        """
        folder = workspace.path(path)
        if not folder.is_dir():
            raise ToolRetry(f"{path!r} is not a folder in the workspace.")
        with workspace.errors(path):
            entries = sorted(
                folder.iterdir(), key=lambda p: (not workspace.is_dir(p), p.name.lower())
            )
            lines = [line for p in entries[:LIST_LIMIT] if (line := workspace.entry(p))]
        if len(entries) > LIST_LIMIT:
            lines.append(f"[… and {len(entries) - LIST_LIMIT} more entries]")
        return "\n".join(lines) or f"{workspace.show(folder)} is empty."

    @tool
    def read_file(path: str, offset: Annotated[int, Field(ge=0)] = 0) -> str:
        """Read a text file from the workspace (at most 10000 characters per call).

        Args:
            path: The file, relative to the workspace.
            offset: Characters to skip, to continue a file that was cut.
        """
        file = workspace.path(path)
        if not file.is_file():
            raise ToolRetry(f"No file {path!r} in the workspace; call list_files to see them.")
        with workspace.errors(path), file.open("rb") as f:
            if b"\0" in f.read(_SNIFF):
                return f"{path} is a binary file ({file.stat().st_size} bytes); not shown."
        with workspace.errors(path), file.open(encoding="utf-8", errors="replace") as f:
            f.read(offset)
            text = f.read(READ_LIMIT + 1)
        if len(text) > READ_LIMIT:
            more = offset + READ_LIMIT
            return f"{text[:READ_LIMIT]}\n[… cut; call read_file with offset={more} for more]"
        if not text:
            return "(no more text)" if offset else "(empty file)"
        return text

    @tool(destructive=True, summary=_describe_write)
    def write_file(path: str, content: str, append: bool = False) -> str:
        """Create or overwrite a text file in the workspace (folders are created as needed).

        Args:
            path: The file, relative to the workspace.
            content: The full new text (or the text to add when append is true).
            append: Add to the end of the file instead of replacing it.
        """
        file = workspace.path(path)
        if file == workspace.root or file.is_dir():
            raise ToolRetry(f"{path!r} is a folder; give a file path.")
        with workspace.errors(path):
            file.parent.mkdir(parents=True, exist_ok=True)
            with file.open("a" if append else "w", encoding="utf-8") as f:
                f.write(content)
        return f"{'Appended' if append else 'Wrote'} {len(content)} characters to {path}."

    @tool(destructive=True, summary="Delete the workspace file {path}")
    def delete_file(path: str) -> str:
        """Delete one file from the workspace (not folders).

        Args:
            path: The file, relative to the workspace.
        """
        file = workspace.path(path)
        if file == workspace.root or file.is_dir():
            raise ToolRetry(f"{path!r} is a folder; delete_file removes files only.")
        if not file.is_symlink() and not file.exists():
            raise ToolRetry(f"No file {path!r} in the workspace; call list_files to see them.")
        with workspace.errors(path):
            file.unlink()
        return f"Deleted {path}."

    @tool
    def send_file(path: str) -> ToolResult:
        """Send a file from the workspace to the user in this chat, as a file (a picture shows
        as a picture). Use it when the user asks for a file, or for a chart or export you made,
        instead of pasting its content.

        Args:
            path: The file, relative to the workspace.
        """
        file = workspace.path(path)
        if not file.is_file():
            raise ToolRetry(f"No file {path!r} in the workspace; call list_files to see them.")
        with workspace.errors(path):
            size = file.stat().st_size
            if size > SEND_LIMIT:
                raise ToolRetry(f"{path!r} is {size} bytes; files over 50 MB cannot be sent.")
            data = file.read_bytes()  # read now: what is sent is what was checked
        return ToolResult.with_files(f"{path} goes to the user.", File(name=file.name, data=data))

    tools = [list_files, read_file, write_file, delete_file, send_file]
    return {t.name: t for t in tools}


def _describe_write(path: str, content: str, append: bool = False) -> str:
    verb = "Append" if append else "Write"
    return f"{verb} {len(content)} characters to the workspace file {path}:\n{clip(content, 500)}"

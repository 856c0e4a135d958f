"""bubblewrap for the tests that run commands in it: there and working, or a skip that says
why; under CI=true (which installs it: .ci/run) a failure instead, since there they must run."""

from __future__ import annotations

import functools
import os

import pytest

from tools.builtins import bwrap_path, bwrap_works

SANDBOXES = ("none", "bwrap")  # the values of [tools.run_command] sandbox


@functools.cache
def _missing() -> str | None:
    bwrap = bwrap_path()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    problem = bwrap_works(bwrap)
    return f"bwrap cannot make a sandbox here: {problem}" if problem else None


def require_bwrap() -> None:
    """Skip the test when bubblewrap cannot run (fail it under CI=true)."""
    why = _missing()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true needs the sandbox tests, and {why}")
    pytest.skip(why)


def usable_sandbox() -> str:
    """The sandbox run_command can use here: "bwrap", else "none" (always "bwrap" under
    CI=true, where a broken bubblewrap must fail the tests)."""
    if _missing() is None or os.environ.get("CI", "").lower() == "true":
        return "bwrap"
    return "none"

"""What produced a results file: the command line and the git commit of the code that ran."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def provenance(module: str, argv: list[str]) -> dict:
    """`{"command": ["python", "-m", module, *argv], "git_commit": SHA}`, the SHA suffixed "-dirty" when tracked
    files differ from it (untracked outputs such as runs/ do not count). Take it at start-up: the code imported
    then is the code that runs."""
    commit = _git("rev-parse", "HEAD")
    if commit is not None and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "-dirty"
    return {"command": ["python", "-m", module, *argv], "git_commit": commit}

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


def write_comparison(rows: dict[str, dict], table: str, origin: dict, *folders: Path | None) -> None:
    """An experiment comparison's files in each folder given (None: skipped): `<method>_seed<seed>.json` per row,
    `compare.json` (`origin` + all rows) and `table.md`."""
    import json

    for folder in (Path(f) for f in folders if f is not None):
        folder.mkdir(parents=True, exist_ok=True)
        for method, row in rows.items():
            (folder / f"{method}_seed{row['seed']}.json").write_text(json.dumps(row, indent=2) + "\n")
        (folder / "compare.json").write_text(json.dumps({**origin, "rows": rows}, indent=2) + "\n")
        (folder / "table.md").write_text(table)

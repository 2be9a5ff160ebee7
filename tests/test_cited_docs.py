"""Documents the repository cites exist in it: a reader of a comment or README that names a `.md` file can open it
(no pointers to files outside the repository, e.g. a machine's shared notes)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.:-])((?:\.{0,2}/)?[\w.-]+(?:/[\w.-]+)*\.md)\b")
SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".json", ".txt"}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    # tests/ name the Markdown files they write (reports), not documents to read
    return [ROOT / f for f in out if Path(f).suffix in SUFFIXES and (ROOT / f).is_file() and not f.startswith("tests/")]


def test_every_cited_markdown_file_exists():
    files = tracked()
    names = {p.name for p in files}
    missing = []
    for path in files:
        for line_no, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            for cited in CITED.findall(line):
                if "://" in line and f"/{cited}" in line:
                    continue  # part of a URL
                here = [ROOT / cited, path.parent / cited]
                if any(p.is_file() for p in here) or ("/" not in cited and cited in names):
                    continue
                missing.append(f"{path.relative_to(ROOT)}:{line_no}: {cited}")
    assert not missing, "cited documents the repository does not have:\n" + "\n".join(missing)

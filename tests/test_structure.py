"""The layout rules of the repository, checked on the source: import direction, no import cycles,
no task-hook probing outside the task adapter, and no oversized source file."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vlrl", "tasks", "rewards", "robots")
MAX_LINES = 400


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the product packages."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def imports(name: str, path: Path, known: dict) -> list[tuple[str, int]]:
    """(imported product module, line) for every import statement in the file, lazy ones included."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    # Imports under `if TYPE_CHECKING:` exist for annotations only and never run: not a dependency.
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import sub` imports the submodule when there is one, else a name from pkg.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.append((t, node.lineno))
    return found


def graph() -> dict[str, list[tuple[str, int]]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


@pytest.mark.parametrize("src,forbidden", [("vlrl", ("tasks", "rewards", "robots")), ("rewards", ("tasks",)), ("robots", ("tasks",))])
def test_dependencies_point_inward(src, forbidden):
    bad = [f"{m}:{line} imports {t}" for m, edges in graph().items() if m.split(".")[0] == src
           for t, line in edges if t.split(".")[0] in forbidden]
    assert not bad, "imports against the direction tasks/rewards/robots -> vlrl:\n" + "\n".join(bad)


def test_no_import_cycles():
    g = {m: sorted({t for t, _ in edges}) for m, edges in graph().items()}
    # A package's __init__ importing its own submodules is how a package exposes them; a submodule importing
    # its package's __init__ back would close a cycle, and that is what this finds.
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for t in g.get(m, []):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_only_the_adapter_probes_tasks():
    offenders = []
    for f in sorted((ROOT / "vlrl").rglob("*.py")):
        if f.name == "task.py":
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if "hasattr(task" in line.replace(" ", "") or "getattr(task," in line.replace(" ", ""):
                offenders.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "task hooks are reached through vlrl.task.LoadedTask only:\n" + "\n".join(offenders)


def test_no_source_file_over_the_limit():
    long = []
    for folder in PACKAGES + ("tests", "bench", "scripts", "assets"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            n = len(f.read_text().splitlines())
            if n > MAX_LINES:
                long.append(f"{f.relative_to(ROOT)}: {n} lines")
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)

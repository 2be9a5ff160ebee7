"""Checkpoints: a `save_pretrained` directory plus optimizer, scheduler, RNG and data position.

Written atomically (temporary directory, then rename), so a run killed mid-save never leaves a
checkpoint that looks complete. The last file written (before the rename) is `manifest.json`: the
size and SHA-256 of every other file. `resume=auto` resumes from the newest checkpoint that matches
its manifest, skipping (with a warning) damaged ones; an explicit `resume=DIR` that does not match
is an error naming the file.

Loading never runs code: the trainer state holds only tensors and plain data (dicts, lists, tuples,
str, numbers, None; RNG states as tensors), is checked for that when saved, and is read with
`torch.load(weights_only=True)`. Checkpoints written before manifests (no `manifest.json`) are
accepted with a warning, unverified; their NumPy RNG array is the one non-plain value allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

STATE_FILE = "trainer_state.pt"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that is damaged, fails its manifest, or holds more than tensors and plain data (names the file)."""


def checkpoint_dir(output_dir: str, step: int) -> Path:
    return Path(output_dir) / "checkpoints" / f"step_{step:07d}"


def rng_state() -> dict:
    """Python, NumPy and torch RNG states as plain data and tensors (the NumPy key: int64 tensor [624])."""
    name, key, pos, has_gauss, gauss = np.random.get_state()
    numpy_state = (str(name), torch.from_numpy(key.astype(np.int64)), int(pos), int(has_gauss), float(gauss))
    return {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    """Restore `rng_state()` (also the older format, whose NumPy key is an ndarray)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, key, pos, has_gauss, gauss = state["numpy"]
    key = key.numpy() if torch.is_tensor(key) else np.asarray(key)
    np.random.set_state((name, key.astype(np.uint32), int(pos), int(has_gauss), float(gauss)))
    torch.set_rng_state(state["torch"])


def check_plain(obj, where: str = "state") -> None:
    """Raise TypeError (naming the key path) unless `obj` is tensors and plain data only: what
    `torch.load(weights_only=True)` reads back without allowing any other class. Types are matched
    exactly: a NumPy float is a `float` subclass but would not load."""
    if obj is None or type(obj) in (bool, int, float, str, bytes, torch.Tensor, torch.nn.Parameter):
        return
    if type(obj) in (dict, OrderedDict):
        for k, v in obj.items():
            if type(k) not in (str, int):
                raise TypeError(f"{where}: key {k!r} of type {type(k).__name__}; checkpoint keys must be str or int")
            check_plain(v, f"{where}[{k!r}]")
        return
    if type(obj) in (list, tuple):
        for i, v in enumerate(obj):
            check_plain(v, f"{where}[{i}]")
        return
    raise TypeError(f"{where}: a {type(obj).__module__}.{type(obj).__name__} cannot go into a checkpoint "
                    "(only tensors, dicts, lists, tuples, str, numbers and None load without running code)")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(directory: Path) -> Path:
    """Write `manifest.json` (size and SHA-256 of every file under `directory`); call it after every other file."""
    directory = Path(directory)
    files = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file() and p.name != MANIFEST:
            files[p.relative_to(directory).as_posix()] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    path = directory / MANIFEST
    path.write_text(json.dumps({"version": MANIFEST_VERSION, "files": files}, indent=1) + "\n")
    return path


def verify(directory: Path) -> bool:
    """Check every file against the manifest: True when it matches, False when there is no manifest
    (a checkpoint written before manifests); raise CheckpointError naming the first bad file."""
    directory = Path(directory)
    mpath = directory / MANIFEST
    if not mpath.exists():
        return False
    try:
        files = json.loads(mpath.read_text())["files"]
        entries = [(directory / rel, int(e["size"]), str(e["sha256"])) for rel, e in files.items()]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{mpath}: unreadable manifest ({type(e).__name__}: {e})") from None
    for path, size, _ in entries:  # sizes first: a truncated file is found without hashing the rest
        if not path.is_file():
            raise CheckpointError(f"{path}: missing (listed in {MANIFEST})")
        if path.stat().st_size != size:
            raise CheckpointError(f"{path}: {path.stat().st_size} bytes, {MANIFEST} says {size} (truncated or modified)")
    for path, _, digest in entries:
        if _sha256(path) != digest:
            raise CheckpointError(f"{path}: SHA-256 differs from {MANIFEST} (corrupt or modified)")
    return True


def save(output_dir: str, step: int, model, processor, optimizer, scheduler, extra: dict, keep: int = 2,
         model_state: dict | None = None, optimizer_state: dict | None = None) -> Path:
    """Write checkpoint `step` atomically and prune all but the newest `keep`.

    A sharded model passes its gathered full states (`Strategy.full_state`, vlrl/parallel/): the weights are
    written from `model_state`, and `optimizer_state` (keyed by parameter names) is stored with
    optimizer_format "full"."""
    final = checkpoint_dir(output_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    if model_state is not None:
        model.save_pretrained(tmp, safe_serialization=True, state_dict=model_state)
    else:
        model.save_pretrained(tmp, safe_serialization=True)
    processor.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer_state is None else optimizer_state,
        "optimizer_format": "by_id" if optimizer_state is None else "full",
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        **extra,
    }
    save_state(tmp, state)
    write_manifest(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    (Path(output_dir) / "checkpoints" / "latest").write_text(final.name + "\n")
    if keep > 0:
        for old in list_checkpoints(output_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def save_state(directory: Path, state: dict) -> Path:
    """`state` to `directory/trainer_state.pt`, refused (TypeError) unless tensors and plain data."""
    check_plain(state)
    path = Path(directory) / STATE_FILE
    torch.save(state, path)
    return path


def list_checkpoints(output_dir: str) -> list[Path]:
    """Checkpoint directories (with a state file or a manifest), oldest first; `.tmp` ones are unfinished."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp")
             and ((p / STATE_FILE).exists() or (p / MANIFEST).exists())]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def _checked(path: Path) -> Path:
    if not verify(path):
        warnings.warn(f"checkpoint {path} has no {MANIFEST} (written before checksummed checkpoints): "
                      "its files cannot be verified; resuming from it anyway", stacklevel=3)
    return path


def find_resume(output_dir: str, resume: str) -> Path | None:
    """The checkpoint to resume from: None for resume=none (or auto with nothing saved yet).

    auto: the newest checkpoint that passes `verify`; damaged ones are skipped with a warning, and
    none intact among several is an error. An explicit directory that fails is an error."""
    if resume == "none":
        return None
    if resume == "auto":
        found, problems = list_checkpoints(output_dir), []
        for path in reversed(found):
            try:
                return _checked(path)
            except CheckpointError as e:
                warnings.warn(f"skipping damaged checkpoint {path}: {e}", stacklevel=2)
                problems.append(str(e))
        if found:
            raise CheckpointError(f"trainer.resume=auto: no intact checkpoint in {Path(output_dir) / 'checkpoints'}: "
                                  + "; ".join(problems))
        return None
    path = Path(resume)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(f"trainer.resume={resume!r}: no {STATE_FILE} in that directory")
    return _checked(path)


# The NumPy array in the RNG state of checkpoints written before RNG states were tensors. Reading an
# array back constructs only ndarray / dtype objects (an object array's items go through the same
# restricted unpickler), so this allowlist runs no code either.
_reconstruct = np._core.multiarray._reconstruct  # numpy >= 2; files from numpy 1 name it numpy.core.multiarray
_LEGACY_NUMPY = [_reconstruct, (_reconstruct, "numpy.core.multiarray._reconstruct"), np.ndarray, np.dtype, np.dtypes.UInt32DType]


def load_state(path: Path) -> dict:
    """The trainer state of checkpoint `path`, read with weights_only=True; CheckpointError names the file."""
    file = Path(path) / STATE_FILE
    try:
        if (Path(path) / MANIFEST).exists():
            return torch.load(file, map_location="cpu", weights_only=True)
        with torch.serialization.safe_globals(_LEGACY_NUMPY):
            return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (any failure: a damaged or tampered file)
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "WeightsUnpickler error" in ln), lines[0] if lines else type(e).__name__)
        raise CheckpointError(f"{file}: cannot be loaded as tensors and plain data (torch.load weights_only=True): "
                              f"{detail}. Loading a checkpoint never runs code; this file holds something else "
                              "(damaged, tampered with, or not written by vlrl)") from None

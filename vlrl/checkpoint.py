"""Checkpoints: a `save_pretrained` directory plus optimizer, scheduler, RNG and data position.

Written atomically (temporary directory, then rename), so a run killed mid-save never leaves a
checkpoint that looks complete. `resume=auto` picks the newest complete one.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

STATE_FILE = "trainer_state.pt"


def checkpoint_dir(output_dir: str, step: int) -> Path:
    return Path(output_dir) / "checkpoints" / f"step_{step:07d}"


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


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
    torch.save(state, tmp / STATE_FILE)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    (Path(output_dir) / "checkpoints" / "latest").write_text(final.name + "\n")
    if keep > 0:
        for old in list_checkpoints(output_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(output_dir: str) -> list[Path]:
    """Complete checkpoints (those with a state file), oldest first."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp") and (p / STATE_FILE).exists()]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def find_resume(output_dir: str, resume: str) -> Path | None:
    """The checkpoint to resume from: None for resume=none (or auto with nothing saved yet)."""
    if resume == "none":
        return None
    if resume == "auto":
        found = list_checkpoints(output_dir)
        return found[-1] if found else None
    path = Path(resume)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(f"trainer.resume={resume!r}: no {STATE_FILE} in that directory")
    return path


def load_state(path: Path) -> dict:
    return torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)

"""Run folders: a run never silently continues, mixes with or overwrites another run's folder.

At start (`trainer.output_dir`):

* `trainer.resume=auto` continues the newest checkpoint in the folder only when that checkpoint was written by the
  same kind of run (vlrl/train.py or vlrl/sft.py) with the same `model.path`, `task` and (RL) `algo`; otherwise it
  stops with the differing fields named. Other settings (steps, learning rate, time budget, ...) may change. A
  field the checkpoint lacks (added to vlrl since) counts as its default value.
* A folder that already holds a run (metrics, checkpoints, plots) that this run does not continue is refused,
  unless `trainer.overwrite=true`, which first removes that run's files (only vlrl's own; other files stay).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from omegaconf import OmegaConf

from vlrl.config import UsageError, resolve_path

# What a run writes into its output_dir (vlrl/train.py, vlrl/sft.py, vlrl.metrics.RunLogger).
RUN_FILES = ("metrics.jsonl", "samples.jsonl", "config.yaml", "checkpoints", "tensorboard", "wandb",
             "reward_curve.png", "eval_curve.png")


class RunFolderError(UsageError):
    """A run folder this run must not use as asked (the message says why and what to set)."""


def run_files(out_dir: str | os.PathLike) -> list[str]:
    """The names of RUN_FILES present in `out_dir`."""
    return [name for name in RUN_FILES if (Path(out_dir) / name).exists()]


def _same_path(a: str, b: str) -> bool:
    ra, rb = resolve_path(a), resolve_path(b)
    if os.path.exists(ra) and os.path.exists(rb):
        return os.path.realpath(ra) == os.path.realpath(rb)
    return a == b


def _flat(section, prefix: str) -> dict:
    if not isinstance(section, dict):
        return {prefix.rstrip("."): section}
    out = {}
    for k, v in section.items():
        out.update(_flat(v, f"{prefix}{k}."))
    return out


def differences(saved: dict, current: dict, entry_point: str, defaults: dict | None = None) -> list[str]:
    """The fields that make a checkpoint another run's: model.path, task.*, and algo.* for RL runs.
    `saved`, `current`: configs as plain dicts (`saved["entry_point"]`, when present: the writer). `defaults`:
    flat {"task.x": default}: a field the checkpoint lacks (added to vlrl after it was written) counts as its
    default, so upgrading vlrl does not orphan a run whose new fields keep their defaults."""
    defaults = defaults or {}
    out = []
    if saved.get("entry_point") not in (None, entry_point):
        out.append(f"entry point: written by vlrl/{saved['entry_point']}.py, this is vlrl/{entry_point}.py")
    a, b = saved.get("model", {}).get("path"), current["model"]["path"]
    if a is not None and not _same_path(str(a), str(b)):
        out.append(f"model.path: {a!r} in the checkpoint, {b!r} now")
    for section in ("task",) + (("algo",) if entry_point == "train" else ()):
        old, new = _flat(saved.get(section, {}), f"{section}."), _flat(current[section], f"{section}.")
        for key in sorted(set(old) | set(new)):
            if key not in old and key in defaults:
                old[key] = defaults[key]
            if old.get(key) != new.get(key):
                out.append(f"{key}: {old.get(key)!r} in the checkpoint, {new.get(key)!r} now")
    return out


def check_resume(state: dict, checkpoint: Path, cfg, entry_point: str) -> None:
    """Refuse `trainer.resume=auto` from `checkpoint` (trainer `state` loaded) when it is another run's."""
    if "config" not in state:
        return  # written before configs were saved with checkpoints: nothing to compare
    saved = OmegaConf.to_container(OmegaConf.create(state["config"]), resolve=True)
    saved["entry_point"] = state.get("entry_point")
    defaults = {}
    for section in ("task", "algo"):
        try:
            fresh = type(getattr(cfg, section))()  # the section's dataclass with every field at its default
        except TypeError:
            continue
        defaults.update(_flat(OmegaConf.to_container(OmegaConf.structured(fresh), resolve=True), f"{section}."))
    diff = differences(saved, OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True), entry_point, defaults)
    if diff:
        raise RunFolderError(
            f"trainer.resume=auto: the newest checkpoint {checkpoint} belongs to another run ("
            + "; ".join(diff) + f"). Use another trainer.output_dir (this one: {cfg.trainer.output_dir}), or "
            "trainer.resume=none trainer.overwrite=true to replace that run")


def _inside(path: Path, folder: str) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False


def check_output_dir(cfg, resume_from: Path | None) -> list[str]:
    """Refuse an output_dir holding a run that this one does not continue (a resume from a checkpoint inside it),
    unless `trainer.overwrite`. -> the run files to remove (overwrite), else []. Reads only: every process calls it
    before any writes."""
    out_dir = cfg.trainer.output_dir
    found = run_files(out_dir)
    if not found or (resume_from is not None and _inside(resume_from, out_dir)):
        return []
    if cfg.trainer.overwrite:
        return found
    what = ", ".join(found)
    hint = (" and no checkpoint in it to continue" if cfg.trainer.resume == "auto"
            else f", and this run resumes from {resume_from}, outside it" if resume_from is not None else "")
    raise RunFolderError(
        f"trainer.output_dir={out_dir} already holds a run ({what}){hint}: choose another trainer.output_dir, continue "
        "it with trainer.resume=auto, or replace it with trainer.resume=none trainer.overwrite=true")


def remove_run(out_dir: str, names: list[str]) -> None:
    """Delete the previous run's files (`names` from check_output_dir); other files in the folder stay."""
    for name in names:
        path = Path(out_dir) / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    if names:
        print(f"[vlrl] trainer.overwrite=true: removed the previous run's {', '.join(names)} from {out_dir}", flush=True)

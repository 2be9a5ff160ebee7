"""Shared training loop of the VLM reward models: AdamW, warm-up, resumable checkpoints, logs, run record.

Checkpoints: ``OUT/checkpoints/step_XXXXXXX/`` (the model's `save` directory + ``trainer_state.pt``:
optimizer, step, RNG, training wall time + ``manifest.json``), written to a ``.tmp`` directory then
renamed, and read back as vlrl/checkpoint.py reads the policy's (weights_only=True, checked against the
manifest); `resume=auto` continues from the newest intact one. The batch of step `s` is a pure function of (seed, s), so a
resumed run sees the same data as an uninterrupted one. ``OUT/run.json`` records every invocation's
command, seed, wall time and steps; ``OUT/metrics.jsonl`` the periodic log lines.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from vlrl import checkpoint

STATE = "trainer_state.pt"


@dataclass
class TrainArgs:
    out: str
    steps: int = 1000
    minutes: float = 0.0
    """Stop (and save) after this many minutes of training in this invocation; 0 = no limit."""
    batch: int = 32
    lr: float = 1e-3
    warmup: int = 50
    seed: int = 0
    log_every: int = 10
    save_every: int = 100
    eval_every: int = 0
    resume: str = "auto"
    threads: int = 1
    max_grad_norm: float = 1.0
    keep: int = 2


def add_train_args(ap) -> None:
    """One `--flag` per TrainArgs field (except `out`, which the script declares itself)."""
    import dataclasses

    for f in dataclasses.fields(TrainArgs):
        if f.name != "out":
            ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)


def train_args_from(a) -> TrainArgs:
    """TrainArgs from parsed arguments (see add_train_args)."""
    import dataclasses

    return TrainArgs(out=a.out, **{f.name: getattr(a, f.name) for f in dataclasses.fields(TrainArgs) if f.name != "out"})


def add_common_args(ap) -> None:
    """The flags every reward-model trainer has: data, output, head, base model, held-out split, eval-only,
    then the TrainArgs ones (add_train_args)."""
    ap.add_argument("--data", required=True, help="comma-separated .npz files from rewards.learned.sim_data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--head", default="regression", choices=["regression", "generative"])
    ap.add_argument("--model", default="assets/tiny-qwen2.5-vl")
    ap.add_argument("--held-out-frac", type=float, default=0.2)
    ap.add_argument("--eval-only", default=None, help="evaluate this checkpoint directory on the held-out episodes, no training")
    add_train_args(ap)


def split_episodes(eps: list, held_out_frac: float) -> tuple[list, list]:
    """(train, held-out) episodes, split by sim seed (never within an episode)."""
    from rewards.learned.pairs import split_by_seed

    train_idx, test_idx = split_by_seed(eps, held_out_frac, seed=0)
    return [eps[k] for k in train_idx], [eps[k] for k in test_idx]


def checkpoints(out: str) -> list[Path]:
    root = Path(out) / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp") and (p / STATE).exists()]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def latest(out: str) -> Path | None:
    c = checkpoints(out)
    return c[-1] if c else None


def save_checkpoint(out: str, step: int, model, optimizer, extra: dict, keep: int = 2) -> Path:
    final = Path(out) / "checkpoints" / f"step_{step:07d}"
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save(tmp)
    checkpoint.save_state(tmp, {"step": step, "optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(), **extra})
    checkpoint.write_manifest(tmp)  # last: verified on resume
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in checkpoints(out)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _record(out: str, entry: dict) -> None:
    path = Path(out) / "run.json"
    runs = json.loads(path.read_text()) if path.exists() else []
    runs = runs + [entry]
    path.write_text(json.dumps(runs, indent=1, default=str))


def train(make_model: Callable, load_model: Callable, batch_fn: Callable, args: TrainArgs,
          eval_fn: Callable | None = None, loss_weights: dict | None = None, name: str = "reward") -> dict:
    """Train `make_model()` (or the resumed `load_model(dir)`) on `batch_fn(step) -> (frames, image_index,
    instructions, labels)`. Returns {"step", "train_wall_s", "last": last logged metrics, "eval": ...}."""
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    resume_from = checkpoint.find_resume(args.out, args.resume)
    torch.manual_seed(args.seed)
    model = load_model(resume_from) if resume_from else make_model()
    model.train()
    model.vlm.eval()  # dropout off (configs set it to 0 anyway)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    start, prev_wall = 0, 0.0
    if resume_from:
        st = checkpoint.load_state(resume_from)
        opt.load_state_dict(st["optimizer"])
        torch.set_rng_state(st["torch_rng"])
        start, prev_wall = st["step"], st.get("train_wall_s", 0.0)
    print(f"[{name}] {'resuming from ' + str(resume_from) if resume_from else 'starting'} -> {args.out} "
          f"(steps {start}..{args.steps}, batch {args.batch}, lr {args.lr}, seed {args.seed})", flush=True)
    entry = {"started": started, "command": " ".join(shlex.quote(a) for a in [sys.executable, "-m", f"rewards.learned.train_{name}"] + sys.argv[1:]),
             "args": asdict(args), "resumed_from": str(resume_from) if resume_from else None, "start_step": start}
    metrics_f = open(Path(args.out) / "metrics.jsonl", "a")
    t0 = time.perf_counter()
    step, acc, last, ev = start, [], {}, None

    def wall() -> float:
        return prev_wall + time.perf_counter() - t0

    def save():
        save_checkpoint(args.out, step, model, opt, {"train_wall_s": wall(), "args": asdict(args)}, args.keep)

    try:
        while step < args.steps:
            if args.minutes and time.perf_counter() - t0 > 60 * args.minutes:
                print(f"[{name}] time limit ({args.minutes} min) reached at step {step}", flush=True)
                break
            ts = time.perf_counter()
            lr = args.lr * min(1.0, (step + 1) / max(1, args.warmup))
            for g in opt.param_groups:
                g["lr"] = lr
            frames, image_index, instructions, labels = batch_fn(step)
            loss, pred = model.loss(frames, image_index, instructions, labels, loss_weights)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            if torch.isfinite(gn):
                opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            acc.append(_batch_stats(model, loss.item(), pred.cpu().numpy(), np.asarray(labels), time.perf_counter() - ts))
            if step % args.log_every == 0 or step == args.steps:
                last = {k: float(np.mean([a[k] for a in acc if k in a])) for k in acc[-1]}
                last.update(step=step, lr=lr, train_wall_s=round(wall(), 1))
                acc = []
                metrics_f.write(json.dumps(last) + "\n")
                metrics_f.flush()
                print(f"[{name}] step {step}/{args.steps} " + " ".join(f"{k} {v:.4g}" for k, v in last.items()
                                                                        if k not in ("step", "train_wall_s")) + f" wall {wall():.0f}s", flush=True)
            if args.save_every and step % args.save_every == 0:
                save()
            if eval_fn and args.eval_every and step % args.eval_every == 0 and step < args.steps:
                model.eval()
                ev = eval_fn(model)
                model.train()
                model.vlm.eval()
                metrics_f.write(json.dumps({"step": step, **{f"eval/{k}": v for k, v in _flat(ev).items()}}) + "\n")
                print(f"[{name}] eval @ {step}: " + json.dumps(_flat(ev)), flush=True)
    finally:
        metrics_f.close()
    if step > start or resume_from is None:
        save()
    train_wall = wall()
    result = {"step": step, "train_wall_s": round(train_wall, 1), "last": last}
    if eval_fn:
        model.eval()
        te = time.perf_counter()
        ev = eval_fn(model)
        result["eval"] = ev
        result["eval_wall_s"] = round(time.perf_counter() - te, 1)
        (Path(args.out) / "eval.json").write_text(json.dumps({"step": step, **result}, indent=1, default=float))
        print(f"[{name}] final eval @ {step}: " + json.dumps(_flat(ev)), flush=True)
    entry.update(end_step=step, train_wall_s=result["train_wall_s"], invocation_wall_s=round(time.perf_counter() - t0, 1),
                 finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
    _record(args.out, entry)
    return result


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float, np.floating)):
            out[f"{prefix}{k}"] = round(float(v), 4)
    return out


def _batch_stats(model, loss: float, pred: np.ndarray, labels: np.ndarray, dt: float) -> dict:
    s = {"loss": loss, "s_per_step": dt}
    for k, name in enumerate(model.cfg.outputs):
        if name in model.cfg.signed:
            nz = np.abs(labels[:, k]) >= 1.0
            if nz.any():
                s[f"{name}_sign_acc"] = float((np.sign(pred[nz, k]) == np.sign(labels[nz, k])).mean())
            s[f"{name}_mae"] = float(np.abs(pred[:, k] - labels[:, k]).mean())
        else:
            s[f"{name}_acc"] = float(((pred[:, k] >= 0.5) == (labels[:, k] >= 0.5)).mean())
    return s


def evaluate_checkpoint(path: str, load_model: Callable, eval_fn: Callable, out: str, threads: int = 1) -> dict:
    """Evaluate a saved checkpoint (no training); writes OUT/eval_<checkpoint name>.json."""
    torch.set_num_threads(threads)
    model = load_model(Path(path)).eval()
    t0 = time.perf_counter()
    ev = eval_fn(model)
    res = {"checkpoint": str(path), "eval": ev, "eval_wall_s": round(time.perf_counter() - t0, 1),
           "command": " ".join(shlex.quote(x) for x in sys.argv)}
    os.makedirs(out, exist_ok=True)
    (Path(out) / f"eval_{Path(path).name}.json").write_text(json.dumps(res, indent=1, default=float))
    print("[eval] " + json.dumps(_flat(ev)), flush=True)
    return res

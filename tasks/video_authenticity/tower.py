"""Stage 1 of the video warm start: teach the vision tower to see artifacts before the language model reads it.

    python -m tasks.video_authenticity.tower --data outputs/video_auth --kinds flicker --out runs/va_tower \
        [--model assets/tiny-qwen2.5-vl] [--steps 300] [--lr 1e-3] [--summary FILE.json]

Why: supervised training through the whole tiny VLM stays at the ln 2 / 13 plateau (the answer letter at
chance) even on flicker, which a linear probe on frame brightness separates 97% of the time. The vision tower
trained on its own with a throwaway linear head (on its mean-pooled merged video features) learns flicker in a
few hundred steps. This script does that and saves the whole model (tower updated, language model untouched,
head dropped) with `save_pretrained`, as the start of the supervised stage (vlrl/sft.py model.path=OUT).

Fitting uses the training manifest's scenes whose fake clip is one of `--kinds` (both the real and the fake clip
of each such scene, so the classes stay balanced); the last `--val-share` of those scenes are held back to score
the head. The held-out manifest is not read here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from tasks.video_authenticity.config import Config
from tasks.video_authenticity.decode import ClipLoader
from tasks.video_authenticity.env import observation
from tasks.video_authenticity.manifest import load_clips, read_manifest
from vlrl.encoding import encode
from vlrl.provenance import provenance


def scene_of(video: Path) -> str:
    """The scene id of a built-in clip: `clips/train/17_fake.mp4` -> "17"."""
    return video.name.split("_")[0]


def by_kinds(records, kinds: list[str]) -> list[list]:
    """The records grouped by scene, in file order, keeping the scenes whose fake clip is one of `kinds`
    ("all": every scene)."""
    scenes: dict[str, list] = {}
    for rec in records:
        scenes.setdefault(scene_of(rec.video), []).append(rec)
    return [rs for rs in scenes.values() if "all" in kinds or any(r.generator in kinds for r in rs)]


def encoded(records, cfg: Config, processor) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """(pixel_values_videos, video_grid_thw, 1.0 if fake) per decodable record, through the task's own encoding."""
    with ClipLoader(cfg.spec(), timeout_s=cfg.decode_timeout_s) as loader:
        usable, _, skipped = load_clips(records, loader)
    if skipped["count"]:
        print(f"skipped {skipped}", file=sys.stderr)
    out = []
    for rec, clip in usable:
        vision = encode(processor, observation(clip.frames, clip.fps, str(rec.video), cfg, {})).vision
        out.append((vision["pixel_values_videos"], vision["video_grid_thw"], float(not rec.real)))
    return out


def head_logits(inner, head, items) -> torch.Tensor:
    """[B] logits of the throwaway head on the mean-pooled merged video features of `items`."""
    px = torch.cat([it[0] for it in items])
    grid = torch.cat([it[1] for it in items])
    feats = inner.get_video_features(px, grid, return_dict=True).pooler_output
    return head(torch.stack([f.mean(0) for f in feats])).squeeze(-1)


def accuracy(inner, head, items, batch: int = 64) -> float:
    with torch.no_grad():
        hits = [((head_logits(inner, head, items[i:i + batch]) > 0).float()
                 == torch.tensor([it[2] for it in items[i:i + batch]])).sum().item()
                for i in range(0, len(items), batch)]
    return sum(hits) / max(len(items), 1)


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="built-in clip folder (train.jsonl inside) or a train manifest")
    ap.add_argument("--kinds", default="flicker", help="comma-separated artifact kinds to fit on, or 'all'")
    ap.add_argument("--out", required=True, help="where the model is saved (save_pretrained)")
    ap.add_argument("--model", default="assets/tiny-qwen2.5-vl", help="the model to start from")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--val-share", type=float, default=1 / 3, help="share of the fitted scenes held back to score")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--summary", help="also write the summary JSON here")
    args = ap.parse_args(argv)
    origin = provenance("tasks.video_authenticity.tower", argv)
    from transformers import AutoModelForImageTextToText, AutoProcessor

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    manifest = Path(args.data) / "train.jsonl" if Path(args.data).is_dir() else Path(args.data)
    scenes = by_kinds(read_manifest(manifest), kinds)
    if len(scenes) < 2:
        raise SystemExit(f"--kinds {args.kinds}: {len(scenes)} scene(s) in {manifest}; need at least 2")
    n_val = max(1, int(round(len(scenes) * args.val_share)))
    cfg = Config()
    processor = AutoProcessor.from_pretrained(args.model)
    model = AutoModelForImageTextToText.from_pretrained(args.model)
    t0 = time.perf_counter()
    fit = encoded([r for rs in scenes[:-n_val] for r in rs], cfg, processor)
    val = encoded([r for rs in scenes[-n_val:] for r in rs], cfg, processor)
    encode_s = time.perf_counter() - t0
    inner = model.model
    head = torch.nn.Linear(inner.visual.merger.mlp[-1].out_features, 1)
    opt = torch.optim.AdamW([*inner.visual.parameters(), *head.parameters()], lr=args.lr, weight_decay=0.0)
    labels = torch.tensor([it[2] for it in fit])
    rng = np.random.default_rng(args.seed)
    log, t0 = [], time.perf_counter()
    for step in range(1, args.steps + 1):
        idx = rng.integers(len(fit), size=args.batch)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            head_logits(inner, head, [fit[i] for i in idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.steps:
            rec = {"step": step, "loss": round(loss.item(), 4), "fit_acc": accuracy(inner, head, fit),
                   "val_acc": accuracy(inner, head, val), "wall_s": round(time.perf_counter() - t0, 1)}
            log.append(rec)
            print(json.dumps(rec), flush=True)
    train_s = time.perf_counter() - t0
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    summary = {"stage": "tower", "kinds": kinds, "fit_clips": len(fit), "val_clips": len(val),
               "fit_scenes": len(scenes) - n_val, "val_scenes": n_val, "steps": args.steps, "lr": args.lr,
               "batch": args.batch, "seed": args.seed, "start_model": args.model, "final": log[-1], "log": log,
               "encode_wall_s": round(encode_s, 1), "train_wall_s": round(train_s, 1), "out": args.out, **origin}
    for path in (Path(args.out) / "tower_summary.json", Path(args.summary) if args.summary else None):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()

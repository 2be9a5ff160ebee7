"""Train the VLAC-style progress model on simulated episodes, then evaluate it on held-out episodes.

    python -m rewards.sim_data --task Lift --seeds 0-29 --out runs/rewards/lift84.npz
    python -m rewards.train_progress --data runs/rewards/lift84.npz --out runs/rewards/progress \\
        --steps 2000 --minutes 9 --seed 0

Episodes are split by sim seed (all variants of a scene on one side). Each step draws a fresh batch of
pairs (rewards.pairs: forward, reverse, local, stagnation, mismatched-instruction) from the training
episodes; the batch of step s is a function of (seed, s). Re-running the same command resumes from the
newest checkpoint. The final evaluation (rewards.progress_model.evaluate_progress) goes to OUT/eval.json.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from rewards import sim_data
from rewards.pairs import PairMix, sample_pairs
from rewards.progress_model import evaluate_progress
from rewards.train_common import add_train_args, evaluate_checkpoint, split_episodes, train, train_args_from
from rewards.vlm_reward import VLMReward, VLMRewardConfig


def load_episodes(paths: str):
    eps = []
    for p in paths.split(","):
        eps.extend(sim_data.load(p))
    sim_data.label_progress(eps)  # labels follow the current definition, whatever the file holds
    return eps


def batch_from_pairs(episodes, pairs):
    """(unique frames [U,H,W,3], image_index [(a, b)], instructions, labels [B, 2]) for Pair objects."""
    slot, frames, index = {}, [], []
    for p in pairs:
        row = []
        for t in (p.i, p.j):
            key = (p.episode, t)
            if key not in slot:
                slot[key] = len(frames)
                frames.append(episodes[p.episode].frames[t])
            row.append(slot[key])
        index.append(tuple(row))
    # (delta, done, progress of frame i, progress of frame j): the last two feed the optional aux loss
    labels = np.array([[p.delta, p.done, episodes[p.episode].progress[p.i], episodes[p.episode].progress[p.j]]
                       for p in pairs], dtype=np.float32)
    return np.stack(frames), index, [p.instruction for p in pairs], labels


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="comma-separated .npz files from rewards.sim_data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--head", default="regression", choices=["regression", "generative"])
    ap.add_argument("--model", default="assets/tiny-qwen2.5-vl")
    ap.add_argument("--label", default="relative", choices=["relative", "absolute"])
    ap.add_argument("--stride", type=int, default=4, help="frame gap of 'local' pairs and of the evaluation chain")
    ap.add_argument("--held-out-frac", type=float, default=0.2)
    ap.add_argument("--mix", default="", help="pair mixture, e.g. forward=0.35,reverse=0.2,local=0.2,stagnation=0.1,mismatch=0.15")
    ap.add_argument("--done-weight", type=float, default=1.0)
    ap.add_argument("--aux-weight", type=float, default=0.5, help="per-frame progress auxiliary loss (regression head)")
    ap.add_argument("--eval-pairs", type=int, default=512)
    ap.add_argument("--eval-only", default=None, help="evaluate this checkpoint directory on the held-out episodes, no training")
    add_train_args(ap)
    a = ap.parse_args(argv)
    args = train_args_from(a)

    eps = load_episodes(a.data)
    train_eps, test_eps = split_episodes(eps, a.held_out_frac)
    print(f"[progress] {len(train_eps)} train episodes (seeds {sorted({e.seed for e in train_eps})}), "
          f"{len(test_eps)} held-out (seeds {sorted({e.seed for e in test_eps})})", flush=True)
    mix = PairMix(**{k: float(v) for k, v in (kv.split("=") for kv in a.mix.split(",") if kv)})
    cfg = VLMRewardConfig(model_path=a.model, head=a.head, aux_weight=a.aux_weight if a.head == "regression" else 0.0)

    def batch_fn(step: int):
        rng = np.random.default_rng([args.seed, step])
        return batch_from_pairs(train_eps, sample_pairs(train_eps, args.batch, rng, mix, a.stride, label=a.label))

    def eval_fn(model):
        return evaluate_progress(model, test_eps, a.stride, a.eval_pairs, seed=1, label=a.label)

    if a.eval_only:
        return evaluate_checkpoint(a.eval_only, VLMReward.load, eval_fn, a.out, a.threads)
    result = train(lambda: VLMReward(cfg), VLMReward.load, batch_fn, args, eval_fn,
                   loss_weights={"done": a.done_weight}, name="progress")
    result["data"] = {"files": a.data, "train_episodes": len(train_eps), "held_out_episodes": len(test_eps),
                      "held_out_seeds": sorted({e.seed for e in test_eps})}
    print(json.dumps({k: result[k] for k in ("step", "train_wall_s")}))
    return result


if __name__ == "__main__":
    main()

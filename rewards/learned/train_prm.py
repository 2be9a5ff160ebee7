"""Train the task-completion PRM on segment pseudo-labels, then evaluate on held-out episodes.

    python -m rewards.learned.train_prm --data runs/rewards/lift84.npz --out runs/rewards/prm --steps 800 --minutes 6

Same loop, checkpoints, resume and run record as rewards.learned.train_progress (rewards.learned.train_common).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from rewards.learned.prm import PRM_CONFIG, batch_from_samples, evaluate_prm, sample_prm
from rewards.learned.train_common import add_common_args, evaluate_checkpoint, split_episodes, train, train_args_from
from rewards.learned.train_progress import load_episodes
from rewards.learned.vlm_reward import VLMReward


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--mismatch", type=float, default=0.15)
    ap.add_argument("--positive", type=float, default=0.4)
    ap.add_argument("--eval-every-frame", type=int, default=2, help="evaluate every k-th frame")
    a = ap.parse_args(argv)
    args = train_args_from(a)
    eps = load_episodes(a.data)
    train_eps, test_eps = split_episodes(eps, a.held_out_frac)
    print(f"[prm] {len(train_eps)} train episodes, {len(test_eps)} held-out (seeds {sorted({e.seed for e in test_eps})})", flush=True)
    cfg = dataclasses.replace(PRM_CONFIG, model_path=a.model, head=a.head)

    def batch_fn(step: int):
        rng = np.random.default_rng([args.seed, step])
        return batch_from_samples(train_eps, sample_prm(train_eps, args.batch, rng, a.mismatch, a.positive))

    def eval_fn(m):
        return evaluate_prm(m, test_eps, every=a.eval_every_frame)

    if a.eval_only:
        return evaluate_checkpoint(a.eval_only, VLMReward.load, eval_fn, a.out, a.threads)
    result = train(lambda: VLMReward(cfg), VLMReward.load, batch_fn, args, eval_fn, name="prm")
    print(json.dumps({k: result[k] for k in ("step", "train_wall_s")}))
    return result


if __name__ == "__main__":
    main()

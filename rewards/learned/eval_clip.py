"""How well does a CLIP reward track success on held-out sim episodes? (VLM-RM, honest baseline)

    python -m rewards.learned.eval_clip --data runs/rewards/lift84.npz --model tiny-clip --seeds 0,1,2

Per frame: Pearson (point-biserial) correlation between the CLIP reward and the env's success flag;
per episode: Spearman between the episode's mean reward and its final success; per successful
episode: Spearman between the reward and time (a VOC for a frame reward). A random-weight CLIP
should score ~0 on all three; with real weights (`--pretrained` pointing at local weights) the same
command measures them.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rewards.learned.base import Query
from rewards.learned.metrics import nanmean, pearson, spearman
from rewards.learned.pairs import split_by_seed
from rewards.learned.train_progress import load_episodes


def clip_correlations(rm, episodes) -> dict:
    frame_r, frame_s, ep_mean, ep_succ, voc = [], [], [], [], []
    rewards = rm([Query(e.frames, e.instruction) for e in episodes])
    for e, r in zip(episodes, rewards):
        frame_r.append(r)
        frame_s.append(e.success[1:])
        ep_mean.append(float(np.mean(r)))
        ep_succ.append(float(e.succeeded))
        if e.succeeded:
            ts = int(np.flatnonzero(e.success)[0])
            voc.append(spearman(r[:ts], np.arange(ts)))
    fr, fs = np.concatenate(frame_r), np.concatenate(frame_s)
    return {"frame_corr_success": pearson(fr, fs), "episode_spearman_success": spearman(ep_mean, ep_succ),
            "voc": nanmean(voc), "reward_mean": float(fr.mean()), "reward_std": float(fr.std()),
            "frames": int(len(fr)), "episodes": len(episodes), "successful": int(sum(ep_succ))}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", default="tiny-clip")
    ap.add_argument("--pretrained", default=None)
    ap.add_argument("--alphas", default="0,0.5,1")
    ap.add_argument("--seeds", default="0,1,2", help="init seeds of random-weight models")
    ap.add_argument("--held-out-frac", type=float, default=0.2)
    ap.add_argument("--baseline", default="a robot arm next to a table")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import torch  # noqa: PLC0415

    from rewards.learned.clip_reward import ClipReward  # noqa: PLC0415

    torch.set_num_threads(1)
    eps = load_episodes(a.data)
    _, test_idx = split_by_seed(eps, a.held_out_frac, seed=0)
    test = [eps[k] for k in test_idx]
    t0 = time.perf_counter()
    results = {}
    for seed in [int(s) for s in a.seeds.split(",")] if a.pretrained is None else [0]:
        for alpha in [float(x) for x in a.alphas.split(",")]:
            rm = ClipReward(a.model, a.pretrained, alpha=alpha, baseline_prompts=(a.baseline,), seed=seed)
            results[f"seed{seed}/alpha{alpha}"] = clip_correlations(rm, test)
            print(f"[clip] seed {seed} alpha {alpha}: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                                                     for k, v in results[f'seed{seed}/alpha{alpha}'].items()}), flush=True)
    out = {"args": vars(a), "results": results, "wall_s": round(time.perf_counter() - t0, 1),
           "held_out_seeds": sorted({e.seed for e in test})}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()

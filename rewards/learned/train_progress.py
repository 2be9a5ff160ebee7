"""Train the VLAC-style progress model on simulated episodes, then evaluate it on held-out episodes.

    python -m rewards.learned.sim_data --task Lift --seeds 0-29 --out runs/rewards/lift84.npz
    python -m rewards.learned.train_progress --data runs/rewards/lift84.npz --out runs/rewards/progress \\
        --steps 2000 --minutes 9 --seed 0

Episodes are split by sim seed (all variants of a scene on one side). Each step draws a fresh batch of
pairs (rewards.learned.pairs: forward, reverse, local, stagnation, mismatched-instruction) from the training
episodes; the batch of step s is a function of (seed, s). Re-running the same command resumes from the
newest checkpoint. The final evaluation (rewards.learned.progress_model.evaluate_progress) goes to OUT/eval.json.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from rewards.learned import sim_data
from rewards.learned.pairs import PairMix, reference_indices, sample_pairs, sample_references
from rewards.learned.progress_model import evaluate_progress
from rewards.learned.train_common import add_common_args, evaluate_checkpoint, split_episodes, train, train_args_from
from rewards.learned.vlm_reward import VLMReward, reference_config


def load_episodes(paths: str):
    eps = []
    for p in paths.split(","):
        eps.extend(sim_data.load(p))
    sim_data.label_progress(eps)  # labels follow the current definition, whatever the file holds
    return eps


def of_kinds(episodes, kinds: str, flag: str):
    """The episodes whose kind is in the comma-separated `kinds` (all when empty); none left is an error."""
    if not kinds:
        return episodes
    wanted = set(kinds.split(","))
    out = [e for e in episodes if e.kind in wanted]
    if not out:
        raise SystemExit(f"{flag} {kinds}: no episodes of those kinds (have {sorted({e.kind for e in episodes})})")
    return out


def batch_from_pairs(episodes, pairs, references: list[int] | None = None, k: int = 0):
    """(unique frames [U,H,W,3], image_index [(ref_1..ref_k, i, j)], instructions, labels [B, 2 + k + 2]).

    With `references` (one successful episode index per pair) each row first shows k frames of that
    episode (`reference_indices`). Labels: delta, done, then every shown frame's own progress (in image
    order) for the optional auxiliary loss.
    """
    slot, frames, index, labels = {}, [], [], []
    for n, p in enumerate(pairs):
        shown = [(references[n], int(t)) for t in reference_indices(episodes[references[n]], k)] if k else []
        shown += [(p.episode, p.i), (p.episode, p.j)]
        for key in shown:
            if key not in slot:
                slot[key] = len(frames)
                frames.append(episodes[key[0]].frames[key[1]])
        index.append(tuple(slot[key] for key in shown))
        labels.append([p.delta, p.done] + [episodes[e].progress[t] for e, t in shown])
    return np.stack(frames), index, [p.instruction for p in pairs], np.array(labels, dtype=np.float32)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--label", default="relative", choices=["relative", "absolute"])
    ap.add_argument("--stride", type=int, default=4, help="frame gap of 'local' pairs and of the evaluation chain")
    ap.add_argument("--mix", default="", help="pair mixture, e.g. forward=0.35,reverse=0.2,local=0.2,stagnation=0.1,mismatch=0.15")
    ap.add_argument("--done-weight", type=float, default=1.0)
    ap.add_argument("--aux-weight", type=float, default=0.5, help="per-frame progress auxiliary loss (regression head)")
    ap.add_argument("--reference-frames", type=int, default=0,
                    help="show k frames (0%%..100%%) of another successful episode before every pair (in-context "
                         "reference); evaluation uses the first successful training episode, saved with the model")
    ap.add_argument("--train-kinds", default="", help="train only on episodes of these kinds (comma-separated, "
                    "e.g. expert,noisy to leave policy rollouts out); default: all")
    ap.add_argument("--eval-kinds", default="", help="evaluate only on held-out episodes of these kinds; default: all")
    ap.add_argument("--eval-pairs", type=int, default=512)
    a = ap.parse_args(argv)
    args = train_args_from(a)

    eps = load_episodes(a.data)
    train_eps, test_eps = split_episodes(eps, a.held_out_frac)
    # Kinds filter after the split, so runs with different filters share the same held-out scenes.
    train_eps, test_eps = of_kinds(train_eps, a.train_kinds, "--train-kinds"), of_kinds(test_eps, a.eval_kinds, "--eval-kinds")
    print(f"[progress] {len(train_eps)} train episodes (seeds {sorted({e.seed for e in train_eps})}), "
          f"{len(test_eps)} held-out (seeds {sorted({e.seed for e in test_eps})})", flush=True)
    mix = PairMix(**{k: float(v) for k, v in (kv.split("=") for kv in a.mix.split(",") if kv)})
    k = a.reference_frames
    cfg = reference_config(k, model_path=a.model, head=a.head, aux_weight=a.aux_weight if a.head == "regression" else 0.0)
    # The reference a user of the trained model would have: one successful demo (not a held-out episode).
    default_ref = None
    if k:
        demos = [e for e in train_eps if e.succeeded]
        if not demos:
            raise SystemExit("--reference-frames needs at least one successful training episode in --data")
        demo = demos[0]
        default_ref = demo.frames[reference_indices(demo, k)]

    def batch_fn(step: int):
        rng = np.random.default_rng([args.seed, step])
        pairs = sample_pairs(train_eps, args.batch, rng, mix, a.stride, label=a.label)
        refs = sample_references(train_eps, pairs, rng) if k else None
        return batch_from_pairs(train_eps, pairs, refs, k)

    def eval_fn(model):
        return evaluate_progress(model, test_eps, a.stride, a.eval_pairs, seed=1, label=a.label)

    def make_model():
        m = VLMReward(cfg)
        m.reference = default_ref
        return m

    if a.eval_only:
        return evaluate_checkpoint(a.eval_only, VLMReward.load, eval_fn, a.out, a.threads)
    result = train(make_model, VLMReward.load, batch_fn, args, eval_fn,
                   loss_weights={"done": a.done_weight}, name="progress")
    result["data"] = {"files": a.data, "train_episodes": len(train_eps), "held_out_episodes": len(test_eps),
                      "held_out_seeds": sorted({e.seed for e in test_eps}),
                      "train_kinds": a.train_kinds or "all", "eval_kinds": a.eval_kinds or "all"}
    print(json.dumps({k: result[k] for k in ("step", "train_wall_s")}))
    return result


if __name__ == "__main__":
    main()

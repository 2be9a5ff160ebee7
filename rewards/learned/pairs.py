"""Training pairs for the progress model, and episode splits.

A pair is (episode, earlier-or-later frame i, frame j, instruction) with labels:

* ``delta``: the signed progress change from frame i to frame j in percent. ``relative`` labels (the
  default) are `progress.delta_label(100 p_i, 100 p_j)`, the inverse of VLAC's value recursion, so
  chaining consecutive deltas reproduces the progress; ``absolute`` labels are 100 (p_j - p_i).
* ``done``: the env's success flag at frame j.

Kinds (mixture weights in `PairMix`):

* ``forward``     i < j from any episode (failed episodes' progress can go down: drop).
* ``reverse``     the same with i > j: negative deltas.
* ``local``       |i - j| = the evaluation stride, either direction (what the value chain sees).
* ``stagnation``  i == j: delta 0.
* ``mismatch``    a forward or reverse pair under another task's instruction: delta 0, done 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rewards.learned.progress import delta_label

KINDS = ("forward", "reverse", "local", "stagnation", "mismatch")

# Instructions of other tasks, for mismatched-instruction negatives: the first list trains, the second
# is only used for evaluation (unseen instructions).
MISMATCH_TRAIN = (
    "open the door",
    "stack the red cube on top of the green cube",
    "pick up the can and place it into its bin",
    "put the square nut on the square peg",
    "pick up the milk and place it into its bin",
    "turn on the stove",
)
MISMATCH_EVAL = (
    "pick up the bread and place it into its bin",
    "close the top drawer of the cabinet",
    "put the bowl on the plate",
)


@dataclass
class PairMix:
    forward: float = 0.35
    reverse: float = 0.2
    local: float = 0.2
    stagnation: float = 0.1
    mismatch: float = 0.15

    def probs(self) -> np.ndarray:
        p = np.array([getattr(self, k) for k in KINDS], dtype=np.float64)
        if p.min() < 0 or p.sum() <= 0:
            raise ValueError(f"bad pair mixture {self}")
        return p / p.sum()


@dataclass
class Pair:
    episode: int
    i: int
    j: int
    instruction: str
    delta: float
    done: float
    kind: str


def pair_labels(progress: np.ndarray, success: np.ndarray, i: int, j: int, mismatched: bool = False,
                label: str = "relative") -> tuple[float, float]:
    """(delta percent, done) of frames i -> j of one episode (progress in [0, 1], success bool per frame)."""
    if mismatched:
        return 0.0, 0.0
    a, b = 100.0 * float(progress[i]), 100.0 * float(progress[j])
    if label == "relative":
        d = float(delta_label(a, b))
    elif label == "absolute":
        d = b - a
    else:
        raise ValueError(f"label must be relative or absolute, got {label!r}")
    return d, float(bool(success[j]))


def sample_pairs(episodes, n: int, rng: np.random.Generator, mix: PairMix | None = None, stride: int = 4,
                 mismatch_instructions=MISMATCH_TRAIN, label: str = "relative") -> list[Pair]:
    """`n` pairs from `episodes` (objects with progress, success, instruction, __len__)."""
    mix = mix or PairMix()
    kinds = rng.choice(len(KINDS), size=n, p=mix.probs())
    out = []
    for k in kinds:
        kind = KINDS[k]
        e = int(rng.integers(len(episodes)))
        ep = episodes[e]
        T1 = len(ep)
        if kind == "stagnation" or T1 < 2:
            i = j = int(rng.integers(T1))
        elif kind == "local":
            s = min(stride, T1 - 1)
            i = int(rng.integers(T1 - s))
            i, j = (i, i + s) if rng.random() < 0.5 else (i + s, i)
        else:
            i, j = sorted(rng.choice(T1, size=2, replace=False).tolist())
            if kind == "reverse" or (kind == "mismatch" and rng.random() < 0.5):
                i, j = j, i
        instr = ep.instruction
        if kind == "mismatch":
            others = [s for s in mismatch_instructions if s != ep.instruction]
            instr = others[int(rng.integers(len(others)))]
        d, done = pair_labels(ep.progress, ep.success, i, j, kind == "mismatch", label)
        out.append(Pair(e, i, j, instr, d, done, kind))
    return out


def reference_indices(ep, k: int) -> np.ndarray:
    """k frame indices [k] of a successful episode, evenly spaced from its first frame to its first success."""
    hits = np.flatnonzero(ep.success)
    if not len(hits):
        raise ValueError(f"a reference trajectory must come from a successful episode (seed {ep.seed} is not)")
    return np.round(np.linspace(0, int(hits[0]), k)).astype(int)


def sample_references(episodes, pairs: list[Pair], rng: np.random.Generator) -> list[int]:
    """Per pair, the index of a successful episode to show as its in-context reference, from another sim seed
    when one exists (a reference that contains the pair's own frames would let the model copy, not compare)."""
    succ = [k for k, e in enumerate(episodes) if e.succeeded]
    if not succ:
        raise ValueError("no successful episode to draw in-context references from")
    out = []
    for p in pairs:
        pool = [k for k in succ if episodes[k].seed != episodes[p.episode].seed] or succ
        out.append(pool[int(rng.integers(len(pool)))])
    return out


def split_by_seed(episodes, held_out_frac: float = 0.2, seed: int = 0) -> tuple[list[int], list[int]]:
    """(train, held-out) episode indices; all episodes of one sim seed land on the same side."""
    seeds = sorted({e.seed for e in episodes})
    rng = np.random.default_rng(seed)
    n_held = max(1, int(round(held_out_frac * len(seeds)))) if len(seeds) > 1 else 0
    held = set(rng.permutation(seeds)[:n_held].tolist())
    train = [k for k, e in enumerate(episodes) if e.seed not in held]
    test = [k for k, e in enumerate(episodes) if e.seed in held]
    return train, test


def consecutive_pairs(T1: int, stride: int) -> list[tuple[int, int]]:
    """Frame index pairs (t - stride, t) covering 0..T1-1 at `stride` (the last frame always included)."""
    idx = list(range(0, T1, stride))
    if idx[-1] != T1 - 1:
        idx.append(T1 - 1)
    return list(zip(idx[:-1], idx[1:]))

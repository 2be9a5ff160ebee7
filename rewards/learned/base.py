"""One interface for learned reward models: episodes (frames + instruction) in, per-step rewards out.

A query is an episode so far: frames ``o_0 .. o_T`` (uint8 [T+1, H, W, 3]) and its instruction. The
model returns T per-step rewards, r_t for the transition o_{t-1} -> o_t (t = 1..T):

* frame models (CLIP reward, task-completion PRM): r_t = score(o_t, instruction);
* pair models (progress): r_t = v_t - v_{t-1}, the value chained from the deltas of consecutive frames.

Calls are batched across queries (one model call for all new frames / pairs of a batch) and every
frame score or pair output is kept in an LRU cache keyed on frame hashes, so calling the model on a
growing episode after every env step only computes the newest step: `last_rewards` is that per-step
entry point (vectorized envs: one query per env).

    rm = ClipReward(...)                       # or ProgressReward.load(dir), PRMReward.load(dir)
    per_step = rm([Query(frames, "lift the red cube")])[0]      # [T]
    r_now = rm.last_rewards([Query(f, instr) for f, instr in zip(episodes, instructions)])  # [N]
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np


@dataclass
class Query:
    """An episode (so far) to score: frames o_0..o_T and the language instruction."""

    frames: Any  # uint8 array [T+1, H, W, 3] or a list of [H, W, 3] arrays
    instruction: str

    def frame(self, t: int) -> np.ndarray:
        return np.asarray(self.frames[t])

    def __len__(self) -> int:
        return len(self.frames)


def frame_key(frame) -> bytes:
    """A 16-byte content hash of a frame (shape and dtype included): ~10 us for an 84x84 RGB frame."""
    a = np.ascontiguousarray(frame)
    h = hashlib.blake2b(a.data, digest_size=16)
    h.update(repr((a.shape, a.dtype.str)).encode())
    return h.digest()


class LRUCache:
    """A bounded mapping with least-recently-used eviction, and hit/miss counters."""

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._d: OrderedDict = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: Hashable, default=None):
        if key in self._d:
            self._d.move_to_end(key)
            self.hits += 1
            return self._d[key]
        self.misses += 1
        return default

    def put(self, key: Hashable, value) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.maxsize:
            self._d.popitem(last=False)

    def __contains__(self, key) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)

    def clear(self) -> None:
        self._d.clear()
        self.hits = self.misses = 0


def cached_batch(cache: LRUCache, keys: list, compute: Callable[[list[int]], list], batch_size: int) -> list:
    """Values for `keys`: cached ones from `cache`, the rest computed by `compute(indices)` in chunks.

    Duplicate keys in one call are computed once.
    """
    out: list = [None] * len(keys)
    todo: dict = {}
    for i, k in enumerate(keys):
        v = cache.get(k)
        if v is None:
            todo.setdefault(k, []).append(i)
        else:
            out[i] = v
    firsts = [idx[0] for idx in todo.values()]
    for s in range(0, len(firsts), max(1, batch_size)):
        chunk = firsts[s : s + batch_size]
        for i, v in zip(chunk, compute(chunk)):
            cache.put(keys[i], v)
            for j in todo[keys[i]]:
                out[j] = v
    return out


class RewardModel:
    """Base class: subclasses implement `__call__(queries) -> list of [T] reward arrays`."""

    def __call__(self, queries: Sequence[Query]) -> list[np.ndarray]:
        raise NotImplementedError

    def last_rewards(self, queries: Sequence[Query]) -> np.ndarray:
        """The reward of the newest step of each query ([N]; 0 for a query with a single frame)."""
        return np.array([r[-1] if len(r) else 0.0 for r in self(queries)], dtype=np.float64)

    def rewards(self, frames, instruction: str) -> np.ndarray:
        """Per-step rewards [T] of one episode."""
        return self([Query(frames, instruction)])[0]


class FrameRewardModel(RewardModel):
    """r_t = score(o_t, instruction). Subclasses implement `_score(frames [n,H,W,3], instructions) -> [n]`."""

    batch_size: int = 64

    def __init__(self, cache_size: int = 8192) -> None:
        self.cache = LRUCache(cache_size)

    def _score(self, frames: np.ndarray, instructions: list[str]) -> np.ndarray:
        raise NotImplementedError

    def score_frames(self, frames: Sequence, instructions: Sequence[str]) -> np.ndarray:
        """Scores of frames (cached by (frame hash, instruction)), batched over all of them."""
        frames = list(frames)
        keys = [(frame_key(f), s) for f, s in zip(frames, instructions)]

        def compute(idx: list[int]) -> list[float]:
            return [float(x) for x in self._score(np.stack([np.asarray(frames[i]) for i in idx]), [instructions[i] for i in idx])]

        return np.asarray(cached_batch(self.cache, keys, compute, self.batch_size), dtype=np.float64)

    def __call__(self, queries: Sequence[Query]) -> list[np.ndarray]:
        frames, instrs, sizes = [], [], []
        for q in queries:
            n = max(len(q) - 1, 0)
            frames.extend(q.frame(t) for t in range(1, n + 1))
            instrs.extend([q.instruction] * n)
            sizes.append(n)
        scores = self.score_frames(frames, instrs) if frames else np.zeros(0)
        out, k = [], 0
        for n in sizes:
            out.append(self._to_rewards(scores[k : k + n]))
            k += n
        return out

    def _to_rewards(self, scores: np.ndarray) -> np.ndarray:
        return scores

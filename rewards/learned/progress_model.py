"""The VLAC-style progress reward model: (earlier frame, later frame, instruction) -> (delta %, done prob).

`ProgressReward` puts a trained `VLMReward` behind the common reward interface (rewards.learned.base):
consecutive frames of an episode give deltas, `values_from_deltas` chains them into values, and the
per-step reward is the value change (scaled to [-1, 1] by default). Pair outputs are LRU-cached by
(frame hash, frame hash, instruction), so scoring a growing episode after every env step costs one
new pair per step. `evaluate_progress` computes the held-out quality numbers (VOC, sign accuracy,
done F1, mismatched-instruction score).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from rewards.learned.base import LRUCache, Query, RewardModel, cached_batch, frame_key
from rewards.learned.metrics import f1_score, nanmean, spearman
from rewards.learned.pairs import MISMATCH_EVAL, MISMATCH_TRAIN, PairMix, consecutive_pairs, sample_pairs
from rewards.learned.progress import DONE_THRESHOLD, step_rewards, values_from_deltas
from rewards.learned.vlm_reward import VLMReward, VLMRewardConfig

PROGRESS_CONFIG = VLMRewardConfig()  # two frames, outputs (delta, done)


def model_reference(model: VLMReward, reference: np.ndarray | None = None) -> np.ndarray | None:
    """The in-context reference frames [k, H, W, 3] a query to `model` shows (None for a model without one):
    `reference` if given, else the one saved with the model; a clear error when neither exists."""
    k = model.cfg.reference_frames
    if not k:
        return None
    ref = reference if reference is not None else model.reference
    if ref is None:
        raise ValueError(f"this progress model shows {k} in-context reference frames: pass reference= "
                         "(frames of a successful episode, 0%..100%)")
    if len(ref) != k:
        raise ValueError(f"reference has {len(ref)} frames, the model was trained with {k}")
    return np.asarray(ref)


@torch.no_grad()
def predict_pairs(model: VLMReward, frames: np.ndarray, pairs: Sequence[tuple[int, int]], instructions: Sequence[str],
                  batch_size: int = 64, reference: np.ndarray | None = None) -> np.ndarray:
    """[len(pairs), 2] (delta %, done prob) for index pairs into `frames` (one vision pass per frame used).

    A model trained with reference frames shows `reference` (default: its saved one) before every pair."""
    ref = model_reference(model, reference)
    k = 0 if ref is None else len(ref)
    if k:
        frames = np.concatenate([ref, frames])
        pairs = [(i + k, j + k) for i, j in pairs]
    out = []
    for s in range(0, len(pairs), batch_size):
        chunk = pairs[s : s + batch_size]
        used = sorted(set(range(k)) | {i for p in chunk for i in p})
        pos = {f: n for n, f in enumerate(used)}
        index = [tuple(range(k)) + (pos[i], pos[j]) for i, j in chunk]
        out.append(model.predict(frames[used], index, list(instructions[s : s + batch_size])))
    return np.concatenate(out) if out else np.zeros((0, 2))


def episode_values(model: VLMReward, ep, stride: int, instruction: str | None = None, upto: int | None = None):
    """(frame indices [n], values [n], done probs [n]) by chaining consecutive-frame deltas at `stride`."""
    T1 = len(ep) if upto is None else upto + 1
    pairs = consecutive_pairs(T1, stride)
    pred = predict_pairs(model, ep.frames, pairs, [instruction or ep.instruction] * len(pairs))
    return np.array([j for _, j in pairs]), values_from_deltas(pred[:, 0]), pred[:, 1]


def evaluate_progress(model: VLMReward, episodes, stride: int = 4, n_pairs: int = 512, seed: int = 0,
                      done_threshold: float = DONE_THRESHOLD, label: str = "relative") -> dict:
    """Quality numbers on (held-out) episodes.

    * voc: mean over successful episodes of Spearman(value chained from consecutive deltas, time), frames
      up to the first success (a constant value sequence counts as 0). voc_anchor: Spearman(delta(o_0, o_t), t): a constant positive predictor gets
      voc = 1 but voc_anchor = NaN/0, so it is the harder check.
    * sign_acc: sign agreement on forward / reverse / local pairs with |label| >= 5 %.
    * done F1 at `done_threshold` (and 0.5) over every (o_{t-stride}, o_t) of every episode vs success[t].
    * mismatch: mean delta, mean |delta| and done prob under other tasks' instructions (should be ~0);
      ``seen`` = instructions used as training negatives, ``unseen`` = never seen.
    """
    model.eval()
    succ = [e for e in episodes if e.succeeded]
    voc, voc_anchor, final_v = [], [], []
    done_p, done_t = [], []
    for e in episodes:
        hits = np.flatnonzero(e.success)
        if e.succeeded:
            ts = int(hits[0])
            t_idx, values, _ = episode_values(model, e, stride, upto=ts)
            voc.append(_nan0(spearman(values, t_idx)))
            final_v.append(values[-1])
            anchor = predict_pairs(model, e.frames, [(0, int(t)) for t in t_idx], [e.instruction] * len(t_idx))
            voc_anchor.append(_nan0(spearman(anchor[:, 0], t_idx)))
        pairs = consecutive_pairs(len(e), stride)
        pred = predict_pairs(model, e.frames, pairs, [e.instruction] * len(pairs))
        done_p.append(pred[:, 1])
        done_t.append(e.success[[j for _, j in pairs]])
    done_p, done_t = np.concatenate(done_p), np.concatenate(done_t)

    rng = np.random.default_rng(seed)
    mix = PairMix(forward=0.4, reverse=0.4, local=0.2, stagnation=0.0, mismatch=0.0)
    pairs = sample_pairs(episodes, n_pairs, rng, mix, stride, label=label)
    sign = {}
    preds = _predict_pair_list(model, episodes, pairs)
    labels = np.array([p.delta for p in pairs])
    kinds = np.array([p.kind for p in pairs])
    ok = np.abs(labels) >= 5.0
    agree = np.sign(preds[:, 0]) == np.sign(labels)
    for k in ("forward", "reverse", "local"):
        m = ok & (kinds == k)
        sign[k] = float(agree[m].mean()) if m.any() else math.nan
    stag_pairs = sample_pairs(episodes, n_pairs // 4, rng, PairMix(0, 0, 0, 1, 0), stride, label=label)
    stag = _predict_pair_list(model, episodes, stag_pairs)

    mism = {}
    for tag, pool in (("seen", MISMATCH_TRAIN), ("unseen", MISMATCH_EVAL)):
        mp = sample_pairs(succ or episodes, n_pairs // 2, rng, PairMix(0, 0, 0, 0, 1), stride, mismatch_instructions=pool)
        pm = _predict_pair_list(model, succ or episodes, mp)
        mism[tag] = {"mean_delta": float(pm[:, 0].mean()), "mean_abs_delta": float(np.abs(pm[:, 0]).mean()),
                     "mean_done_prob": float(pm[:, 1].mean())}
    matched = np.abs(preds[:, 0]).mean()
    f1 = f1_score(done_p >= done_threshold, done_t)
    return {
        "voc": nanmean(voc), "voc_anchor": nanmean(voc_anchor), "voc_episodes": len(voc),
        "final_value_success": nanmean(final_v),
        "sign_acc": float(agree[ok].mean()) if ok.any() else math.nan, "sign_acc_by_kind": sign,
        "delta_mae": float(np.abs(preds[:, 0] - labels).mean()), "matched_mean_abs_delta": float(matched),
        "stagnation_mean_abs_delta": float(np.abs(stag[:, 0]).mean()),
        "done": {**f1, "threshold": done_threshold, "f1_at_0.5": f1_score(done_p >= 0.5, done_t)["f1"]},
        "mismatch": mism, "episodes": len(episodes), "successful_episodes": len(succ), "stride": stride,
    }


def _nan0(x: float) -> float:
    """A constant prediction has no rank correlation: count it as 0, not as a missing episode."""
    return 0.0 if math.isnan(x) else x


def _predict_pair_list(model, episodes, pairs) -> np.ndarray:
    """Predictions for Pair objects (grouped per episode so frames are shared)."""
    out = np.zeros((len(pairs), 2))
    by_ep: dict[int, list[int]] = {}
    for k, p in enumerate(pairs):
        by_ep.setdefault(p.episode, []).append(k)
    for e, ks in by_ep.items():
        pred = predict_pairs(model, episodes[e].frames, [(pairs[k].i, pairs[k].j) for k in ks], [pairs[k].instruction for k in ks])
        out[ks] = pred
    return out


class ProgressReward(RewardModel):
    """Per-step rewards from a progress model: r_t = (v_t - v_{t-1}) * scale over consecutive frames.

    `stride` > 1 compares o_{t-stride}..o_t chains (frames between keep the last value: reward 0 except at
    multiples of the stride and the last frame). `done(queries)` gives the done flags of the newest frames.
    """

    def __init__(self, model: VLMReward, scale: float = 0.01, stride: int = 1, batch_size: int = 64,
                 cache_size: int = 16384, done_threshold: float = DONE_THRESHOLD,
                 reference: np.ndarray | None = None) -> None:
        self.model, self.scale, self.stride, self.batch_size = model.eval(), scale, stride, batch_size
        # In-context reference frames (models trained with --reference-frames); default: the saved one.
        self.reference = model_reference(model, reference)
        self.done_threshold = done_threshold
        self.cache = LRUCache(cache_size)
        self.frame_keys = LRUCache(cache_size)

    @classmethod
    def load(cls, directory: str, device: str = "cpu", **kw) -> "ProgressReward":
        return cls(VLMReward.load(directory, device), **kw)

    def _pairs(self, queries: Sequence[Query]) -> list[np.ndarray]:
        """Per query: [n_pairs, 2] predictions for its consecutive pairs (cached)."""
        keys, frames_of, sizes = [], [], []
        for q in queries:
            fk = [self._key(q.frame(t)) for t in range(len(q))]
            pairs = consecutive_pairs(len(q), self.stride) if len(q) > 1 else []
            sizes.append((pairs, len(q)))
            for i, j in pairs:
                keys.append((fk[i], fk[j], q.instruction))
                frames_of.append((q.frame(i), q.frame(j), q.instruction))

        ref = [] if self.reference is None else list(self.reference)

        def compute(idx):
            frames, image_index, instrs = list(ref), [], []
            for k in idx:
                a, b, s = frames_of[k]
                image_index.append(tuple(range(len(ref))) + (len(frames), len(frames) + 1))
                frames.extend([a, b])
                instrs.append(s)
            return list(self.model.predict(np.stack(frames), image_index, instrs))

        flat = cached_batch(self.cache, keys, compute, self.batch_size)
        out, k = [], 0
        for pairs, _ in sizes:
            out.append(np.array(flat[k : k + len(pairs)]).reshape(len(pairs), 2))
            k += len(pairs)
        return out

    def _key(self, frame) -> bytes:
        return frame_key(frame)

    def __call__(self, queries: Sequence[Query]) -> list[np.ndarray]:
        out = []
        for q, pred in zip(queries, self._pairs(queries)):
            T = len(q) - 1
            r = np.zeros(max(T, 0))
            if len(pred):
                ends = [j for _, j in consecutive_pairs(len(q), self.stride)]
                r[np.array(ends) - 1] = step_rewards(values_from_deltas(pred[:, 0])) * self.scale
            out.append(r)
        return out

    def done(self, queries: Sequence[Query]) -> np.ndarray:
        """Done flags [N] of the newest frame of each query (done prob >= threshold)."""
        return np.array([len(p) > 0 and p[-1, 1] >= self.done_threshold for p in self._pairs(queries)])

"""GRPO-TA temporal perturbations (VidGuard-R1): a perturbed copy of a clip, labelled fake.

A segment of length floor(T / 2) starts at round(N(0.25 T, 0.1 T)) clipped to [0, T - length].
With probability 1/3 the top-left quarter (rows < H / 2, columns < W / 2) of every frame in the
segment is frozen to that of the segment's first frame; with 1/3 the segment is played backwards;
otherwise the whole clip is played backwards.

Random draws, in this order, from the caller's `numpy.random.Generator` (so a seed fixes the result):
one `normal` (the segment start), then one `random` (the kind). Both are drawn for every kind, so the
n-th clip's draw does not depend on the kinds before it.
"""

from __future__ import annotations

import numpy as np

KINDS = ("freeze", "reverse_segment", "reverse_all")
MIN_FRAMES = 4  # below this a freeze or a segment reversal (segment of 1 frame) changes nothing


def segment_start(num_frames: int, raw: float) -> int:
    """round(raw) clipped to [0, T - floor(T / 2)]: where the perturbed segment begins."""
    length = num_frames // 2
    return int(min(max(round(raw), 0), num_frames - length))


def freeze_quarter(frames: np.ndarray, start: int, length: int) -> np.ndarray:
    """A copy of `frames` [T, H, W, C] whose frames start..start+length-1 show, in rows < H/2 and
    columns < W/2, the pixels of frame `start` (for odd H or W the middle row / column is included:
    row (H - 1) / 2 < H / 2)."""
    out = frames.copy()
    rows, cols = (frames.shape[1] + 1) // 2, (frames.shape[2] + 1) // 2
    out[start:start + length, :rows, :cols] = frames[start, :rows, :cols]
    return out


def reverse_segment(frames: np.ndarray, start: int, length: int) -> np.ndarray:
    """A copy of `frames` [T, ...] with frames start..start+length-1 in reverse order."""
    out = frames.copy()
    out[start:start + length] = frames[start:start + length][::-1]
    return out


def perturb(frames: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """One temporally perturbed copy of a clip.

    Args: frames [T, H, W, C] (any dtype; T >= 4), rng: the generator to draw from. The input is
    never modified.
    Returns: (perturbed [T, H, W, C], same dtype, a new array; info {"kind": one of KINDS, "start",
    "length"}): the span that was changed, (0, T) for "reverse_all".
    """
    if not isinstance(frames, np.ndarray) or frames.ndim != 4:
        raise ValueError(f"perturb: frames must be a [T, H, W, C] array, got {getattr(frames, 'shape', type(frames))}")
    t = frames.shape[0]
    if t < MIN_FRAMES:
        raise ValueError(f"perturb: a clip of {t} frames has no perturbation that changes it (need >= {MIN_FRAMES})")
    length = t // 2
    start = segment_start(t, rng.normal(0.25 * t, 0.1 * t))
    u = rng.random()
    if u < 1 / 3:
        return freeze_quarter(frames, start, length), {"kind": "freeze", "start": start, "length": length}
    if u < 2 / 3:
        return reverse_segment(frames, start, length), {"kind": "reverse_segment", "start": start, "length": length}
    return frames[::-1].copy(), {"kind": "reverse_all", "start": 0, "length": t}

"""Progress values from signed progress deltas (VLAC's recursion), per-step rewards, done detection.

A progress model compares two observations and answers a signed delta ``c`` in percent. Deltas are
*relative*: a positive ``c`` closes ``c`` percent of the remaining gap to 100, a negative one undoes
progress. Starting from v0 = 0, each delta updates the value (percent):

* ``c > 0``:            v <- v + (100 - v) * c / 100
* ``c < 0`` and v > 50: v <- max(10, 100 - (100 - v) / (100 + c) * 100)
* ``c < 0`` and v <= 50: v <- v + v * c / 100
* ``c = 0``:            v unchanged

Deltas are clipped to [-100, 100] first (c = -100 from v > 50 gives the floor 10).
`delta_label(p_from, p_to)` is the inverse of one update: the delta that moves the value from
``p_from`` to ``p_to``. Training labels use it, so chaining the model's consecutive-frame deltas with
`values_from_deltas` reproduces the progress it was trained on.

The per-step reward is the change of the value (r_t = v_t - v_{t-1}, v_0 = 0); the episode is done
when the done probability reaches a threshold (default 0.9).
"""

from __future__ import annotations

import numpy as np

DONE_THRESHOLD = 0.9


def value_step(v: float, c: float) -> float:
    """One update of the value `v` (percent) by the delta `c` (percent)."""
    c = float(min(100.0, max(-100.0, c)))
    if c > 0:
        return v + (100.0 - v) * c / 100.0
    if c < 0:
        if v > 50.0:
            if c <= -100.0:
                return 10.0  # the limit of the formula as 100 + c -> 0
            return max(10.0, 100.0 - (100.0 - v) / (100.0 + c) * 100.0)
        return v + v * c / 100.0
    return v


def values_from_deltas(deltas) -> np.ndarray:
    """Values [T] (percent) after each of the T deltas, starting from v0 = 0 (not included)."""
    v, out = 0.0, []
    for c in np.asarray(deltas, dtype=np.float64).reshape(-1):
        v = value_step(v, float(c))
        out.append(v)
    return np.asarray(out, dtype=np.float64)


def delta_label(p_from, p_to):
    """The delta (percent) that moves the value from `p_from` to `p_to` (both percent, in [0, 100]).

    The inverse of `value_step`: value_step(p_from, delta_label(p_from, p_to)) == p_to except where the
    recursion cannot reach `p_to` (below 10 from above 50; 100 from 0 is fine: c = 100). Vectorised.
    """
    a = np.asarray(p_from, dtype=np.float64)
    b = np.asarray(p_to, dtype=np.float64)
    up = np.where(a < 100.0, (b - a) / np.maximum(100.0 - a, 1e-9) * 100.0, 0.0)
    down_high = np.where(b < 100.0, (b - a) / np.maximum(100.0 - b, 1e-9) * 100.0, 0.0)
    down_low = np.where(a > 0.0, (b - a) / np.maximum(a, 1e-9) * 100.0, 0.0)
    c = np.where(b > a, up, np.where(b < a, np.where(a > 50.0, down_high, down_low), 0.0))
    c = np.clip(c, -100.0, 100.0)
    return float(c) if c.ndim == 0 else c


def step_rewards(values) -> np.ndarray:
    """Per-step rewards r_t = v_t - v_{t-1} with v_0 = 0 (same length as `values`)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    return np.diff(np.concatenate([[0.0], v]))


def rewards_from_deltas(deltas, scale: float = 0.01) -> np.ndarray:
    """Per-step rewards (value change, times `scale`: 0.01 turns percent into [−1, 1])."""
    return step_rewards(values_from_deltas(deltas)) * scale


def is_done(done_prob, threshold: float = DONE_THRESHOLD):
    """Done flags from done probabilities (>= threshold)."""
    return np.asarray(done_prob) >= threshold

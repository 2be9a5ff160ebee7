"""The few statistics every report and experiment summary uses: binomial and sample standard errors, and the
paired gain of an after-vs-before evaluation on the same items."""

from __future__ import annotations

import math
from collections.abc import Sequence


def binomial_stderr(p: float, n: int) -> float:
    """Standard error sqrt(p (1 - p) / n) of an accuracy p over n items (0 for n = 0)."""
    return math.sqrt(p * (1.0 - p) / n) if n > 0 else 0.0


def accuracy_cell(hits: Sequence[float]) -> dict:
    """hits: [N] 0/1 outcomes -> {"accuracy", "stderr" (binomial), "count"}; accuracy 0 when N = 0."""
    n = len(hits)
    p = sum(hits) / n if n else 0.0
    return {"accuracy": p, "stderr": binomial_stderr(p, n), "count": n}


def mean_stderr(xs: Sequence[float]) -> tuple[float, float]:
    """xs: [N] per-item values -> (mean, standard error of the mean from the sample variance).
    N = 1 gives a standard error of 0; N = 0 gives (nan, nan)."""
    n = len(xs)
    if n == 0:
        return math.nan, math.nan
    m = sum(xs) / n
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / max(n - 1, 1) / n)


def paired_gain(before: Sequence[float], after: Sequence[float]) -> tuple[float, float]:
    """before, after: [N] per-item scores of the same N items, in the same order -> (mean of after - before,
    its standard error), in the scores' units. Pairing removes the between-item variance that two independent
    standard errors would count twice. N = 1 gives a standard error of 0."""
    if len(before) != len(after) or not before:
        raise ValueError(f"paired_gain: need two equally long, non-empty lists of per-item scores, "
                         f"got {len(before)} before and {len(after)} after")
    return mean_stderr([a - b for b, a in zip(before, after)])

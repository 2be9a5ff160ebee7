"""Small metric helpers (no scipy needed): rank correlation, Pearson, F1."""

from __future__ import annotations

import math

import numpy as np


def rankdata(x) -> np.ndarray:
    """Ranks 0..n-1 with ties given their average rank."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (starts + (counts - 1) / 2.0)[inv]


def pearson(a, b) -> float:
    """Pearson correlation; NaN when either side is constant."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if len(a) < 2:
        return math.nan
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float(a @ a) * float(b @ b))
    return float(a @ b) / den if den > 0 else math.nan


def spearman(a, b) -> float:
    """Spearman rank correlation (Pearson of average ranks); NaN when either side is constant."""
    return pearson(rankdata(a), rankdata(b))


def f1_score(pred, target) -> dict:
    """Precision, recall, F1 of boolean predictions (F1 = 0 when there is nothing to find and nothing found
    is reported as NaN-free: precision/recall default to 0)."""
    p = np.asarray(pred, dtype=bool).reshape(-1)
    t = np.asarray(target, dtype=bool).reshape(-1)
    tp = int((p & t).sum())
    fp = int((p & ~t).sum())
    fn = int((~p & t).sum())
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"precision": prec, "recall": rec, "f1": f1, "tp": tp, "fp": fp, "fn": fn, "positives": int(t.sum()), "n": len(t)}


def nanmean(xs) -> float:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return float(np.mean(xs)) if xs else math.nan

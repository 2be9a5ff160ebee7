"""Skipped samples: counted by reason in run_episodes, reported by evaluation, budgeted in training.

A sample whose `reset` fails (unreadable image, bad record) is skipped so one bad file does not end a
long run; but a run that skips much of its data trains on something else than asked (an all-unreadable
dataset "trained" with NaN rewards and exit code 0). So training stops when more than
`trainer.max_skip_fraction` of the prompts of the last `trainer.skip_window` steps were skipped, or
when a step has no usable prompt at all; evaluation reports `skipped` beside its accuracy.
"""

from __future__ import annotations

from collections import deque


class SkipBudgetExceeded(RuntimeError):
    """Too many skipped samples: the run stops (message: counts, reasons, the config fields to change)."""


def count_skip(stats: dict, reason: str) -> None:
    """Count one skipped sample in a run_episodes `stats` dict: skipped_samples and skipped_reasons."""
    stats["skipped_samples"] = stats.get("skipped_samples", 0) + 1
    reasons = stats.setdefault("skipped_reasons", {})
    reasons[reason] = reasons.get(reason, 0) + 1


def merge_stats(total: dict, stats: dict) -> dict:
    """Add one run_episodes `stats` dict into `total` (in place; returned)."""
    total["skipped_samples"] = total.get("skipped_samples", 0) + stats.get("skipped_samples", 0)
    reasons = total.setdefault("skipped_reasons", {})
    for reason, n in stats.get("skipped_reasons", {}).items():
        reasons[reason] = reasons.get(reason, 0) + n
    return total


def skipped_report(stats: dict) -> dict:
    """The `skipped` entry of an evaluation report: {"count": n, "reasons": {reason: count}}."""
    return {"count": int(stats.get("skipped_samples", 0)), "reasons": dict(sorted(stats.get("skipped_reasons", {}).items()))}


def skip_metrics(stats: dict) -> dict[str, float]:
    """Per-step metrics: skipped_samples and skipped/<reason>."""
    out = {"skipped_samples": float(stats.get("skipped_samples", 0))}
    out.update({f"skipped/{r}": float(n) for r, n in stats.get("skipped_reasons", {}).items()})
    return out


def _fmt(reasons: dict) -> str:
    return ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])) or "no reason recorded"


class SkipBudget:
    """The training skip budget over a window of recent steps."""

    def __init__(self, max_fraction: float, window: int):
        self.max_fraction = max_fraction
        self.steps: deque[tuple[float, float, dict]] = deque(maxlen=window)

    def record(self, attempted: float, skipped: float, reasons: dict) -> None:
        """One step: prompts attempted and skipped (summed over processes), this process's reasons."""
        self.steps.append((float(attempted), float(skipped), dict(reasons)))

    def check(self, final: bool = False) -> None:
        """Raise SkipBudgetExceeded when the last step had no usable prompt, or when the window (full,
        or the whole run at its `final` step) skipped more than `max_fraction` of its prompts."""
        if self.max_fraction >= 1.0 or not self.steps:
            return
        attempted, skipped, reasons = self.steps[-1]
        if attempted > 0 and skipped >= attempted:
            raise SkipBudgetExceeded(
                f"no usable sample in this step: all {int(attempted)} prompts were skipped ({_fmt(reasons)}); "
                "the warnings above name each file. Fix the data, or set trainer.max_skip_fraction=1 to train on regardless")
        if not (final or len(self.steps) == self.steps.maxlen):
            return
        attempted = sum(s[0] for s in self.steps)
        skipped = sum(s[1] for s in self.steps)
        if skipped > self.max_fraction * attempted:
            merged: dict = {}
            for _, _, r in self.steps:
                merge_stats(merged, {"skipped_reasons": r})
            raise SkipBudgetExceeded(
                f"skip budget exceeded: {int(skipped)} of {int(attempted)} prompts ({skipped / attempted:.1%}) in the last "
                f"{len(self.steps)} steps were skipped ({_fmt(merged.get('skipped_reasons', {}))}), more than "
                f"trainer.max_skip_fraction={self.max_fraction}; the warnings above name each file. Fix the data, "
                "or raise trainer.max_skip_fraction / trainer.skip_window")
